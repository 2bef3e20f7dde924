package workqueue

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-workqueue/workqueue/internal/noop"
	"github.com/go-workqueue/workqueue/metrics"
	"k8s.io/utils/clock"
)

// MetricsProvider is client-go's name for [metrics.Provider].
type MetricsProvider = metrics.Provider

// GaugeMetric is client-go's name for [metrics.Gauge].
type GaugeMetric = metrics.Gauge

// SettableGaugeMetric is client-go's name for [metrics.SettableGauge].
type SettableGaugeMetric = metrics.SettableGauge

// CounterMetric is client-go's name for [metrics.Counter].
type CounterMetric = metrics.Counter

// SummaryMetric is client-go's name for [metrics.Summary].
type SummaryMetric = metrics.Summary

// HistogramMetric is client-go's name for [metrics.Histogram].
type HistogramMetric = metrics.Histogram

// groupMetrics are the group-limit metrics of one queue; a queue without
// them has a nil *groupMetrics.
type groupMetrics struct {
	waiting, atLimit SettableGaugeMetric
}

// newGroupMetrics returns the group-limit metrics of a named queue, or nil
// if it records no metrics or the provider does not offer them.
func newGroupMetrics(provider MetricsProvider, name string) *groupMetrics {
	p, ok := provider.(metrics.GroupProvider)
	if !ok || name == "" {
		return nil
	}
	return &groupMetrics{waiting: noop.Or(p.NewWaitingForSlotMetric(name)), atLimit: noop.Or(p.NewGroupsAtLimitMetric(name))}
}

// parkingMetrics are the parking metrics of one queue; a queue without
// them has a nil *parkingMetrics.
type parkingMetrics struct {
	parked   SettableGaugeMetric
	wakes    metrics.EventCounter
	timeouts CounterMetric
}

// newParkingMetrics returns the parking metrics of a named queue, or nil if
// it records no metrics or the provider does not offer them.
func newParkingMetrics(provider MetricsProvider, name string) *parkingMetrics {
	p, ok := provider.(metrics.ParkingProvider)
	if !ok || name == "" {
		return nil
	}
	m := &parkingMetrics{parked: noop.Or(p.NewParkedItemsMetric(name)), timeouts: noop.Or(p.NewParkTimeoutsMetric(name))}
	m.wakes = noop.Or(p.NewWakesMetric(name))
	return m
}

// defaultUnfinishedWorkUpdatePeriod is how often a queue with metrics
// refreshes its unfinished-work gauges unless its provider says otherwise.
const defaultUnfinishedWorkUpdatePeriod = 500 * time.Millisecond

// queueMetrics records the metrics of one queue. Its add, remove, get and
// done methods must be called with the queue's lock held, which also guards
// the timestamps of the adds. The core keeps the times of the hand-outs, in
// its in-flight list.
type queueMetrics[T comparable] struct {
	clock                   clock.WithTicker
	depth                   GaugeMetric
	adds                    CounterMetric
	latency                 HistogramMetric
	workDuration            HistogramMetric
	unfinishedWorkSeconds   SettableGaugeMetric
	longestRunningProcessor SettableGaugeMetric

	addedAt map[T]time.Time // first add of each item waiting to be handed out
	// handedAdded is the first add of the item handed out last, zero if
	// unknown, for ItemInfo.Added.
	handedAdded time.Time

	updatePeriod time.Duration
	// refresh sets the unfinished-work gauges, taking the queue's lock.
	refresh  func()
	stopOnce sync.Once
	stopCh   chan struct{}
	loopDone chan struct{}
}

// defaultProvider holds SetProvider's provider, in a box because an
// atomic.Pointer cannot hold an interface.
var defaultProvider atomic.Pointer[providerBox]

type providerBox struct{ provider MetricsProvider }

// SetProvider sets the provider of the queues made after it without one (nil:
// none); it is safe for concurrent use. prometheus.NewProvider(
// legacyregistry.Registerer()), or crqueue.NewMetricsProvider(nil) (module
// controllerruntime) beside controller-runtime, keeps client-go's series.
func SetProvider(provider MetricsProvider) {
	if provider == nil {
		defaultProvider.Store(nil)
		return
	}
	defaultProvider.Store(&providerBox{provider})
}

// withDefaultProvider returns provider, or SetProvider's if it is nil.
func withDefaultProvider(provider MetricsProvider) MetricsProvider {
	if provider != nil {
		return provider
	}
	if box := defaultProvider.Load(); box != nil {
		return box.provider
	}
	return nil
}

