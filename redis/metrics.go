package redisqueue

import (
	"time"

	"github.com/go-workqueue/workqueue"
	"github.com/go-workqueue/workqueue/metrics"
)

// handleMetrics are one handle's metrics, with the Kubernetes workqueue
// names: adds, retries, latency, work duration and unfinished work count
// what this handle did; depth is the queue-wide ready count Redis reported
// to the last call of this handle that returned it.
type handleMetrics struct {
	enabled      bool
	depth        workqueue.SettableGaugeMetric
	adds         workqueue.CounterMetric
	retries      workqueue.CounterMetric
	latency      workqueue.HistogramMetric
	workDuration workqueue.HistogramMetric
	unfinished   workqueue.SettableGaugeMetric
	longest      workqueue.SettableGaugeMetric
	// parked and wakes are reported to a metrics.ParkingProvider:
	// the queue-wide parked count as Redis last reported it to this
	// handle, and the parks this handle's wakes ended, by event.
	parked workqueue.SettableGaugeMetric
	wakes  metrics.EventCounter
}

type noopEventCounter struct{}

func (noopEventCounter) Inc(string) {}

type noopMetric struct{}

func (noopMetric) Inc()            {}
func (noopMetric) Dec()            {}
func (noopMetric) Set(float64)     {}
func (noopMetric) Observe(float64) {}

func newHandleMetrics(provider workqueue.MetricsProvider, name string) *handleMetrics {
	m := &handleMetrics{
		depth: noopMetric{}, adds: noopMetric{}, retries: noopMetric{}, latency: noopMetric{},
		workDuration: noopMetric{}, unfinished: noopMetric{}, longest: noopMetric{},
		parked: noopMetric{}, wakes: noopEventCounter{},
	}
	if provider == nil {
		return m
	}
	m.enabled = true
	// A nil metric from the provider means that metric is off. A depth
	// gauge that can only go up and down cannot show a count that other
	// processes change; it is left out too.
	if depth, ok := provider.NewDepthMetric(name).(workqueue.SettableGaugeMetric); ok {
		m.depth = depth
	}
	m.adds = orNoop(provider.NewAddsMetric(name), m.adds)
	m.retries = orNoop(provider.NewRetriesMetric(name), m.retries)
	m.latency = orNoop(provider.NewLatencyMetric(name), m.latency)
	m.workDuration = orNoop(provider.NewWorkDurationMetric(name), m.workDuration)
	m.unfinished = orNoop(provider.NewUnfinishedWorkSecondsMetric(name), m.unfinished)
	m.longest = orNoop(provider.NewLongestRunningProcessorSecondsMetric(name), m.longest)
	if parking, ok := provider.(metrics.ParkingProvider); ok {
		m.parked = orNoop(parking.NewParkedItemsMetric(name), m.parked)
		m.wakes = orNoop(parking.NewWakesMetric(name), m.wakes)
	}
	return m
}

// orNoop returns metric, or noop if the provider returned nil for it.
func orNoop[M any](metric, noop M) M {
	if any(metric) == nil {
		return noop
	}
	return metric
}

// added records an add's outcome: 1 queued and 2 marked count as adds, as
// client-go counts an item put in its dirty set.
func (m *handleMetrics) added(outcome int64) {
	if outcome == 1 || outcome == 2 {
		m.adds.Inc()
	}
}

func (m *handleMetrics) setDepth(depth int64) {
	m.depth.Set(float64(depth))
}

func (m *handleMetrics) handedOut(queuedFor time.Duration) {
	m.latency.Observe(queuedFor.Seconds())
}

func (m *handleMetrics) done(worked time.Duration) {
	m.workDuration.Observe(worked.Seconds())
}

// MetricsConfig returns Options.MetricsProvider and the name this handle's
// metrics have (Options.Name, or the queue's name), so that a
// reconcile.Runner over the handle records its own metrics with them.
func (q *Queue[T]) MetricsConfig() (workqueue.MetricsProvider, string) {
	return q.provider, q.metricsName
}
