package workqueue

import (
	"context"
	"math"
	"runtime"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/time/rate"
	clocktesting "k8s.io/utils/clock/testing"
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

// rateLimitingQueue is what the rate-limiting and priority queues of this
// package share, for the tests that run on both.
type rateLimitingQueue[T comparable] interface {
	TypedRateLimitingInterface[T]
	GetContext(ctx context.Context) (item T, err error)
	Remove(item T) bool
	Snapshot(n int) Snapshot[T]
	Park(item T, events ...string)
	Wake(event string) int
	WakeFunc(event string, accept func(item T) bool) int
	WakeItem(item T) bool
}

var (
	_ rateLimitingQueue[string] = (*TypedRateLimitingQueue[string])(nil)
	_ rateLimitingQueue[string] = (*TypedPriorityQueue[string])(nil)
)

// TestMisuse tries every misuse we know of. Each case must end in a
// "workqueue:" panic at construction or in a documented no-op: never a hang
// (the synctest bubble reports a deadlock), a negative duration or a lost
// item.
func TestMisuse(t *testing.T) {
	never := func(int) { panic("a piece ran") }
	tests := []struct {
		name      string
		wantPanic string // the panic message, or "" for a no-op
		run       func(t *testing.T)
	}{
		{"nil rate limiter", "workqueue: NewTypedRateLimitingQueue needs a rate limiter, got nil",
			func(t *testing.T) { NewTypedRateLimitingQueue[int](nil) }},
		{"negative base delay", "workqueue: exponential rate limiter needs non-negative delays, got base -1ns and max 1s",
			func(t *testing.T) { NewTypedItemExponentialFailureRateLimiter[int](-1, time.Second) }},
		{"max delay below base", "workqueue: exponential rate limiter needs max delay 1ns to be at least base delay 1h0m0s",
			func(t *testing.T) { NewTypedItemExponentialFailureRateLimiter[int](time.Hour, 1) }},
		{"negative fast-slow attempts", "workqueue: fast-slow rate limiter needs non-negative fast attempts, got -3",
			func(t *testing.T) { NewTypedItemFastSlowRateLimiter[int](0, 0, -3) }},
		{"nil limiter in max-of", "workqueue: max-of rate limiter got a nil rate limiter at position 0",
			func(t *testing.T) { NewTypedMaxOfRateLimiter[int](nil) }},
		{"negative max wait", "workqueue: max-wait rate limiter needs a non-negative max delay, got -1h0m0s",
			func(t *testing.T) {
				NewTypedWithMaxWaitRateLimiter(DefaultTypedItemBasedRateLimiter[int](), -time.Hour)
			}},
		{"ParallelizeUntil with no workers", "workqueue: ParallelizeUntil needs at least one worker for 3 pieces, got 0",
			func(t *testing.T) { ParallelizeUntil(context.Background(), 0, 3, never) }},
		{"ParallelizeUntil with no pieces", "",
			func(t *testing.T) { ParallelizeUntil(context.Background(), 0, 0, never) }},
		{"ParallelizeUntil with a nil work function", "workqueue: ParallelizeUntil needs a work function, got nil",
			func(t *testing.T) { ParallelizeUntil(context.Background(), 2, 3, nil) }},
		{"ParallelizeUntil with a nil work function and no pieces", "",
			func(t *testing.T) { ParallelizeUntil(context.Background(), 2, 0, nil) }},
		{"ParallelizeUntil with a nil option", "workqueue: ParallelizeUntil got a nil option at position 1",
			func(t *testing.T) { ParallelizeUntil(context.Background(), 2, 3, never, WithChunkSize(2), nil) }},
		{"Get on a zero Typed", "workqueue: Get on a zero queue; make one with its constructor",
			func(t *testing.T) {
				var q Typed[int]
				q.Get()
			}},
		{"ShutDownWithDrain on a zero Typed", "workqueue: ShutDownWithDrain on a zero queue; make one with its constructor",
			func(t *testing.T) {
				var q Typed[int]
				q.ShutDownWithDrain()
			}},
		{"When on a zero bucket limiter", "workqueue: TypedBucketRateLimiter needs a Limiter, got nil; build it as &TypedBucketRateLimiter[T]{Limiter: rate.NewLimiter(r, b)}",
			func(t *testing.T) {
				var limiter TypedBucketRateLimiter[int]
				limiter.When(1)
			}},
		{"When on a zero max-wait limiter", "workqueue: When on a zero TypedWithMaxWaitRateLimiter; make one with NewTypedWithMaxWaitRateLimiter",
			func(t *testing.T) { TypedWithMaxWaitRateLimiter[int]{}.When(1) }},
		{"Forget on a zero max-wait limiter", "workqueue: Forget on a zero TypedWithMaxWaitRateLimiter; make one with NewTypedWithMaxWaitRateLimiter",
			func(t *testing.T) { TypedWithMaxWaitRateLimiter[int]{}.Forget(1) }},
		{"NumRequeues on a zero max-wait limiter", "workqueue: NumRequeues on a zero TypedWithMaxWaitRateLimiter; make one with NewTypedWithMaxWaitRateLimiter",
			func(t *testing.T) { TypedWithMaxWaitRateLimiter[int]{}.NumRequeues(1) }},
		{"zero max-wait limiter in a queue", "workqueue: When on a zero TypedWithMaxWaitRateLimiter; make one with NewTypedWithMaxWaitRateLimiter",
			func(t *testing.T) {
				q := NewTypedRateLimitingQueue[int](TypedWithMaxWaitRateLimiter[int]{})
				defer q.ShutDown()
				q.AddRateLimited(1)
			}},
		{"ParallelizeUntil with a cancelled context", "", func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			ParallelizeUntil(ctx, 4, 100, never)
		}},
		{"huge and negative delays", "", func(t *testing.T) {
			q := NewTypedDelayingQueue[int]()
			defer q.ShutDown()
			q.AddAfter(1, math.MaxInt64) // waits, without overflowing into the past
			q.AddAfter(2, math.MinInt64) // at once
			time.Sleep(time.Hour)
			synctest.Wait()
			require.Equal(t, 1, q.Len())
			item, _ := q.Get()
			assert.Equal(t, 2, item)
		}},
		{"token bucket with burst 0", "", func(t *testing.T) {
			limiter := &TypedBucketRateLimiter[int]{Limiter: rate.NewLimiter(10, 0)}
			q := NewTypedRateLimitingQueue[int](limiter)
			defer q.ShutDown()
			q.AddRateLimited(1)
			time.Sleep(100 * time.Millisecond)
			item, _ := q.Get() // not lost: delayed one token interval
			assert.Equal(t, 1, item)
		}},
		{"adds and Done after shutdown", "", func(t *testing.T) {
			limiter := DefaultTypedItemBasedRateLimiter[int]()
			q := NewTypedRateLimitingQueue(limiter)
			q.ShutDown()
			q.Add(1)
			q.AddAfter(2, 0)
			q.AddAfter(3, time.Second)
			q.AddRateLimited(4)
			q.Done(1)
			q.Forget(5)
			time.Sleep(time.Minute)
			synctest.Wait()
			assert.Zero(t, q.Len())
			assert.Zero(t, limiter.NumRequeues(4), "a failure was recorded for an item never retried")
			_, shutdown := q.Get()
			assert.True(t, shutdown)
		}},
		{"Done and Forget of unknown items", "", func(t *testing.T) {
			q := NewTypedRateLimitingQueue(DefaultTypedControllerRateLimiter[int]())
			defer q.ShutDown()
			q.Done(1)
			q.Forget(1)
			assert.Zero(t, q.NumRequeues(1))
			assert.Zero(t, q.Len())
		}},
		{"ShutDown twice, then drain", "", func(t *testing.T) {
			q := NewTypedRateLimitingQueue(DefaultTypedControllerRateLimiter[int]())
			q.Add(1)
			q.ShutDown()
			q.ShutDown()
			q.ShutDownWithDrain() // returns at once after ShutDown, even with an item queued
			assert.Equal(t, 1, q.Len(), "the queued item is still handed out")
		}},
		{"drain twice", "", func(t *testing.T) {
			q := NewTypedDelayingQueue[int]()
			q.ShutDownWithDrain()
			q.ShutDownWithDrain()
			assert.True(t, q.ShuttingDown())
		}},
		{"Get after shutdown on an empty queue", "", func(t *testing.T) {
			q := NewTypedRateLimitingQueue(DefaultTypedControllerRateLimiter[string]())
			q.ShutDown()
			item, shutdown := q.Get()
			assert.True(t, shutdown)
			assert.Equal(t, "", item)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				if tt.wantPanic != "" {
					assert.PanicsWithValue(t, tt.wantPanic, func() { tt.run(t) })
					return
				}
				assert.NotPanics(t, func() { tt.run(t) })
			})
		})
	}
}

