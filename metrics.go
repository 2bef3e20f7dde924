package workqueue

import (
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// GaugeMetric is a metric that goes up and down, such as a queue's depth.
// Implementations must be safe for concurrent use.
type GaugeMetric interface {
	Inc()
	Dec()
}

// SettableGaugeMetric is a metric set to an absolute value, such as the
// seconds of unfinished work. Implementations must be safe for concurrent
// use.
type SettableGaugeMetric interface {
	Set(float64)
}

// CounterMetric is a metric that only goes up, such as the number of adds.
// Implementations must be safe for concurrent use.
type CounterMetric interface {
	Inc()
}

// SummaryMetric records observations into a summary. It is kept for
// compatibility with client-go's metric interfaces; the queues use
// [HistogramMetric]. Implementations must be safe for concurrent use.
type SummaryMetric interface {
	Observe(float64)
}

// HistogramMetric records observations, such as latencies in seconds, into
// a histogram. Implementations must be safe for concurrent use.
type HistogramMetric interface {
	Observe(float64)
}

// MetricsProvider creates the metrics of one named queue. A queue calls each
// method once, at construction, with its name; a nil result disables that
// one metric. Pass a provider in a queue's config; there is no global
// provider. The github.com/go-workqueue/workqueue/prometheus package will
// provide one for Prometheus.
type MetricsProvider interface {
	// NewDepthMetric: items waiting to be handed out.
	NewDepthMetric(name string) GaugeMetric
	// NewAddsMetric: items that entered the queue (collapsed duplicates do
	// not count).
	NewAddsMetric(name string) CounterMetric
	// NewLatencyMetric: seconds from an item's first add to its Get.
	NewLatencyMetric(name string) HistogramMetric
	// NewWorkDurationMetric: seconds from Get to Done.
	NewWorkDurationMetric(name string) HistogramMetric
	// NewUnfinishedWorkSecondsMetric: the summed age of every item being
	// processed, refreshed periodically.
	NewUnfinishedWorkSecondsMetric(name string) SettableGaugeMetric
	// NewLongestRunningProcessorSecondsMetric: the age of the oldest item
	// being processed, refreshed periodically.
	NewLongestRunningProcessorSecondsMetric(name string) SettableGaugeMetric
	// NewRetriesMetric: calls to AddAfter, which AddRateLimited makes.
	NewRetriesMetric(name string) CounterMetric
}

// unfinishedWorkUpdatePeriod is how often a queue with metrics refreshes its
// unfinished-work gauges, as in Kubernetes.
const unfinishedWorkUpdatePeriod = 500 * time.Millisecond

type noopMetric struct{}

func (noopMetric) Inc()            {}
func (noopMetric) Dec()            {}
func (noopMetric) Set(float64)     {}
func (noopMetric) Observe(float64) {}

// orNoop replaces a nil metric from a provider with one that does nothing.
func orNoop[M any](metric M) M {
	if any(metric) == nil {
		return any(noopMetric{}).(M)
	}
	return metric
}

// queueMetrics records the metrics of one Typed queue. Its add, get, done and
// updateUnfinishedWork methods must be called with the queue's lock held,
// which also guards the timestamp maps.
type queueMetrics[T comparable] struct {
	clock                   clock.WithTicker
	depth                   GaugeMetric
	adds                    CounterMetric
	latency                 HistogramMetric
	workDuration            HistogramMetric
	unfinishedWorkSeconds   SettableGaugeMetric
	longestRunningProcessor SettableGaugeMetric

	addedAt   map[T]time.Time // first add of each item waiting to be handed out
	startedAt map[T]time.Time // Get of each item being processed

	queueLock *sync.Mutex
	stopOnce  sync.Once
	stopCh    chan struct{}
	loopDone  chan struct{}
}

// newQueueMetrics returns nil, meaning no metrics at all, unless both a
// provider and a name are given. Otherwise it starts the goroutine that
// refreshes the unfinished-work gauges under queueLock.
func newQueueMetrics[T comparable](provider MetricsProvider, name string, clk clock.WithTicker, queueLock *sync.Mutex) *queueMetrics[T] {
	if provider == nil || name == "" {
		return nil
	}
	m := &queueMetrics[T]{
		clock:                   clk,
		depth:                   orNoop(provider.NewDepthMetric(name)),
		adds:                    orNoop(provider.NewAddsMetric(name)),
		latency:                 orNoop(provider.NewLatencyMetric(name)),
		workDuration:            orNoop(provider.NewWorkDurationMetric(name)),
		unfinishedWorkSeconds:   orNoop(provider.NewUnfinishedWorkSecondsMetric(name)),
		longestRunningProcessor: orNoop(provider.NewLongestRunningProcessorSecondsMetric(name)),
		addedAt:                 make(map[T]time.Time),
		startedAt:               make(map[T]time.Time),
		queueLock:               queueLock,
		stopCh:                  make(chan struct{}),
		loopDone:                make(chan struct{}),
	}
	go m.refreshLoop()
	return m
}

func (m *queueMetrics[T]) add(item T) {
	m.adds.Inc()
	m.depth.Inc()
	if _, ok := m.addedAt[item]; !ok {
		m.addedAt[item] = m.clock.Now()
	}
}

func (m *queueMetrics[T]) get(item T) {
	now := m.clock.Now()
	m.depth.Dec()
	m.startedAt[item] = now
	if added, ok := m.addedAt[item]; ok {
		m.latency.Observe(now.Sub(added).Seconds())
		delete(m.addedAt, item)
	}
}

func (m *queueMetrics[T]) done(item T) {
	if started, ok := m.startedAt[item]; ok {
		m.workDuration.Observe(m.clock.Since(started).Seconds())
		delete(m.startedAt, item)
	}
}

func (m *queueMetrics[T]) updateUnfinishedWork() {
	now := m.clock.Now()
	var total, oldest float64
	for _, started := range m.startedAt {
		age := now.Sub(started).Seconds()
		total += age
		oldest = max(oldest, age)
	}
	m.unfinishedWorkSeconds.Set(total)
	m.longestRunningProcessor.Set(oldest)
}

// refreshLoop uses a timer rather than a ticker because a fake clock's
// ticker cannot be stopped.
func (m *queueMetrics[T]) refreshLoop() {
	defer close(m.loopDone)
	timer := m.clock.NewTimer(unfinishedWorkUpdatePeriod)
	defer timer.Stop()
	for {
		select {
		case <-m.stopCh:
			return
		case <-timer.C():
		}
		m.queueLock.Lock()
		m.updateUnfinishedWork()
		m.queueLock.Unlock()
		timer.Reset(unfinishedWorkUpdatePeriod)
	}
}

// stop ends the refresh goroutine and waits for it; it may be called many
// times, from many goroutines.
func (m *queueMetrics[T]) stop() {
	m.stopOnce.Do(func() { close(m.stopCh) })
	<-m.loopDone
}

// retryCounter returns the retries metric of a named queue, or nil if the
// queue records no metrics.
func retryCounter(provider MetricsProvider, name string) CounterMetric {
	if provider == nil || name == "" {
		return nil
	}
	return orNoop(provider.NewRetriesMetric(name))
}
