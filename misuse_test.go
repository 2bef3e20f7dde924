package workqueue

import (
	"context"
	"math"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/time/rate"
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
		{"Get that would wait on a zero Typed", "workqueue: Get on a zero Typed; make one with NewTyped or NewTypedWithConfig",
			func(t *testing.T) {
				var q Typed[int]
				q.Get()
			}},
		{"ShutDownWithDrain on a zero Typed", "workqueue: ShutDownWithDrain on a zero Typed; make one with NewTyped or NewTypedWithConfig",
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
