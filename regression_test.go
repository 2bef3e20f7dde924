package workqueue

import (
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The tests in this file each pin one behaviour that an earlier build of
// the queue got wrong under concurrency (issue 14), observed from outside
// the package. The linearizability test checks all of them and more; these
// say in one place what went wrong, and fail with a plain message.

// regressionRounds is how many times each racy scenario is played: the
// faults were seen in 1 to 10 percent of rounds, or less.
func regressionRounds() int {
	if testing.Short() {
		return 20
	}
	return 100
}

// contenders runs n goroutines that add other keys, and once they have
// added a thousand, body, while they go on: the faults needed a queue that
// had seen contention.
func contenders(q TypedInterface[string], n int, body func()) {
	stop := make(chan struct{})
	var adds atomic.Int64
	warm := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			key := []string{"c0", "c1", "c2", "c3"}[i%4]
			for {
				select {
				case <-stop:
					return
				default:
				}
				q.Add(key)
				if adds.Add(1) == 1000 {
					close(warm)
				}
			}
		})
	}
	<-warm
	body()
	close(stop)
	wg.Wait()
}

// drainOrder gets and finishes items until Get reports shutdown, and
// returns them in the order they were handed out.
func drainOrder(q TypedInterface[string]) []string {
	var order []string
	for {
		item, shutdown := q.Get()
		if shutdown {
			return order
		}
		order = append(order, item)
		q.Done(item)
	}
}

// drainAll is drainOrder counting how often each item was handed out.
func drainAll(q TypedInterface[string]) map[string]int {
	got := map[string]int{}
	for _, item := range drainOrder(q) {
		got[item]++
	}
	return got
}

// 1. Two Adds of one item, both returned before ShutDown began: the item
// must be handed out, and a drain must not return before it is done.
func TestRegressionAcknowledgedAddIsNeverLost(t *testing.T) {
	for _, drain := range []bool{false, true} {
		for round := range regressionRounds() {
			q := NewTyped[string]()
			var wg sync.WaitGroup
			contenders(q, 2, func() {
				for range 2 {
					wg.Go(func() { q.Add("x") })
				}
				wg.Wait()
			})
			var handedOut map[string]int
			if drain {
				done := make(chan struct{})
				go func() {
					handedOut = drainAll(q)
					close(done)
				}()
				q.ShutDownWithDrain()
				<-done
			} else {
				q.ShutDown()
				handedOut = drainAll(q)
			}
			require.Equal(t, 1, handedOut["x"], "round %d, drain %v: x handed out", round, drain)
		}
	}
}

// 2. x's Add returned before y's Add was called: x is handed out first.
func TestRegressionFIFOOrderOfAcknowledgedAdds(t *testing.T) {
	for round := range regressionRounds() {
		q := NewTyped[string]()
		contenders(q, 2, func() {
			q.Add("x")
			done := make(chan struct{})
			go func() { q.Add("y"); close(done) }()
			<-done
		})
		q.ShutDown()
		var order []string
		for _, item := range drainOrder(q) {
			if item == "x" || item == "y" {
				order = append(order, item)
			}
		}
		require.Equal(t, []string{"x", "y"}, order, "round %d", round)
	}
}

// 3. Len right after the caller's own Add returned, with no Get running,
// counts that item, even when another Add of it runs at the same time.
func TestRegressionLenCountsOwnAdd(t *testing.T) {
	q := NewTyped[string]()
	defer q.ShutDown()
	contenders(q, 2, func() {
		for round := range regressionRounds() {
			// Empties the queue but for the contenders' keys, which are
			// added again at once; x is queued only by this round.
			for q.Len() > 0 {
				item, _ := q.Get()
				q.Done(item)
			}
			var wg sync.WaitGroup
			var lens [2]int
			for i := range lens {
				wg.Go(func() {
					q.Add("x")
					lens[i] = q.Len()
				})
			}
			wg.Wait()
			require.GreaterOrEqual(t, min(lens[0], lens[1]), 1, "round %d: Len after Add(x)", round)
		}
	})
}

// 4. An Add that overlaps ShutDown either took effect before it or not at
// all: once ShutDown has returned, an item queued before it is handed out
// once, and its Done does not queue it again.
func TestRegressionNoDirtyMarkAfterShutDown(t *testing.T) {
	for _, custom := range []bool{false, true} {
		for round := range regressionRounds() {
			var config TypedQueueConfig[string]
			if custom {
				config.Queue = DefaultQueue[string]()
			}
			q := NewTypedWithConfig(config)
			q.Add("x")
			var wg sync.WaitGroup
			for range 2 {
				wg.Go(func() {
					for range 20 {
						q.Add("x")
					}
				})
			}
			q.ShutDown()
			handedOut := drainAll(q)
			wg.Wait()
			assert.Equal(t, 0, q.Len())
			require.Equal(t, 1, handedOut["x"], "round %d, custom %v: x was not processing when ShutDown began", round, custom)
		}
	}
}

// 5. The layers shut down at one instant: an AddRateLimited that overlaps
// ShutDown records a failure if and only if its item is queued, and an
// AddAfter(x, 0) is never dropped while a later Add is accepted.
func TestRegressionLayersShutDownAtOneInstant(t *testing.T) {
	t.Run("AddRateLimited", func(t *testing.T) {
		for round := range regressionRounds() {
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
		for round := range regressionRounds() {
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

// 6. A drain waits for an item that its Done queues again: it was added
// while processing, before the drain began.
func TestRegressionDrainWaitsForDirtyDone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := NewTyped[string]()
		q.Add("x")
		item, _ := q.Get()
		q.Add("x") // dirty
		var drained atomic.Bool
		go func() {
			q.ShutDownWithDrain()
			drained.Store(true)
		}()
		synctest.Wait()
		require.False(t, drained.Load(), "returned while x was processing")
		q.Done(item)
		synctest.Wait()
		require.False(t, drained.Load(), "returned while x was queued again")
		item, shutdown := q.Get()
		require.False(t, shutdown)
		require.Equal(t, "x", item)
		q.Done(item)
		synctest.Wait()
		require.True(t, drained.Load(), "the drain did not return once idle")
	})
}

// 7. Custom storage that holds items when the queue is made: the queue
// hands them out, each once, in the storage's order.
func TestRegressionPrefilledStorage(t *testing.T) {
	storage := DefaultQueue[string]()
	for _, item := range []string{"a", "b", "a", "c"} {
		storage.Push(item)
	}
	q := NewTypedWithConfig(TypedQueueConfig[string]{Queue: storage})
	require.Equal(t, 3, q.Len())
	q.Add("b") // queued already
	require.NoError(t, verifyQueue(q))
	q.ShutDown()
	assert.Equal(t, []string{"a", "b", "c"}, drainOrder(q))
}
