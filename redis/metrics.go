package redisqueue

import (
	"time"

	"github.com/go-workqueue/workqueue"
	"github.com/go-workqueue/workqueue/internal/noop"
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

func newHandleMetrics(provider workqueue.MetricsProvider, name string) *handleMetrics {
	m := &handleMetrics{
		depth: noop.Metric{}, adds: noop.Metric{}, retries: noop.Metric{}, latency: noop.Metric{},
		workDuration: noop.Metric{}, unfinished: noop.Metric{}, longest: noop.Metric{},
		parked: noop.Metric{}, wakes: noop.ByLabel{},
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
	m.adds = noop.Or(provider.NewAddsMetric(name))
	m.retries = noop.Or(provider.NewRetriesMetric(name))
	m.latency = noop.Or(provider.NewLatencyMetric(name))
	m.workDuration = noop.Or(provider.NewWorkDurationMetric(name))
	m.unfinished = noop.Or(provider.NewUnfinishedWorkSecondsMetric(name))
	m.longest = noop.Or(provider.NewLongestRunningProcessorSecondsMetric(name))
	if parking, ok := provider.(metrics.ParkingProvider); ok {
		m.parked = noop.Or(parking.NewParkedItemsMetric(name))
		m.wakes = noop.Or(parking.NewWakesMetric(name))
	}
	return m
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
