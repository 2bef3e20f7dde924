// Package prometheus exports the metrics of work queues to Prometheus under
// the names Kubernetes uses, so dashboards built for Kubernetes controllers
// work unchanged.
//
// Create one [Provider] per registry and pass it in each queue's config:
//
//	provider := prometheus.NewProvider(registry)
//	queue := workqueue.NewTypedRateLimitingQueueWithConfig(limiter,
//		workqueue.TypedRateLimitingQueueConfig[string]{Name: "pods", MetricsProvider: provider})
//
// Every metric has the label name, the queue's name. Subsystem workqueue:
//
//	workqueue_depth                              gauge      items waiting to be handed out
//	workqueue_adds_total                         counter    adds not collapsed into a queued item
//	workqueue_queue_duration_seconds             histogram  first add to Get
//	workqueue_work_duration_seconds              histogram  Get to Done
//	workqueue_unfinished_work_seconds            gauge      summed age of the items being processed
//	workqueue_longest_running_processor_seconds  gauge      age of the oldest item being processed
//	workqueue_retries_total                      counter    AddAfter, AddRateLimited, Reschedule, AddWithOpts calls
//	workqueue_delayed_items                      gauge      delayed adds and park backoffs pending
//	workqueue_depth_by_priority                  gauge      depth of a priority queue by priority
//	workqueue_parked_items                       gauge      items parked until an event
//	workqueue_wakes_total                        counter    parks ended by an event, by event
//	workqueue_park_timeouts_total                counter    parks ended by MaxParkTime
//	workqueue_items_waiting_for_slot             gauge      queued items beyond their group's free slots
//	workqueue_groups_at_limit                    gauge      groups with such items
//	workqueue_reconciles_total                   counter    a Runner's reconciles, by result
//	workqueue_reconcile_errors_total             counter    reconciles that returned an error or panicked
//	workqueue_reconcile_duration_seconds         histogram  how long a reconcile ran
//	workqueue_reconcile_wait_seconds             histogram  first add to the reconcile's start
//	workqueue_active_workers                     gauge      workers reconciling an item
//	workqueue_workers                            gauge      workers a Runner runs
//
// workqueue_retries_total leaves out calls after the shutdown, debounced
// AddAfter calls of zero or less and a priority queue's zero delays; without
// priorities, an item's delayed add and park backoff count apart in
// workqueue_delayed_items. A "first add" is the first since the item's last
// hand-out; for a delayed or debounced add, the end of its delay. The last
// thirteen are not in Kubernetes; the last six are a [reconcile.Runner]'s,
// over a queue that has the provider. Five stand for controller-runtime's
// controller_runtime_reconcile_total, reconcile_errors_total,
// reconcile_time_seconds, active_workers and max_concurrent_reconciles;
// workqueue_reconciles_total's label result is one of
// [reconcile.ResultSuccess] and the constants after it.
// workqueue_depth_by_priority has a second label, priority; it shows at most
// [MaxPriorityLabels] priorities per queue, and counts the depth at further
// priorities under the priority "other". workqueue_wakes_total has a
// second label, event, bounded the same way by [MaxEventLabels].
package prometheus

import (
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/go-workqueue/workqueue"
	"github.com/go-workqueue/workqueue/metrics"
	"github.com/go-workqueue/workqueue/reconcile"
)

// Provider creates the metrics of named work queues and registers them with
// one registry. It implements [metrics.Provider], its optional providers
// [metrics.DelayedItemsProvider], [metrics.PriorityProvider],
// [metrics.ParkingProvider], [metrics.GroupProvider] and
// [metrics.UnfinishedWorkUpdatePeriodProvider], and
// [reconcile.MetricsProvider]. Create it with
// [NewProvider]; the zero value is not usable. It is safe for concurrent use.
type Provider struct {
	depth          *prometheus.GaugeVec
	adds           *prometheus.CounterVec
	latency        *prometheus.HistogramVec
	workDuration   *prometheus.HistogramVec
	unfinished     *prometheus.GaugeVec
	longestRunning *prometheus.GaugeVec
	retries        *prometheus.CounterVec
	delayed        *prometheus.GaugeVec
	byPriority     *prometheus.GaugeVec // labels name and priority
	parked         *prometheus.GaugeVec
	wakes          *prometheus.CounterVec // labels name and event
	parkTimeouts   *prometheus.CounterVec
	waitingForSlot *prometheus.GaugeVec
	groupsAtLimit  *prometheus.GaugeVec
	reconciles     *prometheus.CounterVec // labels name and result
	reconcileErrs  *prometheus.CounterVec
	reconcileTime  *prometheus.HistogramVec
	reconcileWait  *prometheus.HistogramVec
	activeWorkers  *prometheus.GaugeVec
	workers        *prometheus.GaugeVec
	updatePeriod   time.Duration
}

