package workqueue

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// stressQueue is a queue under TestStress: a rate-limiting queue of this
// package, with add, the producers' add, and reAdd, a worker's add of the
// item it holds.
type stressQueue struct {
	rateLimitingQueue[int]
	add, reAdd func(rng *rand.Rand, item int)
}

// TestStress runs producers and workers on real time on each queue of the
// package, with workers that add again the item they hold, so that many
// last adds land on an item being processed, and checks, for every item:
// no two workers hold it at once; it is never processed more often than it
// was added (so nothing runs after Forget-and-Done unless added again); and
// no acknowledged add is lost: a worker gets the item after its last add
// began.
func TestStress(t *testing.T) {
	tests := []struct {
		name                               string
		producers, addsEach, workers, keys int
		queue                              func() stressQueue
	}{
		{"rate-limiting queue", 10, 10_000, 100, 500, func() stressQueue {
			q := NewTypedRateLimitingQueue(NewTypedItemExponentialFailureRateLimiter[int](time.Microsecond, time.Millisecond))
			return stressQueue{
				rateLimitingQueue: q,
				add:               func(_ *rand.Rand, item int) { q.Add(item) },
				reAdd:             func(_ *rand.Rand, item int) { q.AddRateLimited(item) },
			}
		}},
		{"priority queue with fairness and MaxWait", 4, 3000, 4, 256, func() stressQueue {
			q := NewTypedPriorityQueue(NewTypedItemExponentialFailureRateLimiter[int](time.Microsecond, time.Millisecond),
				TypedPriorityQueueConfig[int]{Fairness: []func(int) string{func(i int) string { return fmt.Sprint(i % 5) }}, MaxWait: time.Millisecond})
			return stressQueue{
				rateLimitingQueue: q,
				add: func(rng *rand.Rand, item int) {
					opts := AddOpts{Priority: new(rng.IntN(3))}
					switch rng.IntN(4) {
					case 0:
						opts.After = time.Duration(rng.IntN(200)) * time.Microsecond
					case 1:
						opts.RateLimited = true
					}
					q.AddWithOpts(opts, item)
				},
				reAdd: func(rng *rand.Rand, item int) {
					if rng.IntN(2) == 0 {
						q.AddRateLimited(item)
					} else {
						q.AddWithOpts(AddOpts{Priority: new(rng.IntN(3))}, item)
					}
				},
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			addsEach := tt.addsEach
			if testing.Short() {
				addsEach /= 5
			}
			q := tt.queue()
			var (
				stamp                     atomic.Uint64
				holders, adds, processed  = make([]atomic.Int64, tt.keys), make([]atomic.Int64, tt.keys), make([]atomic.Int64, tt.keys)
				added, handled            = make([]atomic.Uint64, tt.keys), make([]atomic.Uint64, tt.keys)
				doubleHeld, overProcessed atomic.Int64
			)
			// stamped adds item, counting and stamping the add before it.
			stamped := func(item int, add func()) {
				adds[item].Add(1)
				added[item].Store(stamp.Add(1))
				add()
			}
			var workersWG sync.WaitGroup
			for w := range tt.workers {
				workersWG.Go(func() {
					rng := rand.New(rand.NewPCG(uint64(w), 1))
					for {
						item, shutdown := q.Get()
						if shutdown {
							return
						}
						handled[item].Store(stamp.Add(1))
						if holders[item].Add(1) != 1 {
							doubleHeld.Add(1)
						}
						if processed[item].Add(1) > adds[item].Load() {
							overProcessed.Add(1)
						}
						if rng.IntN(8) == 0 {
							runtime.Gosched()
						}
						holders[item].Add(-1)
						if rng.IntN(6) == 0 {
							stamped(item, func() { q.reAdd(rng, item) }) // a failure, or a change, while processing
						} else {
							q.Forget(item)
						}
						q.Done(item)
					}
				})
			}
			var producersWG sync.WaitGroup
			for p := range tt.producers {
				producersWG.Go(func() {
					rng := rand.New(rand.NewPCG(uint64(p), 2))
					for range addsEach {
						item := rng.IntN(tt.keys)
						stamped(item, func() { q.add(rng, item) })
					}
				})
			}
			producersWG.Wait()
			// Retries and delayed adds may still wait (at most a few ms):
			// poll on real time until nothing waits and every item's
			// last add has been handed out, then drain.
			settled := func() bool {
				if s := q.Snapshot(0); s.Depth > 0 || s.Waiting > 0 {
					return false
				}
				for item := range tt.keys {
					if handled[item].Load() < added[item].Load() {
						return false
					}
				}
				return true
			}
			require.Eventually(t, settled, time.Minute, time.Millisecond, "the queue did not settle within a minute")
			q.ShutDownWithDrain()
			workersWG.Wait()

			var totalAdds, totalProcessed int64
			for item := range tt.keys {
				totalAdds += adds[item].Load()
				totalProcessed += processed[item].Load()
			}
			t.Logf("%d adds, %d processings by %d workers", totalAdds, totalProcessed, tt.workers)
			assert.Zero(t, doubleHeld.Load(), "items held by two workers at once")
			assert.Zero(t, overProcessed.Load(), "items processed more often than added")
			if pq, ok := q.rateLimitingQueue.(*TypedPriorityQueue[int]); ok {
				require.NoError(t, verifyPriorityQueue(pq))
			}
		})
	}
}

// TestDrainCompleteness checks that ShutDownWithDrain returns only after
// every item, including items added again while being processed, has been
// processed and marked done, over hundreds of rounds; and that a concurrent
// ShutDown always releases a waiting drain.
func TestDrainCompleteness(t *testing.T) {
	const items = 10_000
	rounds := sized(100, 20, 10)
	var totalRounds, earlyReturns int
	for _, workers := range []int{1, 8, 64} {
		t.Run(fmt.Sprintf("workers=%d", workers), func(t *testing.T) {
			for round := range rounds {
				if !drainRound(items, workers, uint64(round)) {
					earlyReturns++
				}
				totalRounds++
			}
		})
	}
	summary := fmt.Sprintf("drain check: %d rounds of %d items, %d early returns", totalRounds, items, earlyReturns)
	t.Log(summary)
	assert.Zero(t, earlyReturns)
}

// drainRound adds items, has workers process them and drains, then reports
// whether everything was done when the drain returned. In odd rounds the
// drain starts at once, with most items still queued. In even rounds a
// tenth of the items are added again as soon as a worker gets them, and the
// drain starts once every item has been handed out once, while workers still
// hold items that Done must queue again: the case client-go returns early on.
// Two rounds in four run on a queue with custom storage.
func drainRound(items, workers int, seed uint64) bool {
	readdRound := seed%2 == 0
	var config TypedQueueConfig[int]
	if seed%4 >= 2 {
		config.Queue = DefaultQueue[int]()
	}
	q := NewTypedWithConfig(config)
	var gets, dones atomic.Int64
	processed := make([]atomic.Int32, items)
	readded := make([]atomic.Int32, items)
	var firstPass sync.WaitGroup
	firstPass.Add(items)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(seed, uint64(w)))
			for {
				item, shutdown := q.Get()
				if shutdown {
					return
				}
				gets.Add(1)
				if processed[item].Add(1) == 1 {
					if readdRound && rng.IntN(10) == 0 {
						readded[item].Add(1)
						q.Add(item) // queued again when this processing is done
					}
					firstPass.Done()
				}
				dones.Add(1) // before Done, so the drain cannot return before it
				q.Done(item)
			}
		})
	}
	for item := range items {
		q.Add(item)
	}
	if readdRound {
		firstPass.Wait()
	}
	q.ShutDownWithDrain()
	complete := gets.Load() == dones.Load() && q.Len() == 0
	for item := range items {
		if processed[item].Load() != 1+readded[item].Load() {
			complete = false
		}
	}
	wg.Wait()
	return complete
}

func TestConcurrentShutDownReleasesDrain(t *testing.T) {
	const rounds = 200
	released := 0
	for round := range rounds {
		q := NewTyped[int]()
		for item := range 100 {
			q.Add(item)
		}
		holding := make(chan struct{})
		go func() {
			item, _ := q.Get() // a worker that never finishes its item
			close(holding)
			_ = item
		}()
		<-holding
		returned := make(chan struct{})
		go func() {
			q.ShutDownWithDrain()
			close(returned)
		}()
		if round%2 == 0 {
			runtime.Gosched() // in some rounds the drain is already waiting
		}
		q.ShutDown()
		select {
		case <-returned:
			released++
		case <-time.After(10 * time.Second): // a watchdog, not a wait for correctness
			t.Fatalf("round %d: ShutDown did not release the drain", round)
		}
	}
	assert.Equal(t, rounds, released)
}
