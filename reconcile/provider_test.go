package reconcile

import (
	"sync"

	"github.com/go-workqueue/workqueue/metrics"
)

// recordedMetric is one metric of a recordingProvider: a value for gauges
// and counters, the observations for histograms.
type recordedMetric struct {
	mu           sync.Mutex
	value        float64
	observations []float64
}

func (m *recordedMetric) Inc() { m.add(1) }
func (m *recordedMetric) Dec() { m.add(-1) }
func (m *recordedMetric) add(d float64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.value += d
}
func (m *recordedMetric) Set(v float64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.value = v
}
func (m *recordedMetric) Observe(v float64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.observations = append(m.observations, v)
}

// recordingProvider is a queue's MetricsProvider that keeps every metric it
// makes, by queue name and kind, for tests to read.
type recordingProvider struct {
	mu      sync.Mutex
	metrics map[[2]string]*recordedMetric
}

func (p *recordingProvider) metric(name, kind string) *recordedMetric {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.metrics == nil {
		p.metrics = make(map[[2]string]*recordedMetric)
	}
	key := [2]string{name, kind}
	if p.metrics[key] == nil {
		p.metrics[key] = &recordedMetric{}
	}
	return p.metrics[key]
}

func (p *recordingProvider) value(name, kind string) float64 {
	m := p.metric(name, kind)
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.value
}

func (p *recordingProvider) observations(name, kind string) []float64 {
	m := p.metric(name, kind)
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]float64(nil), m.observations...)
}

func (p *recordingProvider) NewDepthMetric(name string) metrics.Gauge {
	return p.metric(name, "depth")
}
func (p *recordingProvider) NewAddsMetric(name string) metrics.Counter {
	return p.metric(name, "adds")
}
func (p *recordingProvider) NewLatencyMetric(name string) metrics.Histogram {
	return p.metric(name, "latency")
}
func (p *recordingProvider) NewWorkDurationMetric(name string) metrics.Histogram {
	return p.metric(name, "work")
}
func (p *recordingProvider) NewUnfinishedWorkSecondsMetric(name string) metrics.SettableGauge {
	return p.metric(name, "unfinished")
}
func (p *recordingProvider) NewLongestRunningProcessorSecondsMetric(name string) metrics.SettableGauge {
	return p.metric(name, "longest")
}
func (p *recordingProvider) NewRetriesMetric(name string) metrics.Counter {
	return p.metric(name, "retries")
}
