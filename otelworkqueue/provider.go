package otelworkqueue

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/go-workqueue/workqueue"
	"github.com/go-workqueue/workqueue/metrics"
	"github.com/go-workqueue/workqueue/reconcile"
)

// ScopeName is the instrumentation scope of the meter a [Provider] uses.
const ScopeName = "github.com/go-workqueue/workqueue/otelworkqueue"

// Provider creates the metrics of named work queues as OpenTelemetry
// instruments of one meter, and traces reconciles. It implements
// [metrics.Provider], its optional providers [metrics.DelayedItemsProvider],
// [metrics.PriorityProvider], [metrics.ParkingProvider],
// [metrics.GroupProvider] and [metrics.UnfinishedWorkUpdatePeriodProvider],
// [reconcile.MetricsProvider] and
// [reconcile.TracingProvider]. Create it with
// [NewProvider]; the zero value is not usable. It is safe for concurrent use.
type Provider struct {
	depth          metric.Int64UpDownCounter
	adds           metric.Int64Counter
	latency        metric.Float64Histogram
	workDuration   metric.Float64Histogram
	unfinished     metric.Float64Gauge
	longestRunning metric.Float64Gauge
	retries        metric.Int64Counter
	delayed        metric.Float64Gauge
	byPriority     metric.Int64UpDownCounter
	parked         metric.Float64Gauge
	wakes          metric.Int64Counter
	parkTimeouts   metric.Int64Counter
	waitingForSlot metric.Float64Gauge
	groupsAtLimit  metric.Float64Gauge
	reconciles     metric.Int64Counter
	reconcileErrs  metric.Int64Counter
	reconcileTime  metric.Float64Histogram
	reconcileWait  metric.Float64Histogram
	activeWorkers  metric.Int64UpDownCounter
	workers        metric.Float64Gauge
	updatePeriod   time.Duration
	tracer         trace.Tracer
}

var (
	_ metrics.Provider                           = (*Provider)(nil)
	_ metrics.DelayedItemsProvider               = (*Provider)(nil)
	_ metrics.PriorityProvider                   = (*Provider)(nil)
	_ metrics.ParkingProvider                    = (*Provider)(nil)
	_ metrics.GroupProvider                      = (*Provider)(nil)
	_ metrics.UnfinishedWorkUpdatePeriodProvider = (*Provider)(nil)
	_ reconcile.MetricsProvider                  = (*Provider)(nil)
	_ reconcile.TracingProvider                  = (*Provider)(nil)
)

// Option configures a [Provider].
type Option func(*options)

type options struct {
	meterProvider  metric.MeterProvider
	tracerProvider trace.TracerProvider
	buckets        []float64
	updatePeriod   time.Duration
}

// WithMeterProvider sets the meter provider the instruments come from. The
// default is the global one, otel.GetMeterProvider().
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(o *options) { o.meterProvider = mp }
}

// WithTracerProvider sets the tracer provider the reconciles' spans come
// from. The default is the global one, otel.GetTracerProvider().
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(o *options) { o.tracerProvider = tp }
}

// WithBuckets sets the explicit bucket boundaries of the four duration
// histograms, which must increase; nil or none means [DefaultBuckets], the
// default.
func WithBuckets(buckets []float64) Option {
	return func(o *options) { o.buckets = append([]float64(nil), buckets...) }
}

// WithUnfinishedWorkUpdatePeriod sets how often queues record
// workqueue.unfinished_work and workqueue.longest_running_processor. The
// default is 500 ms.
func WithUnfinishedWorkUpdatePeriod(period time.Duration) Option {
	return func(o *options) { o.updatePeriod = period }
}

// DefaultBuckets are the bucket boundaries of the duration histograms
// unless [WithBuckets] says otherwise: 10 ns to 10 s by factors of 10, as
// in Kubernetes.
var DefaultBuckets = []float64{1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1, 10}

