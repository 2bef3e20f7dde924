package workqueue

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// refreshSignal is a recordingProvider whose unfinished-work gauge reports
// each Set, so that a test can wait for the refresh goroutine to run.
type refreshSignal struct {
	recordingProvider
	set chan struct{}
}

func (p *refreshSignal) NewUnfinishedWorkSecondsMetric(string) SettableGaugeMetric {
	return signalGauge(p.set)
}

type signalGauge chan struct{}

func (g signalGauge) Set(float64) {
	select {
	case g <- struct{}{}:
	default:
	}
}

// TestConstructorStartsGoroutinesLast pins down a data race at
// construction: a queue's goroutines (the metrics refresh, the delays)
// must start only after the constructor has stored everything they read.
// With a refresh period of a millisecond on the real clock, a refresh that
// starts early races with the constructor, and the race detector sees it
// once the test waits for the first refresh.
func TestConstructorStartsGoroutinesLast(t *testing.T) {
	tests := []struct {
		name string
		make func(MetricsProvider) interface{ ShutDown() }
	}{
		{"Typed", func(p MetricsProvider) interface{ ShutDown() } {
			return NewTypedWithConfig(TypedQueueConfig[string]{Name: "q", MetricsProvider: p})
		}},
		{"delaying", func(p MetricsProvider) interface{ ShutDown() } {
			return NewTypedDelayingQueueWithConfig(TypedDelayingQueueConfig[string]{Name: "q", MetricsProvider: p})
		}},
		{"rate-limiting", func(p MetricsProvider) interface{ ShutDown() } {
			return NewTypedRateLimitingQueueWithConfig(DefaultTypedControllerRateLimiter[string](),
				TypedRateLimitingQueueConfig[string]{Name: "q", MetricsProvider: p})
		}},
		{"priority", func(p MetricsProvider) interface{ ShutDown() } {
			return NewTypedPriorityQueue(DefaultTypedControllerRateLimiter[string](),
				TypedPriorityQueueConfig[string]{Name: "q", MetricsProvider: p})
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for range 20 {
				p := &refreshSignal{recordingProvider: recordingProvider{period: time.Millisecond}, set: make(chan struct{}, 1)}
				q := tt.make(p)
				select {
				case <-p.set:
				case <-time.After(10 * time.Second):
					require.Fail(t, "the unfinished-work gauge was never refreshed")
				}
				q.ShutDown()
			}
		})
	}
}
