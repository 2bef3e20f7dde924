// Package metricstest records the metrics a queue or a Runner creates, for
// the tests of this module's packages.
package metricstest

import (
	"sync"
	"time"

	"github.com/go-workqueue/workqueue/metrics"
)

// Metric is one recorded metric: a value for gauges and counters, the
// observations for histograms. It is safe for concurrent use.
type Metric struct {
	mu           sync.Mutex
	value        float64
	observations []float64
}

func (m *Metric) Inc() { m.add(1) }
func (m *Metric) Dec() { m.add(-1) }

func (m *Metric) add(d float64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.value += d
}

func (m *Metric) Set(v float64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.value = v
}

func (m *Metric) Observe(v float64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.observations = append(m.observations, v)
}

// Recorder is a metrics.Provider that keeps every metric it makes, by queue
// name and kind, for tests to read; it also reports delays, and asks for
// Period as the unfinished-work refresh period (0: the default). Its zero
// value is ready to use, and it is safe for concurrent use.
type Recorder struct {
	Period time.Duration

	mu      sync.Mutex
	metrics map[[2]string]*Metric
}

var (
	_ metrics.DelayedItemsProvider               = (*Recorder)(nil)
	_ metrics.UnfinishedWorkUpdatePeriodProvider = (*Recorder)(nil)
)

// Metric returns the metric of queue name and kind, making it if needed.
func (p *Recorder) Metric(name, kind string) *Metric {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.metrics == nil {
		p.metrics = make(map[[2]string]*Metric)
	}
	key := [2]string{name, kind}
	if p.metrics[key] == nil {
		p.metrics[key] = &Metric{}
	}
	return p.metrics[key]
}

// Created returns how many metrics p has made.
func (p *Recorder) Created() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.metrics)
}

// Keys returns the name and kind of every metric p has made.
func (p *Recorder) Keys() [][2]string {
	p.mu.Lock()
	defer p.mu.Unlock()
	keys := make([][2]string, 0, len(p.metrics))
	for key := range p.metrics {
		keys = append(keys, key)
	}
	return keys
}

// Value returns the value of queue name's metric of kind.
func (p *Recorder) Value(name, kind string) float64 {
	m := p.Metric(name, kind)
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.value
}

// Observations returns the observations of queue name's metric of kind.
func (p *Recorder) Observations(name, kind string) []float64 {
	m := p.Metric(name, kind)
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]float64(nil), m.observations...)
}

func (p *Recorder) NewDepthMetric(name string) metrics.Gauge  { return p.Metric(name, "depth") }
func (p *Recorder) NewAddsMetric(name string) metrics.Counter { return p.Metric(name, "adds") }
func (p *Recorder) NewLatencyMetric(name string) metrics.Histogram {
	return p.Metric(name, "latency")
}
func (p *Recorder) NewWorkDurationMetric(name string) metrics.Histogram {
	return p.Metric(name, "work")
}
func (p *Recorder) NewUnfinishedWorkSecondsMetric(name string) metrics.SettableGauge {
	return p.Metric(name, "unfinished")
}
func (p *Recorder) NewLongestRunningProcessorSecondsMetric(name string) metrics.SettableGauge {
	return p.Metric(name, "longest")
}
func (p *Recorder) NewRetriesMetric(name string) metrics.Counter { return p.Metric(name, "retries") }
func (p *Recorder) NewDelayedItemsMetric(name string) metrics.SettableGauge {
	return p.Metric(name, "delayed")
}

// UnfinishedWorkUpdatePeriod returns Period.
func (p *Recorder) UnfinishedWorkUpdatePeriod() time.Duration { return p.Period }