// NewProvider returns a provider whose instruments come from the meter
// [ScopeName] of the meter provider. An error the meter reports for an
// instrument goes to otel.Handle, and that instrument is then whatever the
// meter returned with it. It panics, with a message starting "workqueue:",
// if an option is invalid.
func NewProvider(opts ...Option) *Provider {
	o := options{buckets: DefaultBuckets}
	for _, opt := range opts {
		opt(&o)
	}
	if o.updatePeriod < 0 {
		panic(fmt.Sprintf("workqueue: otelworkqueue.NewProvider needs a non-negative update period, got %v", o.updatePeriod))
	}
	if len(o.buckets) == 0 {
		o.buckets = DefaultBuckets
	}
	for i := 1; i < len(o.buckets); i++ {
		if !(o.buckets[i] > o.buckets[i-1]) {
			panic(fmt.Sprintf("workqueue: otelworkqueue.NewProvider needs increasing buckets, got %v", o.buckets))
		}
	}
	if o.meterProvider == nil {
		o.meterProvider = otel.GetMeterProvider()
	}
	if o.tracerProvider == nil {
		o.tracerProvider = otel.GetTracerProvider()
	}
	m := o.meterProvider.Meter(ScopeName)
	handled := func(err error) {
		if err != nil {
			otel.Handle(err)
		}
	}
	upDown := func(name, desc string) metric.Int64UpDownCounter {
		i, err := m.Int64UpDownCounter(name, metric.WithDescription(desc), metric.WithUnit("{item}"))
		handled(err)
		return i
	}
	counter := func(name, desc string) metric.Int64Counter {
		i, err := m.Int64Counter(name, metric.WithDescription(desc), metric.WithUnit("{item}"))
		handled(err)
		return i
	}
	gauge := func(name, desc, unit string) metric.Float64Gauge {
		i, err := m.Float64Gauge(name, metric.WithDescription(desc), metric.WithUnit(unit))
		handled(err)
		return i
	}
	histogram := func(name, desc string) metric.Float64Histogram {
		i, err := m.Float64Histogram(name, metric.WithDescription(desc), metric.WithUnit("s"),
			metric.WithExplicitBucketBoundaries(o.buckets...))
		handled(err)
		return i
	}
	return &Provider{
		depth:          upDown("workqueue.depth", "Items waiting in the work queue to be handed to a worker."),
		adds:           counter("workqueue.adds", "Items added to the work queue; adds of an item already waiting are not counted."),
		latency:        histogram("workqueue.queue_duration", "Seconds an item waited in the work queue, from its first add until a worker got it."),
		workDuration:   histogram("workqueue.work_duration", "Seconds a worker spent on an item, from getting it until marking it done."),
		unfinished:     gauge("workqueue.unfinished_work", "Summed seconds that the items now being processed have been in progress; steady growth means stuck workers.", "s"),
		longestRunning: gauge("workqueue.longest_running_processor", "Seconds that the oldest item now being processed has been in progress.", "s"),
		retries:        counter("workqueue.retries", "Delayed adds to the work queue, including rate-limited retries."),
		delayed:        gauge("workqueue.delayed_items", "Delayed adds and park backoffs pending in the work queue.", "{delay}"),
		byPriority:     upDown("workqueue.depth_by_priority", "Items waiting in a priority work queue to be handed to a worker, by priority."),
		parked:         gauge("workqueue.parked_items", "Items parked in the work queue until an event.", "{item}"),
		wakes:          counter("workqueue.wakes", "Parks in the work queue ended by an event, by event."),
		parkTimeouts:   counter("workqueue.park_timeouts", "Parks in the work queue ended by the longest park time, without an event."),
		waitingForSlot: gauge("workqueue.items_waiting_for_slot", "Items queued in the work queue beyond the free slots of their group's concurrency limit.", "{item}"),
		groupsAtLimit:  gauge("workqueue.groups_at_limit", "Groups of the work queue with more items queued than free slots under their concurrency limit.", "{group}"),
		reconciles:     counter("workqueue.reconciles", "Reconciles of the work queue's items by a Runner, by result."),
		reconcileErrs:  counter("workqueue.reconcile_errors", "Reconciles of the work queue's items that returned an error or panicked."),
		reconcileTime:  histogram("workqueue.reconcile_duration", "Seconds a Runner's reconcile of an item of the work queue ran."),
		reconcileWait:  histogram("workqueue.reconcile_wait", "Seconds from the first add that made an item of the work queue ready to the start of its reconcile by a Runner."),
		activeWorkers:  upDownWorkers(m, handled),
		workers:        gauge("workqueue.workers", "Workers the work queue's Runner runs.", "{worker}"),
		updatePeriod:   o.updatePeriod,
		tracer:         o.tracerProvider.Tracer(ScopeName),
	}
}

func upDownWorkers(m metric.Meter, handled func(error)) metric.Int64UpDownCounter {
	i, err := m.Int64UpDownCounter("workqueue.active_workers",
		metric.WithDescription("Workers of the work queue's Runner reconciling an item."), metric.WithUnit("{worker}"))
	handled(err)
	return i
}

// queueAttrs is the attribute set of one queue's measurements.
func queueAttrs(name string) metric.MeasurementOption {
	return metric.WithAttributeSet(attribute.NewSet(attribute.String("name", name)))
}

// NewDepthMetric returns the workqueue.depth up-down counter of the queue
// name.
func (p *Provider) NewDepthMetric(name string) workqueue.GaugeMetric {
	return upDownGauge{p.depth, queueAttrs(name)}
}

