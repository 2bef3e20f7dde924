package workqueue

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

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
// and that every item added is processed after its last add.
func TestNoItemHeldByTwoWorkers(t *testing.T) {
	const producers, workers, adds, keys = 4, 8, 5000, 50
	q := NewTyped[int]()
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

// A burst of adds wakes one sleeping Get caller, which passes the wakeup
// on: every sleeper must still get an item.
func TestBurstReachesEverySleepingGet(t *testing.T) {
	for _, custom := range []bool{false, true} {
		t.Run(fmt.Sprintf("custom=%v", custom), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var config TypedQueueConfig[int]
				if custom {
					config.Queue = DefaultQueue[int]()
				}
				q := NewTypedWithConfig(config)
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
// it, so that each Add races a worker that is about to sleep: a lost
// wakeup leaves the item queued and the test waiting.
func TestNoWakeupLost(t *testing.T) {
	const rounds = 20_000
	for _, workers := range []int{1, 4} {
		t.Run(fmt.Sprintf("workers=%d", workers), func(t *testing.T) {
			// In a bubble, so that time.After fires only once every
			// goroutine is blocked for good: a lost wakeup fails at once.
			synctest.Test(t, func(t *testing.T) { pingPong(t, workers, rounds) })
		})
	}
}

func pingPong(t *testing.T, workers, rounds int) {
	q := NewTyped[int]()
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