var (
	_ metrics.Provider                           = (*Provider)(nil)
	_ metrics.DelayedItemsProvider               = (*Provider)(nil)
	_ metrics.PriorityProvider                   = (*Provider)(nil)
	_ metrics.ParkingProvider                    = (*Provider)(nil)
	_ metrics.GroupProvider                      = (*Provider)(nil)
	_ metrics.UnfinishedWorkUpdatePeriodProvider = (*Provider)(nil)
	_ reconcile.MetricsProvider                  = (*Provider)(nil)
)

// Option configures a [Provider].
type Option func(*options)

type options struct {
	namespace    string
	subsystem    string
	constLabels  prometheus.Labels
	buckets      []float64
	nativeFactor float64
	updatePeriod time.Duration
}

// WithBuckets sets the buckets of the four duration histograms, which must
// increase; nil or none means [DefaultBuckets], the default.
func WithBuckets(buckets []float64) Option {
	return func(o *options) { o.buckets = append([]float64(nil), buckets...) }
}

// WithNativeHistograms makes the four duration histograms native histograms
// as well, with the given bucket growth factor (for example 1.1); the
// classic buckets stay for scrapers that do not ask for native ones.
func WithNativeHistograms(bucketFactor float64) Option {
	return func(o *options) { o.nativeFactor = bucketFactor }
}

// WithNamespace puts a namespace before every metric name:
// namespace_workqueue_depth. The default is none.
func WithNamespace(namespace string) Option {
	return func(o *options) { o.namespace = namespace }
}

// WithSubsystem replaces the subsystem workqueue in every metric name.
func WithSubsystem(subsystem string) Option {
	return func(o *options) { o.subsystem = subsystem }
}

// WithConstLabels adds labels with fixed values to every metric.
func WithConstLabels(labels prometheus.Labels) Option {
	return func(o *options) {
		o.constLabels = make(prometheus.Labels, len(labels))
		for k, v := range labels {
			o.constLabels[k] = v
		}
	}
}

// WithUnfinishedWorkUpdatePeriod sets how often queues refresh
// workqueue_unfinished_work_seconds and
// workqueue_longest_running_processor_seconds. The default is 500 ms.
func WithUnfinishedWorkUpdatePeriod(period time.Duration) Option {
	return func(o *options) { o.updatePeriod = period }
}

// DefaultBuckets are the buckets of the duration histograms unless
// [WithBuckets] says otherwise: 10 ns to 10 s by factors of 10, as in
// Kubernetes.
var DefaultBuckets = prometheus.ExponentialBuckets(10e-9, 10, 10)

