package workqueue

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-workqueue/workqueue/internal/list"
	"github.com/go-workqueue/workqueue/internal/lock"
	"github.com/go-workqueue/workqueue/internal/table"
)

// benchKeys returns n distinct string keys shaped like Kubernetes object
// keys.
func benchKeys(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = "namespace-" + strconv.Itoa(i%97) + "/object-" + strconv.Itoa(i)
	}
	return keys
}

// BenchmarkCycle measures one Add, Get and Done of a string key on one
// goroutine: the hot path of every reconcile loop.
func BenchmarkCycle(b *testing.B) {
	keys := benchKeys(1024)
	q := NewTyped[string]()
	defer q.ShutDown()
	benchCycle(b, q, keys)
}

// benchCycle runs the cycle of BenchmarkCycle on q.
func benchCycle(b *testing.B, q TypedInterface[string], keys []string) {
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		key := keys[i&1023]
		q.Add(key)
		item, _ := q.Get()
		q.Done(item)
		i++
	}
}

// BenchmarkCycleParts times, on the cycle's keys, the parts that one
// Add/Get/Done cycle is made of, for the README's cost breakdown: the
// three lock and unlock pairs, the two hashes (Add and Done), the item
// table's work (a failed lookup and an insert for Add, a lookup and a
// removal for Done) and the FIFO's push and pop of the item's id. What
// the parts do not add up to is the calls and branches around them.
func BenchmarkCycleParts(b *testing.B) {
	keys := benchKeys(1024)
	b.Run("locks", func(b *testing.B) {
		var mu lock.Mutex
		for b.Loop() {
			for range 3 {
				mu.Lock()
				mu.Unlock() //lint:ignore SA2001 the empty critical section is what is timed
			}
		}
	})
	b.Run("hashes", func(b *testing.B) {
		tab := table.New[string, record]()
		var sink uint32
		i := 0
		for b.Loop() {
			sink += tab.Hash(keys[i&1023]) + tab.Hash(keys[i&1023])
			i++
		}
		_ = sink
	})
	b.Run("table", func(b *testing.B) {
		tab := table.New[string, record]()
		hashes := make([]uint32, len(keys))
		for i, key := range keys {
			hashes[i] = tab.Hash(key)
		}
		i := 0
		for b.Loop() {
			key, hash := keys[i&1023], hashes[i&1023]
			tab.Lookup(key, hash)
			tab.Insert(key, hash, record{})
			_, id := tab.Lookup(key, hash)
			tab.Remove(id)
			i++
		}
	})
	b.Run("fifo", func(b *testing.B) {
		order := fifoOrder{list: list.New()}
		for b.Loop() {
			order.queue(1)
			order.next()
		}
	})
}

// BenchmarkBatch measures adding 1000 distinct keys, then getting and
// finishing all of them; one op is one key.
func BenchmarkBatch(b *testing.B) {
	q := NewTyped[string]()
	defer q.ShutDown()
	benchBatch(b, q, benchKeys(1000))
}

// benchBatch runs the batch of BenchmarkBatch on q with keys.
func benchBatch(b *testing.B, q TypedInterface[string], keys []string) {
	b.ReportAllocs()
	for b.Loop() {
		for _, key := range keys {
			q.Add(key)
		}
		for range keys {
			item, _ := q.Get()
			q.Done(item)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(keys)), "ns/key")
}

// BenchmarkParallel measures producers adding keys while as many workers
// get and finish them; one op is one add. The keys repeat only after a
// million adds, so few adds collapse; items/op reports how many items the
// workers processed per add, since a queue that starves its workers
// collapses more adds and looks faster per add.
func BenchmarkParallel(b *testing.B) {
	keys := benchKeys(1 << 20)
	for _, goroutines := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("producers=%d/workers=%d", goroutines, goroutines), func(b *testing.B) {
			q := NewTyped[string]()
			b.ReportAllocs()
			var processed atomic.Int64
			var workers sync.WaitGroup
			for range goroutines {
				workers.Go(func() {
					for {
						item, shutdown := q.Get()
						if shutdown {
							return
						}
						processed.Add(1)
						q.Done(item)
					}
				})
			}
			b.ResetTimer()
			var producers sync.WaitGroup
			for p := range goroutines {
				producers.Go(func() {
					for i := p; i < b.N; i += goroutines {
						q.Add(keys[i&(len(keys)-1)])
					}
				})
			}
			producers.Wait()
			q.ShutDown() // workers still take every queued item
			workers.Wait()
			b.ReportMetric(float64(processed.Load())/float64(b.N), "items/op")
		})
	}
}

// BenchmarkDuplicateHeavy measures adds of only 100 keys while 8 workers
// process them, so most adds collapse into a queued or in-flight item.
func BenchmarkDuplicateHeavy(b *testing.B) {
	keys := benchKeys(100)
	q := NewTyped[string]()
	var workers sync.WaitGroup
	for range 8 {
		workers.Go(func() {
			for {
				item, shutdown := q.Get()
				if shutdown {
					return
				}
				q.Done(item)
			}
		})
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		q.Add(keys[i%len(keys)])
		i++
	}
	q.ShutDownWithDrain()
	workers.Wait()
}

// BenchmarkAddAfterPending measures AddAfter of new keys at random delays
// while a million other keys wait.
func BenchmarkAddAfterPending(b *testing.B) {
	const pending = 1_000_000
	keys := benchKeys(pending + 1<<20)
	rng := rand.New(rand.NewPCG(1, 2))
	q := NewTypedDelayingQueue[string]()
	defer q.ShutDown()
	for _, key := range keys[:pending] {
		q.AddAfter(key, time.Hour+time.Duration(rng.Int64N(int64(time.Hour))))
	}
	extra := keys[pending:]
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		q.AddAfter(extra[i&(len(extra)-1)], time.Hour+time.Duration(rng.Int64N(int64(time.Hour))))
		i++
	}
}

// BenchmarkAddRateLimitedForget measures a failure and a success of one key
// with the default controller limiter.
func BenchmarkAddRateLimitedForget(b *testing.B) {
	keys := benchKeys(1024)
	q := NewTypedRateLimitingQueue(DefaultTypedControllerRateLimiter[string]())
	defer q.ShutDown()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		key := keys[i&1023]
		q.AddRateLimited(key)
		q.Forget(key)
		i++
	}
}
