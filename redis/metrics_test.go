package redisqueue

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/go-workqueue/workqueue"
	"github.com/go-workqueue/workqueue/redis/redistest"
)

// partialProvider returns a counting metric for every name in on and nil,
// which MetricsProvider documents as "this metric off", for the others.
type partialProvider struct {
	on    map[string]bool
	calls map[string]*countingMetric
}

type countingMetric struct{ calls int }

func (m *countingMetric) Inc()            { m.calls++ }
func (m *countingMetric) Dec()            { m.calls++ }
func (m *countingMetric) Set(float64)     { m.calls++ }
func (m *countingMetric) Observe(float64) { m.calls++ }

func (p partialProvider) metric(kind string) *countingMetric {
	if !p.on[kind] {
		return nil
	}
	m := &countingMetric{}
	p.calls[kind] = m
	return m
}

// nilOr returns m as the interface M, or a nil M for a nil m (not an M
// holding a nil pointer).
func nilOr[M any](m *countingMetric) M {
	var zero M
	if m == nil {
		return zero
	}
	return any(m).(M)
}

func (p partialProvider) NewDepthMetric(string) workqueue.GaugeMetric {
	return nilOr[workqueue.GaugeMetric](p.metric("depth"))
}
func (p partialProvider) NewAddsMetric(string) workqueue.CounterMetric {
	return nilOr[workqueue.CounterMetric](p.metric("adds"))
}
func (p partialProvider) NewLatencyMetric(string) workqueue.HistogramMetric {
	return nilOr[workqueue.HistogramMetric](p.metric("latency"))
}
func (p partialProvider) NewWorkDurationMetric(string) workqueue.HistogramMetric {
	return nilOr[workqueue.HistogramMetric](p.metric("workDuration"))
}
func (p partialProvider) NewUnfinishedWorkSecondsMetric(string) workqueue.SettableGaugeMetric {
	return nilOr[workqueue.SettableGaugeMetric](p.metric("unfinished"))
}
func (p partialProvider) NewLongestRunningProcessorSecondsMetric(string) workqueue.SettableGaugeMetric {
	return nilOr[workqueue.SettableGaugeMetric](p.metric("longest"))
}
func (p partialProvider) NewRetriesMetric(string) workqueue.CounterMetric {
	return nilOr[workqueue.CounterMetric](p.metric("retries"))
}

var metricKinds = []string{"depth", "adds", "latency", "workDuration", "unfinished", "longest", "retries"}

// TestNilMetricIsOff is the regression test for newHandleMetrics storing a
// provider's nil metric and then calling it: a handle whose provider turns
// some metrics off with nil must run, and record the others.
func TestNilMetricIsOff(t *testing.T) {
	tests := []struct {
		name string
		on   []string
	}{
		{name: "all off"},
		{name: "only adds on", on: []string{"adds"}},
		{name: "only adds off", on: []string{"depth", "latency", "workDuration", "unfinished", "longest", "retries"}},
		{name: "all on", on: metricKinds},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := partialProvider{on: map[string]bool{}, calls: map[string]*countingMetric{}}
			for _, kind := range tt.on {
				p.on[kind] = true
			}
			m := newHandleMetrics(p, "q")
			require.NotPanics(t, func() {
				m.added(1)
				m.setDepth(3)
				m.retries.Inc()
				m.handedOut(0)
				m.done(0)
				m.unfinished.Set(1)
				m.longest.Set(1)
			})
			for _, kind := range metricKinds {
				if p.on[kind] {
					assert.NotZero(t, p.calls[kind].calls, "got no calls of %s, want some", kind)
				}
			}
		})
	}

	// And on a real handle, every metric off.
	s := redistest.Start(t, redistest.Options{})
	q := newTestQueue(t, s.Client(), Options[string]{
		MetricsProvider: partialProvider{on: map[string]bool{}, calls: map[string]*countingMetric{}},
		RateLimit:       &RateLimit{},
	})
	require.NoError(t, q.AddContext(context.Background(), "a"))
	require.NoError(t, q.AddRateLimitedContext(context.Background(), "b"))
	for range 2 {
		require.NoError(t, q.DoneContext(context.Background(), getNow(t, q)))
	}
	q.refreshUnfinished()
}
