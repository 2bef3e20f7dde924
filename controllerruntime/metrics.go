package crqueue

import (
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/go-workqueue/workqueue"
	"github.com/go-workqueue/workqueue/metrics"
	"github.com/prometheus/client_golang/prometheus"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// The collectors below have the names, help texts and labels of those
// controller-runtime registers in its metrics.Registry, so that
// registering them there finds its own (prometheus.AlreadyRegisteredError)
// and the queue records into the very series a manager's /metrics shows.
// In another registry they are registered anew. Should the help text of a
// future controller-runtime differ, registration fails with another error
// and the queue records into unregistered collectors rather than panic.
const (
	depthHelp    = "Current depth of workqueue by workqueue and priority"
	addsHelp     = "Total number of adds handled by workqueue"
	latencyHelp  = "How long in seconds an item stays in workqueue before being requested"
	durationHelp = "How long in seconds processing an item from workqueue takes."
	unfinishHelp = "How many seconds of work has been done that " +
		"is in progress and hasn't been observed by work_duration. Large " +
		"values indicate stuck threads. One can deduce the number of stuck " +
		"threads by observing the rate at which this increases."
	longestHelp = "How many seconds has the longest running " +
		"processor for workqueue been running."
	retriesHelp = "Total number of items added to the workqueue with a non-zero delay (rate-limited requeues, explicit RequeueAfter or AddAfter calls)"

	// maxPriorities bounds the priority label's values per queue, as
	// controller-runtime does; further priorities share overflowLabel.
	maxPriorities = 25
	overflowLabel = "exceeded_cardinality_limit"
)

var labels = []string{"name", "controller"}

// collectors is the set of vectors one registry holds.
type collectors struct {
	depth      *prometheus.GaugeVec
	adds       *prometheus.CounterVec
	latency    *prometheus.HistogramVec
	duration   *prometheus.HistogramVec
	unfinished *prometheus.GaugeVec
	longest    *prometheus.GaugeVec
	retries    *prometheus.CounterVec
}

var (
	registriesMu sync.Mutex
	registries   = map[prometheus.Registerer]*collectors{}
)

// metricsFor returns a provider recording into reg's workqueue collectors,
// registering them the first time. It never panics.
func metricsFor(reg prometheus.Registerer) *provider {
	registriesMu.Lock()
	defer registriesMu.Unlock()
	c, ok := registries[reg]
	if !ok {
		buckets := prometheus.ExponentialBuckets(10e-9, 10, 12)
		hist := func(name, help string) *prometheus.HistogramVec {
			return prometheus.NewHistogramVec(prometheus.HistogramOpts{
				Subsystem: "workqueue", Name: name, Help: help, Buckets: buckets,
				NativeHistogramBucketFactor: 1.1, NativeHistogramMaxBucketNumber: 100,
				NativeHistogramMinResetDuration: time.Hour,
			}, labels)
		}
		c = &collectors{
			depth: register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
				Subsystem: "workqueue", Name: "depth", Help: depthHelp,
			}, []string{"name", "controller", "priority"})),
			adds: register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
				Subsystem: "workqueue", Name: "adds_total", Help: addsHelp,
			}, labels)),
			latency:  register(reg, hist("queue_duration_seconds", latencyHelp)),
			duration: register(reg, hist("work_duration_seconds", durationHelp)),
			unfinished: register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
				Subsystem: "workqueue", Name: "unfinished_work_seconds", Help: unfinishHelp,
			}, labels)),
			longest: register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
				Subsystem: "workqueue", Name: "longest_running_processor_seconds", Help: longestHelp,
			}, labels)),
			retries: register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
				Subsystem: "workqueue", Name: "retries_total", Help: retriesHelp,
			}, labels)),
		}
		registries[reg] = c
	}
	return &provider{c: c}
}

// register registers c in reg and returns it, or the collector reg
// already holds under the same description.
func register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	err := reg.Register(c)
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(C); ok {
			return existing
		}
	}
	return c
}

