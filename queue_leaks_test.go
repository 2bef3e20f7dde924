package workqueue

import (
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"
)

// payload is an item type whose values the tests watch being collected.
type payload struct{ _ [64]byte }

// collectable returns a new item and a function that reports whether the
// garbage collector has freed it, trying a few collections.
func collectable() (*payload, func() bool) {
	item := new(payload)
	var freed atomic.Bool
	runtime.AddCleanup(item, func(flag *atomic.Bool) { flag.Store(true) }, &freed)
	return item, func() bool {
		for range 50 {
			runtime.GC()
			if freed.Load() {
				return true
			}
			time.Sleep(time.Millisecond) // the cleanup runs on its own goroutine
		}
		return false
	}
}

// TestItemsBecomeGarbage checks that the queues keep no reference to an
// item once it has left them: handed out and done, forgotten by a limiter,
// dropped at shutdown, moved earlier and then fired.
func TestItemsBecomeGarbage(t *testing.T) {
	metrics := &recordingProvider{}
	tests := []struct {
		name string
		// use puts item through a queue or limiter and takes it out again,
		// and returns what it used, which stays alive, and how to stop it.
		use func(item *payload, clock *clocktesting.FakeClock) (used any, stop func())
	}{
		{"handed out and done", func(item *payload, clock *clocktesting.FakeClock) (any, func()) {
			q := NewTypedWithConfig(TypedQueueConfig[*payload]{Name: "q", MetricsProvider: metrics, Clock: clock})
			q.Add(item)
			got, _ := q.Get()
			q.Add(got) // added again while processing
			q.Done(got)
			got, _ = q.Get()
			q.Done(got)
			return q, q.ShutDown
		}},
		{"forgotten by the default limiter", func(item *payload, clock *clocktesting.FakeClock) (any, func()) {
			limiter := DefaultTypedControllerRateLimiter[*payload]()
			limiter.When(item)
			limiter.When(item)
			limiter.Forget(item)
			return limiter, func() {}
		}},
		{"forgotten by the fast-slow limiter", func(item *payload, clock *clocktesting.FakeClock) (any, func()) {
			limiter := NewTypedItemFastSlowRateLimiter[*payload](time.Millisecond, time.Second, 1)
			limiter.When(item)
			limiter.Forget(item)
			return limiter, func() {}
		}},
		{"dropped at shutdown while waiting", func(item *payload, clock *clocktesting.FakeClock) (any, func()) {
			q := NewTypedDelayingQueueWithConfig(TypedDelayingQueueConfig[*payload]{Name: "d", MetricsProvider: metrics, Clock: clock})
			q.AddAfter(item, time.Hour)
			q.ShutDown()
			return q, func() {}
		}},
		{"moved earlier, fired, done", func(item *payload, clock *clocktesting.FakeClock) (any, func()) {
			q := NewTypedRateLimitingQueueWithConfig(DefaultTypedControllerRateLimiter[*payload](),
				TypedRateLimitingQueueConfig[*payload]{Name: "r", MetricsProvider: metrics, Clock: clock})
			q.AddAfter(item, time.Hour)
			q.AddRateLimited(item) // 5 ms: moves it earlier
			clock.Step(5 * time.Millisecond)
			got, _ := q.Get()
			q.Forget(got)
			q.Done(got)
			return q, q.ShutDown
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			item, freed := collectable()
			used, stop := tt.use(item, clocktesting.NewFakeClock(time.Unix(0, 0)))
			item = nil
			require.True(t, freed(), "the item is still referenced")
			runtime.KeepAlive(used) // the queue or limiter outlived the item
			stop()
		})
	}
}

// TestCollectableDetectsAReference makes sure the check above can fail.
func TestCollectableDetectsAReference(t *testing.T) {
	item, freed := collectable()
	q := NewTyped[*payload]()
	defer q.ShutDown()
	q.Add(item)
	item = nil
	require.False(t, freed(), "a queued item was collected")
	runtime.KeepAlive(q)
}