// warnedNoProvider holds the names of the queues made without a provider
// that were logged: a program switched from client-go, whose blank import
// of a provider no longer reaches these queues, is told once per queue.
var warnedNoProvider sync.Map

// warnIfNoProvider logs, once per queue name, that a named queue without a
// provider records no metrics, and how to give it one.
func warnIfNoProvider(provider MetricsProvider, name string, logger *slog.Logger) {
	if provider != nil || name == "" {
		return
	}
	if _, warned := warnedNoProvider.LoadOrStore(name, true); warned {
		return
	}
	logger.Warn("workqueue: a named queue without a MetricsProvider records no metrics; "+
		"set one for every queue with workqueue.SetProvider(prometheus.NewProvider(registry)), "+
		"or in the queue's config, with github.com/go-workqueue/workqueue/prometheus (logged once per queue name)", "queue", name)
}

// newQueueMetrics returns nil, meaning no metrics at all, unless both a
// provider and a name are given. Its start runs the goroutine that calls
// refresh periodically.
func newQueueMetrics[T comparable](provider MetricsProvider, name string, clk clock.WithTicker, refresh func()) *queueMetrics[T] {
	if provider == nil || name == "" {
		return nil
	}
	m := &queueMetrics[T]{
		clock:                   clk,
		depth:                   noop.Or(provider.NewDepthMetric(name)),
		adds:                    noop.Or(provider.NewAddsMetric(name)),
		latency:                 noop.Or(provider.NewLatencyMetric(name)),
		workDuration:            noop.Or(provider.NewWorkDurationMetric(name)),
		unfinishedWorkSeconds:   noop.Or(provider.NewUnfinishedWorkSecondsMetric(name)),
		longestRunningProcessor: noop.Or(provider.NewLongestRunningProcessorSecondsMetric(name)),
		addedAt:                 make(map[T]time.Time),
		updatePeriod:            defaultUnfinishedWorkUpdatePeriod,
		refresh:                 refresh,
		stopCh:                  make(chan struct{}),
		loopDone:                make(chan struct{}),
	}
	if p, ok := provider.(metrics.UnfinishedWorkUpdatePeriodProvider); ok {
		if period := p.UnfinishedWorkUpdatePeriod(); period > 0 {
			m.updatePeriod = period
		}
	}
	return m
}

// start runs the refresh goroutine. The queue calls it last in its
// constructor, once refresh can read everything it reads.
func (m *queueMetrics[T]) start() { go m.refreshLoop() }

func (m *queueMetrics[T]) add(item T) {
	m.adds.Inc()
	m.depth.Inc()
	if _, ok := m.addedAt[item]; !ok {
		m.addedAt[item] = m.clock.Now()
	}
}

// remove is told of an add taken back before Get handed it out.
func (m *queueMetrics[T]) remove(item T) {
	m.depth.Dec()
	delete(m.addedAt, item)
}

// get is told that item was handed out at now.
func (m *queueMetrics[T]) get(item T, now time.Time) {
	m.depth.Dec()
	added, ok := m.addedAt[item]
	m.handedAdded = added
	if ok {
		m.latency.Observe(now.Sub(added).Seconds())
		delete(m.addedAt, item)
	}
}

// done is told that an item handed out at since is done.
func (m *queueMetrics[T]) done(since time.Time) {
	m.workDuration.Observe(m.clock.Since(since).Seconds())
}

// refreshLoop uses a timer rather than a ticker because a fake clock's
// ticker cannot be stopped.
func (m *queueMetrics[T]) refreshLoop() {
	defer close(m.loopDone)
	timer := m.clock.NewTimer(m.updatePeriod)
	defer timer.Stop()
	for {
		select {
		case <-m.stopCh:
			return
		case <-timer.C():
		}
		m.refresh()
		timer.Reset(m.updatePeriod)
	}
}

// stop ends the refresh goroutine and waits for it; it may be called many
// times, from many goroutines.
func (m *queueMetrics[T]) stop() {
	m.stopOnce.Do(func() { close(m.stopCh) })
	<-m.loopDone
}

// delayingMetrics returns the retries counter and the delayed-items gauge of
// a named delaying queue; both are nil if the queue records no metrics, and
// the gauge is nil if the provider does not offer it.
func delayingMetrics(provider MetricsProvider, name string) (CounterMetric, SettableGaugeMetric) {
	if provider == nil || name == "" {
		return nil, nil
	}
	retries := noop.Or(provider.NewRetriesMetric(name))
	if p, ok := provider.(metrics.DelayedItemsProvider); ok {
		if delayed := p.NewDelayedItemsMetric(name); delayed != nil {
			return retries, delayed
		}
	}
	return retries, nil
}