// NewMetricsProvider returns a provider that records a queue's metrics
// into reg under the names, help texts and labels of the workqueue metrics
// controller-runtime registers in its metrics.Registry, so that with
// metrics.Registry as reg (nil means metrics.Registry) they are the series
// a manager's /metrics shows. Like controller-runtime's provider, it
// labels every series with the queue's name twice, as name and as
// controller; NewDepthMetric gives workqueue_depth with priority "", as
// for a queue without priorities, and NewDepthWithPriorityMetric gives it
// by priority, with at most 25 priority labels per queue (further
// priorities share the label "exceeded_cardinality_limit").
//
// Should reg hold a collector of the same name that differs (another help
// text or labels), the metrics are recorded into collectors of their own,
// which reg does not show; NewMetricsProvider never panics. The provider
// is safe for concurrent use.
func NewMetricsProvider(reg prometheus.Registerer) metrics.PriorityProvider {
	if reg == nil {
		reg = crmetrics.Registry
	}
	return metricsFor(reg)
}

// provider is a [metrics.PriorityProvider] over one registry's
// collectors.
type provider struct{ c *collectors }

var _ metrics.PriorityProvider = (*provider)(nil)

// NewDepthMetric returns workqueue_depth for the queue with priority "".
func (p *provider) NewDepthMetric(name string) workqueue.GaugeMetric {
	return p.c.depth.WithLabelValues(name, name, "")
}

// NewAddsMetric returns workqueue_adds_total for the queue.
func (p *provider) NewAddsMetric(name string) workqueue.CounterMetric {
	return p.c.adds.WithLabelValues(name, name)
}

// NewLatencyMetric returns workqueue_queue_duration_seconds for the queue.
func (p *provider) NewLatencyMetric(name string) workqueue.HistogramMetric {
	return p.c.latency.WithLabelValues(name, name)
}

// NewWorkDurationMetric returns workqueue_work_duration_seconds for the queue.
func (p *provider) NewWorkDurationMetric(name string) workqueue.HistogramMetric {
	return p.c.duration.WithLabelValues(name, name)
}

// NewUnfinishedWorkSecondsMetric returns workqueue_unfinished_work_seconds
// for the queue.
func (p *provider) NewUnfinishedWorkSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return p.c.unfinished.WithLabelValues(name, name)
}

// NewLongestRunningProcessorSecondsMetric returns
// workqueue_longest_running_processor_seconds for the queue.
func (p *provider) NewLongestRunningProcessorSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return p.c.longest.WithLabelValues(name, name)
}

// NewRetriesMetric returns workqueue_retries_total for the queue.
func (p *provider) NewRetriesMetric(name string) workqueue.CounterMetric {
	return p.c.retries.WithLabelValues(name, name)
}

// NewDepthWithPriorityMetric returns workqueue_depth for the queue, with
// at most maxPriorities distinct priority labels.
func (p *provider) NewDepthWithPriorityMetric(name string) metrics.PriorityGauge {
	return &depthByPriority{vec: p.c.depth, name: name, seen: map[int]bool{}}
}

// depthByPriority is workqueue_depth for one queue. It is safe for
// concurrent use.
type depthByPriority struct {
	vec  *prometheus.GaugeVec
	name string

	mu   sync.Mutex
	seen map[int]bool
}

// label returns the priority label for priority: its number for the
// first maxPriorities priorities seen, overflowLabel for any other, so a
// priority keeps its label and Inc and Dec always meet.
func (d *depthByPriority) label(priority int) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.seen[priority] {
		if len(d.seen) >= maxPriorities {
			return overflowLabel
		}
		d.seen[priority] = true
	}
	return strconv.Itoa(priority)
}

// Inc adds one to the depth at priority.
func (d *depthByPriority) Inc(priority int) {
	d.vec.WithLabelValues(d.name, d.name, d.label(priority)).Inc()
}

// Dec takes one from the depth at priority.
func (d *depthByPriority) Dec(priority int) {
	d.vec.WithLabelValues(d.name, d.name, d.label(priority)).Dec()
}

// byPriorityOnly is a provider whose queues keep depth by priority only:
// its plain depth metric is nil, so no priority="" series appears beside
// the series by priority, as with controller-runtime's priority queue.
type byPriorityOnly struct{ *provider }

// NewDepthMetric returns nil.
func (byPriorityOnly) NewDepthMetric(string) workqueue.GaugeMetric { return nil }