// NewProvider returns a provider that registers its metrics with reg. If reg
// already holds this package's metrics under the same names, as it does
// after an earlier NewProvider with the same options, the provider reuses
// them. It panics, with a message starting "workqueue:", if reg is nil, if
// an option is invalid, or if reg holds a different metric under one of the
// names.
func NewProvider(reg prometheus.Registerer, opts ...Option) *Provider {
	if reg == nil || isNilPointer(reg) {
		panic("workqueue: prometheus.NewProvider needs a registerer, got nil")
	}
	o := options{subsystem: "workqueue", buckets: DefaultBuckets}
	for _, opt := range opts {
		opt(&o)
	}
	if len(o.buckets) == 0 {
		o.buckets = DefaultBuckets
	}
	for i := 1; i < len(o.buckets); i++ {
		if !(o.buckets[i] > o.buckets[i-1]) {
			panic(fmt.Sprintf("workqueue: prometheus.NewProvider needs increasing buckets, got %v", o.buckets))
		}
	}
	if o.updatePeriod < 0 {
		panic(fmt.Sprintf("workqueue: prometheus.NewProvider needs a non-negative update period, got %v", o.updatePeriod))
	}
	if o.nativeFactor != 0 && o.nativeFactor <= 1 {
		panic(fmt.Sprintf("workqueue: prometheus.NewProvider needs a native histogram bucket factor above 1, got %v", o.nativeFactor))
	}

	labels := []string{"name"}
	gauge := func(name, help string) *prometheus.GaugeVec {
		return register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: o.namespace, Subsystem: o.subsystem, Name: name, Help: help, ConstLabels: o.constLabels,
		}, labels))
	}
	counter := func(name, help string) *prometheus.CounterVec {
		return register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: o.namespace, Subsystem: o.subsystem, Name: name, Help: help, ConstLabels: o.constLabels,
		}, labels))
	}
	histogram := func(name, help string) *prometheus.HistogramVec {
		return register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: o.namespace, Subsystem: o.subsystem, Name: name, Help: help, ConstLabels: o.constLabels,
			Buckets:                     o.buckets,
			NativeHistogramBucketFactor: o.nativeFactor,
		}, labels))
	}
	return &Provider{
		depth:          gauge("depth", "Items waiting in the work queue to be handed to a worker."),
		adds:           counter("adds_total", "Items added to the work queue; adds of an item already waiting are not counted."),
		latency:        histogram("queue_duration_seconds", "Seconds an item waited in the work queue, from its first add until a worker got it."),
		workDuration:   histogram("work_duration_seconds", "Seconds a worker spent on an item, from getting it until marking it done."),
		unfinished:     gauge("unfinished_work_seconds", "Summed seconds that the items now being processed have been in progress; steady growth means stuck workers."),
		longestRunning: gauge("longest_running_processor_seconds", "Seconds that the oldest item now being processed has been in progress."),
		retries:        counter("retries_total", "Delayed adds to the work queue, including rate-limited retries."),
		delayed:        gauge("delayed_items", "Delayed adds and park backoffs pending in the work queue."),
		byPriority: register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: o.namespace, Subsystem: o.subsystem, Name: "depth_by_priority", ConstLabels: o.constLabels,
			Help: "Items waiting in a priority work queue to be handed to a worker, by priority.",
		}, []string{"name", "priority"})),
		parked: gauge("parked_items", "Items parked in the work queue until an event."),
		wakes: register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: o.namespace, Subsystem: o.subsystem, Name: "wakes_total", ConstLabels: o.constLabels,
			Help: "Parks in the work queue ended by an event, by event.",
		}, []string{"name", "event"})),
		parkTimeouts:   counter("park_timeouts_total", "Parks in the work queue ended by the longest park time, without an event."),
		waitingForSlot: gauge("items_waiting_for_slot", "Items queued in the work queue beyond the free slots of their group's concurrency limit."),
		groupsAtLimit:  gauge("groups_at_limit", "Groups of the work queue with more items queued than free slots under their concurrency limit."),
		reconciles: register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: o.namespace, Subsystem: o.subsystem, Name: "reconciles_total", ConstLabels: o.constLabels,
			Help: "Reconciles of the work queue's items by a Runner, by result.",
		}, []string{"name", "result"})),
		reconcileErrs: counter("reconcile_errors_total", "Reconciles of the work queue's items that returned an error or panicked."),
		reconcileTime: histogram("reconcile_duration_seconds", "Seconds a Runner's reconcile of an item of the work queue ran."),
		reconcileWait: histogram("reconcile_wait_seconds", "Seconds from the first add that made an item of the work queue ready to the start of its reconcile by a Runner."),
		activeWorkers: gauge("active_workers", "Workers of the work queue's Runner reconciling an item."),
		workers:       gauge("workers", "Workers the work queue's Runner runs."),
		updatePeriod:  o.updatePeriod,
	}
}

// register registers c with reg, or returns the collector of the same shape
// that reg already holds.
func register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	err := reg.Register(c)
	if err == nil {
		return c
	}
	var already prometheus.AlreadyRegisteredError
	if errors.As(err, &already) {
		if existing, ok := already.ExistingCollector.(C); ok {
			return existing
		}
	}
	panic(fmt.Sprintf("workqueue: registering a workqueue metric: %v", err))
}

// DeleteQueue removes every series of the queue with the given name, so a
// program that creates queues with changing names does not export them
// forever. Call it after the queue has shut down: a queue that is still
// running would keep updating series that are no longer exported.
func (p *Provider) DeleteQueue(name string) {
	for _, vec := range p.vectors() {
		vec.DeleteLabelValues(name)
	}
	p.byPriority.DeletePartialMatch(prometheus.Labels{"name": name})
	p.wakes.DeletePartialMatch(prometheus.Labels{"name": name})
	p.reconciles.DeletePartialMatch(prometheus.Labels{"name": name})
}