// NewAddsMetric returns the workqueue.adds counter of the queue name.
func (p *Provider) NewAddsMetric(name string) workqueue.CounterMetric {
	return counter{p.adds, queueAttrs(name)}
}

// NewLatencyMetric returns the workqueue.queue_duration histogram of the
// queue name.
func (p *Provider) NewLatencyMetric(name string) workqueue.HistogramMetric {
	return histogram{p.latency, queueAttrs(name)}
}

// NewWorkDurationMetric returns the workqueue.work_duration histogram of
// the queue name.
func (p *Provider) NewWorkDurationMetric(name string) workqueue.HistogramMetric {
	return histogram{p.workDuration, queueAttrs(name)}
}

// NewUnfinishedWorkSecondsMetric returns the workqueue.unfinished_work
// gauge of the queue name.
func (p *Provider) NewUnfinishedWorkSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return gauge{p.unfinished, queueAttrs(name)}
}

// NewLongestRunningProcessorSecondsMetric returns the
// workqueue.longest_running_processor gauge of the queue name.
func (p *Provider) NewLongestRunningProcessorSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return gauge{p.longestRunning, queueAttrs(name)}
}

// NewRetriesMetric returns the workqueue.retries counter of the queue name.
func (p *Provider) NewRetriesMetric(name string) workqueue.CounterMetric {
	return counter{p.retries, queueAttrs(name)}
}

// NewDelayedItemsMetric returns the workqueue.delayed_items gauge of the
// queue name.
func (p *Provider) NewDelayedItemsMetric(name string) workqueue.SettableGaugeMetric {
	return gauge{p.delayed, queueAttrs(name)}
}

// UnfinishedWorkUpdatePeriod returns the period set with
// [WithUnfinishedWorkUpdatePeriod], or 0 for the queue's default.
func (p *Provider) UnfinishedWorkUpdatePeriod() time.Duration {
	return p.updatePeriod
}

// NewParkedItemsMetric returns the workqueue.parked_items gauge of the
// queue name.
func (p *Provider) NewParkedItemsMetric(name string) workqueue.SettableGaugeMetric {
	return gauge{p.parked, queueAttrs(name)}
}

// NewParkTimeoutsMetric returns the workqueue.park_timeouts counter of the
// queue name.
func (p *Provider) NewParkTimeoutsMetric(name string) workqueue.CounterMetric {
	return counter{p.parkTimeouts, queueAttrs(name)}
}

// NewWaitingForSlotMetric returns the workqueue.items_waiting_for_slot
// gauge of the queue name.
func (p *Provider) NewWaitingForSlotMetric(name string) workqueue.SettableGaugeMetric {
	return gauge{p.waitingForSlot, queueAttrs(name)}
}

// NewGroupsAtLimitMetric returns the workqueue.groups_at_limit gauge of
// the queue name.
func (p *Provider) NewGroupsAtLimitMetric(name string) workqueue.SettableGaugeMetric {
	return gauge{p.groupsAtLimit, queueAttrs(name)}
}

// MaxPriorityValues is how many priorities workqueue.depth_by_priority
// tells apart for one queue: the first ones the queue reports. The depth
// at any other priority is recorded with the priority "other".
const MaxPriorityValues = 25

// NewDepthWithPriorityMetric returns the workqueue.depth_by_priority
// up-down counter of the queue name, with the attributes name and
// priority. Each call starts a new count of the priorities told apart, so
// call it once per queue.
func (p *Provider) NewDepthWithPriorityMetric(name string) metrics.PriorityGauge {
	return &priorityDepth{p.byPriority, newLabelSet(MaxPriorityValues, "priority", name)}
}

// MaxEventValues is how many events workqueue.wakes tells apart for one
// queue: the first ones that end a park. Wakes by any other event are
// recorded with the event "other".
const MaxEventValues = 25

// NewWakesMetric returns the workqueue.wakes counter of the queue name,
// with the attributes name and event. Each call starts a new count of the
// events told apart, so call it once per queue.
func (p *Provider) NewWakesMetric(name string) metrics.EventCounter {
	return &wakes{p.wakes, newLabelSet(MaxEventValues, "event", name)}
}

// bg is the context of every measurement: the queues record their
// metrics under their own locks, where no caller's context is at hand.
var bg = context.Background()

// upDownGauge is a queue's gauge kept by Inc and Dec.
type upDownGauge struct {
	c     metric.Int64UpDownCounter
	attrs metric.MeasurementOption
}

func (g upDownGauge) Inc() { g.c.Add(bg, 1, g.attrs) }
func (g upDownGauge) Dec() { g.c.Add(bg, -1, g.attrs) }

