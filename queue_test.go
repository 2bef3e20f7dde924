package workqueue

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// queueOp is one step of a scripted single-goroutine queue test. Get and
// Len check what the queue returns against want.
type queueOp struct {
	op   string // "add", "get", "done", "len", "shutdown"
	item string
	want any // the item for "get", the length for "len"
}

func runQueueOps(t *testing.T, q TypedInterface[string], ops []queueOp) {
	t.Helper()
	for i, step := range ops {
		switch step.op {
		case "add":
			q.Add(step.item)
		case "done":
			q.Done(step.item)
		case "shutdown":
			q.ShutDown()
		case "get":
			got, shutdown := q.Get()
			if step.want == nil {
				require.Truef(t, shutdown, "step %d: Get got %q, want shutdown", i, got)
				continue
			}
			require.Falsef(t, shutdown, "step %d: Get got shutdown, want %q", i, step.want)
			require.Equalf(t, step.want, got, "step %d: Get got %q, want %q", i, got, step.want)
		case "len":
			require.Equalf(t, step.want, q.Len(), "step %d: Len", i)
		default:
			t.Fatalf("step %d: unknown op %q", i, step.op)
		}
	}
}

func TestQueueSemantics(t *testing.T) {
	tests := []struct {
		name string
		ops  []queueOp
	}{
		{"fifo", []queueOp{
			{op: "add", item: "a"}, {op: "add", item: "b"}, {op: "add", item: "c"},
			{op: "len", want: 3},
			{op: "get", want: "a"}, {op: "get", want: "b"}, {op: "get", want: "c"},
			{op: "len", want: 0},
		}},
		{"duplicates collapse while queued", []queueOp{
			{op: "add", item: "a"}, {op: "add", item: "b"}, {op: "add", item: "a"}, {op: "add", item: "a"},
			{op: "len", want: 2},
			{op: "get", want: "a"}, {op: "get", want: "b"},
			{op: "len", want: 0},
		}},
		{"added while processing is queued again after done", []queueOp{
			{op: "add", item: "a"},
			{op: "get", want: "a"},
			{op: "add", item: "a"}, {op: "add", item: "a"},
			{op: "len", want: 0},
			{op: "add", item: "b"},
			{op: "done", item: "a"},
			{op: "len", want: 2},
			{op: "get", want: "b"}, {op: "get", want: "a"},
		}},
		{"done without add changes nothing", []queueOp{
			{op: "done", item: "x"},
			{op: "len", want: 0},
			{op: "add", item: "a"},
			{op: "get", want: "a"},
			{op: "done", item: "a"},
			{op: "done", item: "a"},
			{op: "add", item: "a"},
			{op: "len", want: 1},
		}},
		{"queued items are handed out after shutdown", []queueOp{
			{op: "add", item: "a"}, {op: "add", item: "b"},
			{op: "shutdown"},
			{op: "add", item: "c"},
			{op: "len", want: 2},
			{op: "get", want: "a"}, {op: "get", want: "b"},
			{op: "get", want: nil}, {op: "get", want: nil},
		}},
		{"item added while processing before shutdown is handed out after it", []queueOp{
			{op: "add", item: "a"},
			{op: "get", want: "a"},
			{op: "add", item: "a"},
			{op: "shutdown"},
			{op: "done", item: "a"},
			{op: "get", want: "a"},
			{op: "done", item: "a"},
			{op: "get", want: nil},
		}},
		{"get on an empty queue after shutdown returns at once", []queueOp{
			{op: "shutdown"}, {op: "shutdown"},
			{op: "get", want: nil},
			{op: "done", item: "a"},
			{op: "len", want: 0},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := NewTyped[string]()
			defer q.ShutDown()
			runQueueOps(t, q, tt.ops)
		})
	}
}

// Regression: client-go's Done for a queued item that is not being processed
// pushed it a second time, so two workers got it.
func TestDoneOfQueuedItemDoesNotQueueItTwice(t *testing.T) {
	q := NewTyped[string]()
	defer q.ShutDown()
	q.Add("a")
	q.Done("a")
	assert.Equal(t, 1, q.Len(), "Len after Add, Done without Get")
	item, _ := q.Get()
	assert.Equal(t, "a", item)
	assert.Equal(t, 0, q.Len(), "got a second copy of the item")
	q.Done("a")
}