// metricVector is what the gauge, counter and histogram vectors share.
type metricVector interface {
	prometheus.Collector
	DeleteLabelValues(labelValues ...string) bool
}

func (p *Provider) vectors() []metricVector {
	return []metricVector{p.depth, p.adds, p.latency, p.workDuration, p.unfinished, p.longestRunning, p.retries, p.delayed, p.byPriority, p.parked, p.wakes, p.parkTimeouts, p.waitingForSlot, p.groupsAtLimit,
		p.reconciles, p.reconcileErrs, p.reconcileTime, p.reconcileWait, p.activeWorkers, p.workers}
}

// NewDepthMetric returns the workqueue_depth gauge of the queue name.
func (p *Provider) NewDepthMetric(name string) workqueue.GaugeMetric {
	return p.depth.WithLabelValues(name)
}

// NewAddsMetric returns the workqueue_adds_total counter of the queue name.
func (p *Provider) NewAddsMetric(name string) workqueue.CounterMetric {
	return p.adds.WithLabelValues(name)
}

// NewLatencyMetric returns the workqueue_queue_duration_seconds histogram
// of the queue name.
func (p *Provider) NewLatencyMetric(name string) workqueue.HistogramMetric {
	return p.latency.WithLabelValues(name)
}

// NewWorkDurationMetric returns the workqueue_work_duration_seconds
// histogram of the queue name.
func (p *Provider) NewWorkDurationMetric(name string) workqueue.HistogramMetric {
	return p.workDuration.WithLabelValues(name)
}

// NewUnfinishedWorkSecondsMetric returns the
// workqueue_unfinished_work_seconds gauge of the queue name.
func (p *Provider) NewUnfinishedWorkSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return p.unfinished.WithLabelValues(name)
}

// NewLongestRunningProcessorSecondsMetric returns the
// workqueue_longest_running_processor_seconds gauge of the queue name.
func (p *Provider) NewLongestRunningProcessorSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return p.longestRunning.WithLabelValues(name)
}

// NewRetriesMetric returns the workqueue_retries_total counter of the queue
// name.
func (p *Provider) NewRetriesMetric(name string) workqueue.CounterMetric {
	return p.retries.WithLabelValues(name)
}

// NewDelayedItemsMetric returns the workqueue_delayed_items gauge of the
// queue name.
func (p *Provider) NewDelayedItemsMetric(name string) workqueue.SettableGaugeMetric {
	return p.delayed.WithLabelValues(name)
}

// UnfinishedWorkUpdatePeriod returns the period set with
// [WithUnfinishedWorkUpdatePeriod], or 0 for the queue's default.
func (p *Provider) UnfinishedWorkUpdatePeriod() time.Duration {
	return p.updatePeriod
}

// MaxPriorityLabels is how many priorities workqueue_depth_by_priority
// shows for one queue: the first ones the queue reports. The depth at any
// other priority is counted under the priority "other".
const MaxPriorityLabels = 25

// NewDepthWithPriorityMetric returns the workqueue_depth_by_priority gauge
// of the queue name, which a [workqueue.TypedPriorityQueue] keeps up to
// date. Each call starts a new count of the priorities shown, so call it
// once per queue.
func (p *Provider) NewDepthWithPriorityMetric(name string) metrics.PriorityGauge {
	return &priorityDepth{newBoundedSeries(MaxPriorityLabels, func(priority string) prometheus.Gauge {
		return p.byPriority.WithLabelValues(name, priority)
	})}
}

// priorityDepth is the depth by priority of one queue.
type priorityDepth struct {
	*boundedSeries[prometheus.Gauge]
}

func (d *priorityDepth) Inc(priority int) { d.get(strconv.Itoa(priority)).Inc() }
func (d *priorityDepth) Dec(priority int) { d.get(strconv.Itoa(priority)).Dec() }

// boundedSeries hands out one queue's series of a metric with a second
// label chosen by the queue's callers (a priority, an event): a series of
// its own for each of the first limit values, and a shared one, "other",
// for the rest. A value keeps its series, so a gauge's every Dec meets the
// Inc before it. It is safe for concurrent use.
type boundedSeries[M any] struct {
	limit  int
	series func(label string) M

	mu     sync.Mutex
	byName map[string]M
	other  M
	shared bool // other is made
}