type counter struct {
	c     metric.Int64Counter
	attrs metric.MeasurementOption
}

func (c counter) Inc() { c.c.Add(bg, 1, c.attrs) }

type gauge struct {
	g     metric.Float64Gauge
	attrs metric.MeasurementOption
}

func (g gauge) Set(v float64) { g.g.Record(bg, v, g.attrs) }

type histogram struct {
	h     metric.Float64Histogram
	attrs metric.MeasurementOption
}

func (h histogram) Observe(v float64) { h.h.Record(bg, v, h.attrs) }

// labelSet hands out the attribute sets of one queue's measurements with a
// second attribute whose values the queue's callers choose (a priority, an
// event): its own set for each of the first limit values, and the value
// "other" for the rest, so that the number of series stays bounded. A
// value keeps its set, so every Dec of a priority meets the Inc before it.
// It is safe for concurrent use.
type labelSet struct {
	limit int
	key   string
	queue attribute.KeyValue

	mu   sync.Mutex
	sets map[string]metric.MeasurementOption
}

func newLabelSet(limit int, key, queue string) *labelSet {
	return &labelSet{limit: limit, key: key, queue: attribute.String("name", queue), sets: map[string]metric.MeasurementOption{}}
}

// of returns the measurement option for the value v.
func (l *labelSet) of(v string) metric.MeasurementOption {
	l.mu.Lock()
	defer l.mu.Unlock()
	if o, ok := l.sets[v]; ok {
		return o
	}
	if len(l.sets) >= l.limit {
		v = "other"
		if o, ok := l.sets[v]; ok {
			return o
		}
	}
	o := metric.WithAttributeSet(attribute.NewSet(l.queue, attribute.String(l.key, v)))
	l.sets[v] = o
	return o
}

type priorityDepth struct {
	c metric.Int64UpDownCounter
	*labelSet
}

func (d *priorityDepth) Inc(priority int) { d.c.Add(bg, 1, d.of(strconv.Itoa(priority))) }
func (d *priorityDepth) Dec(priority int) { d.c.Add(bg, -1, d.of(strconv.Itoa(priority))) }

type wakes struct {
	c metric.Int64Counter
	*labelSet
}

func (w *wakes) Inc(event string) { w.c.Add(bg, 1, w.of(event)) }

// NewReconcilesMetric returns the workqueue.reconciles counter of the queue
// name, with the attributes name and result.
func (p *Provider) NewReconcilesMetric(name string) reconcile.ResultCounter {
	r := &reconciles{c: p.reconciles, byResult: map[string]metric.MeasurementOption{}}
	for _, result := range []string{reconcile.ResultSuccess, reconcile.ResultRequeue, reconcile.ResultRequeueAfter,
		reconcile.ResultParked, reconcile.ResultError, reconcile.ResultGivenUp, reconcile.ResultTerminal, reconcile.ResultPanic} {
		r.byResult[result] = metric.WithAttributeSet(attribute.NewSet(attribute.String("name", name), attribute.String("result", result)))
	}
	return r
}

// reconciles counts by result; byResult is written only before it is
// handed out, so Inc reads it without a lock.
type reconciles struct {
	c        metric.Int64Counter
	byResult map[string]metric.MeasurementOption
}

func (r *reconciles) Inc(result string) {
	if o, ok := r.byResult[result]; ok {
		r.c.Add(bg, 1, o)
	}
}

// NewReconcileErrorsMetric returns the workqueue.reconcile_errors counter
// of the queue name.
func (p *Provider) NewReconcileErrorsMetric(name string) workqueue.CounterMetric {
	return counter{p.reconcileErrs, queueAttrs(name)}
}

// NewReconcileDurationMetric returns the workqueue.reconcile_duration
// histogram of the queue name.
func (p *Provider) NewReconcileDurationMetric(name string) workqueue.HistogramMetric {
	return histogram{p.reconcileTime, queueAttrs(name)}
}

// NewReconcileWaitMetric returns the workqueue.reconcile_wait histogram of
// the queue name.
func (p *Provider) NewReconcileWaitMetric(name string) workqueue.HistogramMetric {
	return histogram{p.reconcileWait, queueAttrs(name)}
}

// NewActiveWorkersMetric returns the workqueue.active_workers up-down
// counter of the queue name.
func (p *Provider) NewActiveWorkersMetric(name string) workqueue.GaugeMetric {
	return upDownGauge{p.activeWorkers, queueAttrs(name)}
}

// NewWorkersMetric returns the workqueue.workers gauge of the queue name.
func (p *Provider) NewWorkersMetric(name string) workqueue.SettableGaugeMetric {
	return gauge{p.workers, queueAttrs(name)}
}