func TestShutDownWithDrain(t *testing.T) {
	tests := []struct {
		name string
		// before runs before the drain starts; during steps run one at a
		// time while it waits, and the drain must still be waiting after
		// each but the last.
		before func(q *Typed[string])
		during []func(q *Typed[string])
	}{
		{
			name:   "empty queue returns at once",
			before: func(q *Typed[string]) {},
		},
		{
			name: "waits for items being processed",
			before: func(q *Typed[string]) {
				q.Add("a")
				q.Get()
			},
			during: []func(q *Typed[string]){
				func(q *Typed[string]) { q.Done("a") },
			},
		},
		{
			// Regression: client-go returned once nothing was being
			// processed, although items were still queued.
			name: "waits for queued items",
			before: func(q *Typed[string]) {
				q.Add("a")
				q.Add("b")
			},
			during: []func(q *Typed[string]){
				func(q *Typed[string]) { q.Get() },
				func(q *Typed[string]) { q.Done("a") },
				func(q *Typed[string]) { q.Get() },
				func(q *Typed[string]) { q.Done("b") },
			},
		},
		{
			// Regression: client-go could return while an item added during
			// processing was about to be queued again.
			name: "waits for items added again while processing",
			before: func(q *Typed[string]) {
				q.Add("a")
				q.Get()
				q.Add("a")
			},
			during: []func(q *Typed[string]){
				func(q *Typed[string]) { q.Done("a") },
				func(q *Typed[string]) { q.Get() },
				func(q *Typed[string]) { q.Done("a") },
			},
		},
		{
			name: "a concurrent ShutDown releases it",
			before: func(q *Typed[string]) {
				q.Add("a")
			},
			during: []func(q *Typed[string]){
				func(q *Typed[string]) { q.ShutDown() },
			},
		},
		{
			name: "ShutDown before it makes it return at once",
			before: func(q *Typed[string]) {
				q.Add("a")
				q.ShutDown()
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				q := NewTyped[string]()
				tt.before(q)
				var returned atomic.Bool
				go func() {
					q.ShutDownWithDrain()
					returned.Store(true)
				}()
				for i, step := range tt.during {
					synctest.Wait()
					require.Falsef(t, returned.Load(), "drain returned before step %d", i)
					require.True(t, q.ShuttingDown())
					step(q)
				}
				synctest.Wait()
				require.True(t, returned.Load(), "drain still waiting after the last step")
			})
		})
	}
}

func TestAddAfterShutDownWithDrainStartsIsIgnored(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := NewTyped[string]()
		q.Add("a")
		q.Get()
		done := make(chan struct{})
		go func() {
			q.ShutDownWithDrain()
			close(done)
		}()
		synctest.Wait()
		q.Add("b")
		q.Add("a")
		assert.Equal(t, 0, q.Len())
		q.Done("a")
		<-done
		_, shutdown := q.Get()
		assert.True(t, shutdown)
	})
}

func TestGetBlocksUntilAdd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := NewTyped[int]()
		got := make(chan int, 1)
		go func() {
			item, _ := q.Get()
			got <- item
		}()
		synctest.Wait()
		assert.Empty(t, got, "Get returned from an empty queue")
		q.Add(7)
		assert.Equal(t, 7, <-got)
		q.ShutDown()
	})
}

func TestShutDownWakesAllGetters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := NewTyped[int]()
		var wg sync.WaitGroup
		var shutdowns atomic.Int32
		for range 5 {
			wg.Go(func() {
				if _, shutdown := q.Get(); shutdown {
					shutdowns.Add(1)
				}
			})
		}
		synctest.Wait()
		q.ShutDown()
		wg.Wait()
		assert.Equal(t, int32(5), shutdowns.Load())
	})
}

// lifoStorage hands out the newest item first and records Touch calls.
type lifoStorage struct {
	items   []string
	touched []string
}

