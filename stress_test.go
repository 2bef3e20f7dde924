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

// TestStressRateLimitingQueue runs many producers and workers on real time
// and checks, for every item: no two workers hold it at once; it is never
// processed more often than it was added (so nothing runs after
// Forget-and-Done unless added again); and its last processing started after
// its last add.
func TestStressRateLimitingQueue(t *testing.T) {
	const producers, addsEach, workers, keys = 10, 10_000, 100, 500
	q := NewTypedRateLimitingQueue(NewTypedItemExponentialFailureRateLimiter[int](time.Microsecond, time.Millisecond))
	var (
		holders, adds, processings [keys]atomic.Int64
		lastAddSeq, lastStartSeq   [keys]atomic.Int64
		seq                        atomic.Int64
		doubleHeld, overProcessed  atomic.Int64
	)
	add := func(item int, rateLimited bool) {
		adds[item].Add(1)
		lastAddSeq[item].Store(seq.Add(1))
		if rateLimited {
			q.AddRateLimited(item)
		} else {
			q.Add(item)
		}
	}

	var workersWG sync.WaitGroup
	for w := range workers {
		workersWG.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			for {
				item, shutdown := q.Get()
				if shutdown {
					return
				}
				if holders[item].Add(1) != 1 {
					doubleHeld.Add(1)
				}
				if processings[item].Add(1) > adds[item].Load() {
					overProcessed.Add(1)
				}
				lastStartSeq[item].Store(seq.Add(1))
				holders[item].Add(-1)
				if rng.IntN(20) == 0 {
					add(item, true) // a failure: retry later
				} else {
					q.Forget(item)
				}
				q.Done(item)
			}
		})
	}
	var producersWG sync.WaitGroup
	for p := range producers {
		producersWG.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(p), 2))
			for range addsEach {
				add(rng.IntN(keys), false)
			}
		})
	}
	producersWG.Wait()
	// Retries may still wait for their delays (at most 1 ms); poll on real
	// time until every item's last add has been processed, then drain.
	// Settled: nothing queued, and every item's last processing started
	// after its last add.
	settled := func() bool {
		if q.Len() > 0 {
			return false
		}
		for item := range keys {
			if adds[item].Load() > 0 && lastStartSeq[item].Load() < lastAddSeq[item].Load() {
				return false
			}
		}
		return true
	}
	deadline := time.Now().Add(time.Minute)
	for !settled() {
		require.True(t, time.Now().Before(deadline), "the queue did not settle within a minute")
		time.Sleep(time.Millisecond)
	}
	q.ShutDownWithDrain()
	workersWG.Wait()

	var totalAdds, totalProcessings int64
	for item := range keys {
		totalAdds += adds[item].Load()
		totalProcessings += processings[item].Load()
	}
	t.Logf("stress: %d adds, %d processings by %d workers", totalAdds, totalProcessings, workers)
	assert.Zero(t, doubleHeld.Load(), "items held by two workers at once")
	assert.Zero(t, overProcessed.Load(), "items processed more often than added")
}

// TestDrainCompleteness checks that ShutDownWithDrain returns only after
// every item, including items added again while being processed, has been
// processed and marked done, over hundreds of rounds; and that a concurrent
// ShutDown always releases a waiting drain.
func TestDrainCompleteness(t *testing.T) {
	const items = 10_000
	rounds := 100
	if testing.Short() {
		rounds = 10
	}
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
