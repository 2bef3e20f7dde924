package workqueue

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestPriorityQueueStress runs producers that add with every option and
// workers that get and mark done, on real time, with fairness and MaxWait
// on, and checks that no item is ever handed to two workers at once and
// that no acknowledged add is lost: after the last add of an item has
// returned, a worker gets the item again. Workers re-add the item they
// hold, so that many last adds land on an item being processed.
func TestPriorityQueueStress(t *testing.T) {
	const (
		producers = 4
		workers   = 4
		items     = 256
	)
	adds := 3000
	if testing.Short() {
		adds = 500
	}
	q := NewTypedPriorityQueue(NewTypedItemExponentialFailureRateLimiter[string](time.Microsecond, time.Millisecond),
		TypedPriorityQueueConfig[string]{Fairness: []func(string) string{tenant}, MaxWait: time.Millisecond})
	keys := make([]string, items)
	for i := range keys {
		keys[i] = fmt.Sprintf("t%d/%d", i%5, i)
	}
	var (
		stamp   atomic.Uint64
		added   [items]atomic.Uint64 // the stamp of each item's last add, set before it
		handled [items]atomic.Uint64 // the stamp read after each item's last Get
		mu      sync.Mutex
		inUse   = map[string]bool{}
		faults  atomic.Int64
	)
	index := func(key string) int {
		var tenant, i int
		fmt.Sscanf(key, "t%d/%d", &tenant, &i)
		return i
	}

	var workersDone sync.WaitGroup
	for range workers {
		workersDone.Go(func() {
			for {
				item, _, shutdown := q.GetWithPriority()
				if shutdown {
					return
				}
				i := index(item)
				s := stamp.Load()
				mu.Lock()
				if inUse[item] {
					faults.Add(1)
				}
				inUse[item] = true
				mu.Unlock()
				handled[i].Store(max(handled[i].Load(), s))
				if rand.IntN(8) == 0 {
					time.Sleep(time.Microsecond)
				}
				mu.Lock()
				inUse[item] = false
				mu.Unlock()
				// Re-adds while processing: the adds most at risk.
				switch rand.IntN(6) {
				case 0:
					added[i].Store(stamp.Add(1))
					q.AddRateLimited(item)
				case 1:
					added[i].Store(stamp.Add(1))
					q.AddWithOpts(AddOpts{Priority: new(rand.IntN(3))}, item)
				default:
					q.Forget(item)
				}
				q.Done(item)
			}
		})
	}
	var producersDone sync.WaitGroup
	for p := range producers {
		producersDone.Go(func() {
			r := rand.New(rand.NewPCG(uint64(p), 15))
			for range adds {
				i := r.IntN(items)
				priority := r.IntN(3)
				opts := AddOpts{Priority: &priority}
				switch r.IntN(4) {
				case 0:
					opts.After = time.Duration(r.IntN(200)) * time.Microsecond
				case 1:
					opts.RateLimited = true
				}
				added[i].Store(stamp.Add(1))
				q.AddWithOpts(opts, keys[i])
			}
		})
	}
	producersDone.Wait()
	// Wait until everything added has been handed out and done.
	require.Eventually(t, func() bool {
		s := q.Snapshot(0)
		return s.Depth == 0 && s.Waiting == 0 && s.Processing == 0
	}, 10*time.Second, time.Millisecond)
	q.ShutDownWithDrain()
	workersDone.Wait()

	require.Zero(t, faults.Load(), "items handed to two workers at once")
	for i := range keys {
		require.GreaterOrEqual(t, handled[i].Load(), added[i].Load(), "item %s: its last add was not handed out", keys[i])
	}
	require.NoError(t, verifyPriorityQueue(q))
}