func (s *lifoStorage) Touch(item string) { s.touched = append(s.touched, item) }
func (s *lifoStorage) Push(item string)  { s.items = append(s.items, item) }
func (s *lifoStorage) Len() int          { return len(s.items) }
func (s *lifoStorage) Pop() string {
	item := s.items[len(s.items)-1]
	s.items = s.items[:len(s.items)-1]
	return item
}

func TestCustomStorage(t *testing.T) {
	storage := &lifoStorage{}
	q := NewTypedWithConfig(TypedQueueConfig[string]{Queue: storage})
	defer q.ShutDown()
	q.Add("a")
	q.Add("b")
	q.Add("a")
	item, _ := q.Get()
	q.Add("b") // being processed: not a Touch
	assert.Equal(t, "b", item)
	assert.Equal(t, []string{"a"}, storage.touched)
	item, _ = q.Get()
	assert.Equal(t, "a", item)
}

// TestNoItemHeldByTwoWorkers runs producers and workers on real time and
// checks that no item is handed to a second worker while the first holds it,
// and that every item added is processed after its last add, on a queue
// that starts unsharded and on one sharded from the start, whose Get
// callers claim items without a lock.
func TestNoItemHeldByTwoWorkers(t *testing.T) {
	for _, sharded := range []bool{false, true} {
		t.Run(fmt.Sprintf("sharded=%v", sharded), func(t *testing.T) {
			noItemHeldByTwoWorkers(t, sharded)
		})
	}
}

func noItemHeldByTwoWorkers(t *testing.T, sharded bool) {
	const producers, workers, adds, keys = 4, 8, 5000, 50
	q := NewTyped[int]()
	if sharded {
		q.shard()
	}
	var holders [keys]atomic.Int32
	var processedAfterAdd [keys]atomic.Int64 // the add sequence number a processing started after
	var lastAdd [keys]atomic.Int64
	var seq atomic.Int64
	var violations atomic.Int32

	var workersWG sync.WaitGroup
	for range workers {
		workersWG.Go(func() {
			for {
				item, shutdown := q.Get()
				if shutdown {
					return
				}
				if holders[item].Add(1) != 1 {
					violations.Add(1)
				}
				processedAfterAdd[item].Store(seq.Load())
				holders[item].Add(-1)
				q.Done(item)
			}
		})
	}
	var producersWG sync.WaitGroup
	for p := range producers {
		producersWG.Go(func() {
			for i := range adds {
				item := (p*adds + i) % keys
				lastAdd[item].Store(seq.Add(1))
				q.Add(item)
			}
		})
	}
	producersWG.Wait()
	q.ShutDownWithDrain()
	workersWG.Wait()

	assert.Zero(t, violations.Load(), "items handed to two workers at once")
	for item := range keys {
		assert.GreaterOrEqualf(t, processedAfterAdd[item].Load(), lastAdd[item].Load(),
			"item %d: last processing started before its last add", item)
	}
}

func TestRing(t *testing.T) {
	tests := []struct {
		name   string
		pushes []int // items pushed per round
		pops   []int // items popped per round
	}{
		{"empty", nil, nil},
		{"fill and drain", []int{100}, []int{100}},
		{"wrap around", []int{10, 10, 10, 10}, []int{8, 8, 8, 16}},
		{"grow while wrapped", []int{12, 40, 3}, []int{10, 2, 43}},
		{"shrink after burst", []int{10000, 0, 10}, []int{9990, 5, 15}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r ring[int]
			var model []int
			next := 0
			for round := range tt.pushes {
				for range tt.pushes[round] {
					r.Push(next)
					model = append(model, next)
					next++
				}
				for range tt.pops[round] {
					require.Equal(t, model[0], r.Pop())
					model = model[1:]
				}
				require.Equal(t, len(model), r.Len())
				require.True(t, len(r.buf) == 0 || len(r.buf)&(len(r.buf)-1) == 0, "buffer length %d is not a power of two", len(r.buf))
				require.LessOrEqual(t, len(r.buf), max(ringKeepSize, 4*len(model)), "buffer did not shrink")
			}
			assert.Zero(t, r.Pop(), "Pop of an empty ring")
		})
	}
}