// delayGoroutines returns how many goroutines of this process end delays:
// those started by a delayer, running or not yet scheduled.
func delayGoroutines() int { return goroutinesIn("workqueue.(*delayer[") }

// goroutinesIn counts the goroutines whose stack holds fn: unlike
// runtime.NumGoroutine, a count that another test's goroutine ending, such
// as a finished subtest's, does not change.
func goroutinesIn(fn string) int {
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
		if strings.Contains(g, fn) {
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

// TestRateLimitingQueueAddIsItsDelayingQueues pins Add's doc: it is the
// DelayingQueue's Add, which waits for a Debounce burst's end.
func TestRateLimitingQueueAddIsItsDelayingQueues(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := NewTypedRateLimitingQueueWithConfig(DefaultTypedItemBasedRateLimiter[string](),
			TypedRateLimitingQueueConfig[string]{Debounce: Debounce{Quiet: time.Second}})
		defer q.ShutDown()
		q.Add("a")
		assert.Equal(t, 0, q.Len(), "Len at the Add")
		time.Sleep(time.Second)
		synctest.Wait()
		assert.Equal(t, 1, q.Len(), "Len at the burst's end")
	})
}

// TestRateLimitingQueueOverGivenDelayingQueueKeepsItsSettings pins the
// config's doc: over this package's delaying queue, the config's
// MaxParkTime and Clock do nothing; the delaying queue's apply.
func TestRateLimitingQueueOverGivenDelayingQueueKeepsItsSettings(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		inner := NewTypedDelayingQueueWithConfig(TypedDelayingQueueConfig[string]{MaxParkTime: time.Minute})
		q := NewTypedRateLimitingQueueWithConfig(DefaultTypedItemBasedRateLimiter[string](), TypedRateLimitingQueueConfig[string]{
			DelayingQueue: inner,
			MaxParkTime:   time.Hour,
			Clock:         clocktesting.NewFakeClock(time.Unix(0, 0)),
		})
		defer q.ShutDown()
		assert.Equal(t, time.Now(), q.Snapshot(0).Taken, "Snapshot's Taken, on the delaying queue's clock")
		q.Add("a")
		item, _ := q.Get()
		q.Park(item, "e")
		q.Done(item)
		time.Sleep(time.Minute)
		synctest.Wait()
		assert.Equal(t, 1, q.Len(), "Len after the delaying queue's MaxParkTime")
	})
}