func newBoundedSeries[M any](limit int, series func(label string) M) *boundedSeries[M] {
	return &boundedSeries[M]{limit: limit, series: series, byName: map[string]M{}}
}

// get returns the series of label.
func (b *boundedSeries[M]) get(label string) M {
	b.mu.Lock()
	defer b.mu.Unlock()
	if m, ok := b.byName[label]; ok {
		return m
	}
	if len(b.byName) < b.limit {
		m := b.series(label)
		b.byName[label] = m
		return m
	}
	if !b.shared {
		b.other, b.shared = b.series("other"), true
	}
	return b.other
}

// NewParkedItemsMetric returns the workqueue_parked_items gauge of the
// queue name.
func (p *Provider) NewParkedItemsMetric(name string) workqueue.SettableGaugeMetric {
	return p.parked.WithLabelValues(name)
}

// NewParkTimeoutsMetric returns the workqueue_park_timeouts_total counter
// of the queue name.
func (p *Provider) NewParkTimeoutsMetric(name string) workqueue.CounterMetric {
	return p.parkTimeouts.WithLabelValues(name)
}

// NewWaitingForSlotMetric returns the workqueue_items_waiting_for_slot
// gauge of the queue name.
func (p *Provider) NewWaitingForSlotMetric(name string) workqueue.SettableGaugeMetric {
	return p.waitingForSlot.WithLabelValues(name)
}

// NewGroupsAtLimitMetric returns the workqueue_groups_at_limit gauge of the
// queue name.
func (p *Provider) NewGroupsAtLimitMetric(name string) workqueue.SettableGaugeMetric {
	return p.groupsAtLimit.WithLabelValues(name)
}

// MaxEventLabels is how many events workqueue_wakes_total shows for one
// queue: the first ones that end a park. Wakes by any other event are
// counted under the event "other".
const MaxEventLabels = 25

// NewWakesMetric returns the workqueue_wakes_total counter of the queue
// name. Each call starts a new count of the events shown, so call it once
// per queue.
func (p *Provider) NewWakesMetric(name string) metrics.EventCounter {
	return &wakes{newBoundedSeries(MaxEventLabels, func(event string) prometheus.Counter {
		return p.wakes.WithLabelValues(name, event)
	})}
}

// wakes counts the wakes of one queue by event.
type wakes struct {
	*boundedSeries[prometheus.Counter]
}

func (w *wakes) Inc(event string) { w.get(event).Inc() }

// NewReconcilesMetric returns the workqueue_reconciles_total counter of the
// queue name, by result.
func (p *Provider) NewReconcilesMetric(name string) reconcile.ResultCounter {
	return reconciles{p.reconciles.MustCurryWith(prometheus.Labels{"name": name})}
}

type reconciles struct{ vec *prometheus.CounterVec }

func (r reconciles) Inc(result string) { r.vec.WithLabelValues(result).Inc() }

// NewReconcileErrorsMetric returns the workqueue_reconcile_errors_total
// counter of the queue name.
func (p *Provider) NewReconcileErrorsMetric(name string) workqueue.CounterMetric {
	return p.reconcileErrs.WithLabelValues(name)
}

// NewReconcileDurationMetric returns the
// workqueue_reconcile_duration_seconds histogram of the queue name.
func (p *Provider) NewReconcileDurationMetric(name string) workqueue.HistogramMetric {
	return p.reconcileTime.WithLabelValues(name)
}

// NewReconcileWaitMetric returns the workqueue_reconcile_wait_seconds
// histogram of the queue name.
func (p *Provider) NewReconcileWaitMetric(name string) workqueue.HistogramMetric {
	return p.reconcileWait.WithLabelValues(name)
}

// NewActiveWorkersMetric returns the workqueue_active_workers gauge of the
// queue name.
func (p *Provider) NewActiveWorkersMetric(name string) workqueue.GaugeMetric {
	return p.activeWorkers.WithLabelValues(name)
}

// NewWorkersMetric returns the workqueue_workers gauge of the queue name.
func (p *Provider) NewWorkersMetric(name string) workqueue.SettableGaugeMetric {
	return p.workers.WithLabelValues(name)
}

// isNilPointer reports whether v holds a nil pointer, which a nil check of
// the interface does not catch.
func isNilPointer(v any) bool {
	r := reflect.ValueOf(v)
	return r.Kind() == reflect.Pointer && r.IsNil()
}
