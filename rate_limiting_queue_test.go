package workqueue

import (
	"runtime"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRateLimitingQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		limiter := NewTypedItemExponentialFailureRateLimiter[string](time.Second, time.Minute)
		q := NewTypedRateLimitingQueue(limiter)
		defer q.ShutDown()
		start := time.Now()

		q.AddRateLimited("a") // 1 s
		q.AddRateLimited("a") // 2 s, but 1 s is earlier and wins
		q.AddRateLimited("b") // 1 s
		assert.Equal(t, 2, q.NumRequeues("a"))
		assert.Equal(t, 1, q.NumRequeues("b"))
		assert.Zero(t, q.Len())

		time.Sleep(time.Second)
		assert.Equal(t, []string{"a", "b"}, drainReady(q))

		q.Forget("a")
		assert.Zero(t, q.NumRequeues("a"))
		q.AddRateLimited("a") // 1 s again after Forget
		q.AddRateLimited("b") // 2 s
		time.Sleep(time.Second)
		assert.Equal(t, []string{"a"}, drainReady(q))
		time.Sleep(time.Second)
		assert.Equal(t, []string{"b"}, drainReady(q))
		assert.Equal(t, 3*time.Second, time.Since(start))
	})
}

func TestAddRateLimitedAfterShutDownRecordsNoFailure(t *testing.T) {
	limiter := DefaultTypedItemBasedRateLimiter[string]()
	q := NewTypedRateLimitingQueue(limiter)
	q.ShutDown()
	q.AddRateLimited("a")
	assert.Zero(t, q.NumRequeues("a"))
	assert.Zero(t, limiter.NumRequeues("a"))
	_, shutdown := q.Get()
	assert.True(t, shutdown)
}

func TestRateLimitingQueueOverGivenDelayingQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		inner := NewTypedDelayingQueue[int]()
		q := NewTypedRateLimitingQueueWithConfig(NewTypedItemFastSlowRateLimiter[int](time.Millisecond, time.Hour, 1),
			TypedRateLimitingQueueConfig[int]{DelayingQueue: inner})
		q.AddRateLimited(1)
		time.Sleep(time.Millisecond)
		synctest.Wait()
		assert.Equal(t, 1, inner.Len())
		q.ShutDown()
		assert.True(t, inner.ShuttingDown())
	})
}

func TestRateLimitingQueueEndToEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := NewTypedRateLimitingQueue(DefaultTypedControllerRateLimiter[string]())
		start := time.Now()
		var retriedAt []time.Duration
		q.Add("k")
		for {
			key, shutdown := q.Get()
			if shutdown {
				break
			}
			retriedAt = append(retriedAt, time.Since(start))
			if len(retriedAt) < 4 {
				q.AddRateLimited(key)
			} else {
				q.Forget(key)
				q.ShutDown()
			}
			q.Done(key)
		}
		ms := time.Millisecond
		require.Equal(t, []time.Duration{0, 5 * ms, 15 * ms, 35 * ms}, retriedAt)
		assert.Zero(t, q.NumRequeues("k"))
	})
}

// The layers must shut down at one instant: an AddRateLimited that overlaps
// ShutDown records a failure if and only if its item is queued, and an
// AddAfter(x, 0) is never dropped while a later Add is accepted.
func TestRegressionLayersShutDownAtOneInstant(t *testing.T) {
	t.Run("AddRateLimited", func(t *testing.T) {
		for round := range racyRounds() {
			limiter := &linLimiter{}
			q := NewTypedRateLimitingQueue[string](limiter)
			var handedOut map[string]int
			var wg sync.WaitGroup
			wg.Go(func() { handedOut = drainAll(q) })
			wg.Go(func() { q.AddRateLimited("x") })
			if round%2 == 0 {
				q.ShutDown()
			} else {
				q.ShutDownWithDrain()
			}
			wg.Wait()
			require.Equal(t, handedOut["x"], limiter.NumRequeues("x"), "round %d: failures recorded vs times x was handed out", round)
		}
	})
	t.Run("AddAfter then Add", func(t *testing.T) {
		for round := range racyRounds() {
			q := NewTypedDelayingQueue[string]()
			go q.ShutDown()
			q.AddAfter("a", 0)
			q.Add("b")
			q.ShutDown()
			handedOut := drainAll(q)
			if handedOut["b"] == 1 {
				require.Equal(t, 1, handedOut["a"], "round %d: AddAfter(a, 0) dropped, the later Add(b) accepted", round)
			}
		}
	})
}

// delayGoroutines returns how many goroutines of this process end delays:
// those started by a delayer, running or not yet scheduled.
func delayGoroutines() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	count := 0
	for g := range strings.SplitSeq(string(buf), "\n\n") {
		if strings.Contains(g, "workqueue.(*delayer[") {
			count++
		}
	}
	return count
}

// TestRateLimitingQueueRunsOneDelayGoroutine checks that a rate-limiting
// queue without metrics ends all its delays, rate-limited adds and parks
// alike, on one goroutine: the delaying layer uses the core's delays.
func TestRateLimitingQueueRunsOneDelayGoroutine(t *testing.T) {
	before := delayGoroutines()
	q := NewTypedRateLimitingQueue(NewTypedItemExponentialFailureRateLimiter[string](time.Millisecond, time.Second))
	defer q.ShutDown()
	assert.Equal(t, 1, delayGoroutines()-before, "delay goroutines after construction")

	q.AddRateLimited("a")
	q.Add("b")
	item, _ := q.Get()
	require.Equal(t, "b", item)
	q.Park("b", "event")
	q.Done("b")
	require.Equal(t, 1, q.Snapshot(0).Parked)
	assert.Equal(t, 1, delayGoroutines()-before, "delay goroutines after a Park")

	q.Wake("event") // the park's backoff waits in the same delays
	assert.Equal(t, 1, delayGoroutines()-before, "delay goroutines after a Wake")
}