func TestRingClearsPoppedSlots(t *testing.T) {
	var r ring[*int]
	for i := range 20 {
		r.Push(&i)
	}
	for range 20 {
		r.Pop()
	}
	for i, p := range r.buf {
		assert.Nilf(t, p, "slot %d still references a popped item", i)
	}
}

// A burst of adds wakes one sleeping Get caller, which passes the wakeup
// on: every sleeper must still get an item.
func TestBurstReachesEverySleepingGet(t *testing.T) {
	for _, sharded := range []bool{false, true} {
		t.Run(fmt.Sprintf("sharded=%v", sharded), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				q := NewTyped[int]()
				if sharded {
					q.shard()
				}
				got := make(chan int, 10)
				for range 10 {
					go func() {
						item, _ := q.Get() // holds its item: no caller takes two
						got <- item
					}()
				}
				synctest.Wait()
				for i := range 10 {
					q.Add(i)
				}
				seen := map[int]bool{}
				for range 10 {
					seen[<-got] = true
				}
				assert.Len(t, seen, 10)
				q.ShutDown()
			})
		})
	}
}

// TestNoWakeupLost adds one item at a time and waits for a worker to take
// it, so that each Add races a worker that is about to sleep. In a sharded
// queue the Add pushes without the lock the worker sleeps under; a lost
// wakeup leaves the item queued and the test waiting.
func TestNoWakeupLost(t *testing.T) {
	const rounds = 20_000
	for _, tc := range []struct {
		sharded bool
		workers int
	}{
		{false, 1}, {true, 1}, {true, 4},
	} {
		t.Run(fmt.Sprintf("sharded=%v/workers=%d", tc.sharded, tc.workers), func(t *testing.T) {
			// In a bubble, so that time.After fires only once every
			// goroutine is blocked for good: a lost wakeup fails at once.
			synctest.Test(t, func(t *testing.T) { pingPong(t, tc.sharded, tc.workers, rounds) })
		})
	}
}

func pingPong(t *testing.T, sharded bool, workers, rounds int) {
	q := NewTyped[int]()
	if sharded {
		q.shard()
	}
	taken := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				item, shutdown := q.Get()
				if shutdown {
					return
				}
				q.Done(item)
				taken <- item
			}
		})
	}
	defer wg.Wait()
	defer q.ShutDown()
	for i := range rounds {
		q.Add(i)
		select {
		case got := <-taken:
			require.Equal(t, i, got)
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: the item was never handed out (%d queued)", i, q.Len())
		}
	}
}

// TestAddRacingASleepingGet runs an Add of a sharded queue at the worst
// moment for a Get: after it found the queue empty, before it sleeps. The
// Add pushes without mu and sees no sleeper, so the Get must see the item.
func TestAddRacingASleepingGet(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := NewTyped[string]()
		defer q.ShutDown()
		q.shard()
		hookRuns := 0
		q.emptyHook = func() {
			hookRuns++
			if hookRuns == 1 {
				q.Add("x")
			}
		}
		got := make(chan string)
		go func() {
			item, _ := q.Get()
			got <- item
		}()
		select {
		case item := <-got:
			assert.Equal(t, "x", item)
		case <-time.After(time.Second):
			t.Fatal("Get slept with an item queued")
		}
		assert.Equal(t, 1, hookRuns)
	})
}

// Whatever the item type, a shard fills exactly two cache lines.
func TestQueueShardSize(t *testing.T) {
	assert.Equal(t, uintptr(128), unsafe.Sizeof(queueShard[string]{}))
	assert.Equal(t, uintptr(128), unsafe.Sizeof(queueShard[[64]byte]{}))
}

// TestQueueShardsUnderContention checks that a queue starts with one lock
// guarding its records, moves them under the shards' locks once callers
// have found that lock held shardAfterContention times, and loses nothing
// on the way: the caller that triggers the move completes its Add.
func TestQueueShardsUnderContention(t *testing.T) {
	q := NewTyped[string]()
	defer q.ShutDown()
	q.Add("queued")
	item, _ := q.Get()
	require.Equal(t, "queued", item)
	q.Add("queued") // added again while processing: dirty
	require.False(t, q.sharded.Load(), "a new queue is sharded")

	q.contended.Store(shardAfterContention - 1)
	q.mu.Lock()
	added := make(chan struct{})
	go func() {
		q.Add("contender")
		close(added)
	}()
	for q.contended.Load() < shardAfterContention {
		runtime.Gosched() // until the contender has found mu held
	}
	q.mu.Unlock()
	<-added

	assert.True(t, q.sharded.Load(), "sharded after contention")
	q.Done("queued")
	assert.Equal(t, 2, q.Len())
	for _, want := range []string{"contender", "queued"} {
		item, _ := q.Get()
		assert.Equal(t, want, item)
		q.Done(item)
	}
	assert.Equal(t, 0, q.Len())
}

// TestQueueWithStorageIsSharded checks that custom storage, whose Get marks
// records under the one shard's lock, starts in the sharded form.
func TestQueueWithStorageIsSharded(t *testing.T) {
	q := NewTypedWithConfig(TypedQueueConfig[string]{Queue: &lifoStorage{}})
	defer q.ShutDown()
	assert.True(t, q.sharded.Load())
}

// TestQueuePushingRecord checks the window in which a sharded queue's Add
// has filed a new item's record but not yet pushed the item: an Add or Done
// of the item then finds it queued and does nothing, and a Get that takes
// the item once it is pushed finds its record ticketed, so that an Add
// during processing marks it dirty and Done queues it again.
func TestQueuePushingRecord(t *testing.T) {
	getAddDone := func(t *testing.T, q *Typed[string]) {
		item, _ := q.Get()
		q.Add(item)
		assert.Equal(t, 0, q.Len(), "%s is being processed: the Add marks it dirty", item)
		q.Done(item)
	}
	tests := []struct {
		name string
		// inWindow runs between the filing of x and its push.
		inWindow func(t *testing.T, q *Typed[string]) (wait func())
		// after runs once the Add of x has returned.
		after func(t *testing.T, q *Typed[string])
	}{
		{
			name: "add again",
			inWindow: func(t *testing.T, q *Typed[string]) func() {
				q.Add("x") // returns at once: x is queued
				return func() {}
			},
			after: func(t *testing.T, q *Typed[string]) {
				require.Equal(t, 1, q.Len(), "x queued once")
				item, _ := q.Get()
				assert.Equal(t, "x", item)
				q.Done(item)
				assert.Equal(t, 0, q.Len(), "the Add of a queued x made it dirty")
			},
		},
		{
			name: "done",
			inWindow: func(t *testing.T, q *Typed[string]) func() {
				q.Done("x") // x is not being processed: nothing to do
				return func() {}
			},
			after: func(t *testing.T, q *Typed[string]) {
				require.Equal(t, 1, q.Len())
				getAddDone(t, q)
				assert.Equal(t, 1, q.Len(), "x lost its record to the early Done")
			},
		},
		{
			name: "get waiting",
			inWindow: func(t *testing.T, q *Typed[string]) func() {
				finished := make(chan struct{})
				go func() {
					defer close(finished)
					getAddDone(t, q) // Get returns once x is pushed
				}()
				return func() { <-finished }
			},
			after: func(t *testing.T, q *Typed[string]) {
				assert.Equal(t, 1, q.Len(), "the Add during processing was lost")
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := NewTyped[string]()
			defer q.ShutDown()
			q.shard()
			// One item through first, so that a record with ticket 0
			// would count as handed out.
			q.Add("warm-up")
			getAddDone(t, q)
			item, _ := q.Get()
			q.Done(item)
			wait := func() {}
			q.filedHook = func() {
				q.filedHook = nil // the hook's own Add must not run it again
				wait = tt.inWindow(t, q)
			}
			q.Add("x")
			wait()
			tt.after(t, q)

			for q.Len() > 0 {
				item, _ := q.Get()
				q.Done(item)
			}
			q.mu.Lock()
			defer q.mu.Unlock()
			assert.True(t, q.idle(), "each item handed out must be counted done once")
		})
	}
}
