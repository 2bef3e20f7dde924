package workqueue

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-workqueue/workqueue/internal/ring"
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

// The racy tests below each pin one behaviour under concurrency, observed
// from outside the package, and name the fault they catch. The
// linearizability test checks all of them and more; these say in one place
// what must hold, and fail with a plain message.

// racyRounds is how many times each racy scenario is played: a fault shows
// in 1 to 10 percent of rounds, or less.
func racyRounds() int {
	if testing.Short() {
		return 20
	}
	return 100
}

// contenders runs n goroutines that add other keys, and once they have
// added a thousand, body, while they go on: the faults show only on a
// queue that has seen contention.
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

// An acknowledged Add must not be lost: after two Adds of one item, both
// returned before ShutDown began, the item is handed out, and a drain does
// not return before it is done.
func TestRegressionAcknowledgedAddIsNeverLost(t *testing.T) {
	for _, drain := range []bool{false, true} {
		for round := range racyRounds() {
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

// Acknowledged Adds must be handed out in order: when x's Add returned
// before y's Add was called, x is handed out first.
func TestRegressionFIFOOrderOfAcknowledgedAdds(t *testing.T) {
	for round := range racyRounds() {
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

// Len must count the caller's own Add: right after it returned, with no Get
// running, Len counts the item, even when another Add of it runs at the
// same time.
func TestRegressionLenCountsOwnAdd(t *testing.T) {
	q := NewTyped[string]()
	defer q.ShutDown()
	contenders(q, 2, func() {
		for round := range racyRounds() {
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

// An Add that overlaps ShutDown must not leave a dirty mark behind: it takes
// effect before ShutDown or not at all, so once ShutDown has returned, an
// item queued before it is handed out once, and its Done does not queue it
// again.
func TestRegressionNoDirtyMarkAfterShutDown(t *testing.T) {
	for _, custom := range []bool{false, true} {
		for round := range racyRounds() {
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

// A drain must wait for an item that its Done queues again: one added while
// processing, before the drain began.
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

// Custom storage that holds items when the queue is made must not lose or
// double them: the queue hands them out, each once, in the storage's order.
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

// panickyStorage is FIFO storage whose Push panics while fail is set.
type panickyStorage struct {
	ring.Ring[string]
	fail bool
}

func (s *panickyStorage) Push(item string) {
	if s.fail {
		panic("storage full")
	}
	s.Ring.Push(item)
}

// returnsWithin reports whether f returns within d: a bound that only a
// hang reaches, so it costs nothing when the test passes.
func returnsWithin(d time.Duration, f func()) bool {
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
		return true
	case <-time.After(d):
		return false
	}
}

// User code that panics under the queue's lock, such as custom storage
// whose Push panics, must leave the queue consistent and unlocked.
//
// A Push that panics in Add must not leave a record of an item that is not
// stored: it would never be handed out, later Adds of it would collapse into
// it, and a drain would wait for it for ever.
func TestStoragePushPanicInAdd(t *testing.T) {
	storage := &panickyStorage{fail: true}
	q := NewTypedWithConfig(TypedQueueConfig[string]{Queue: storage})
	assert.Panics(t, func() { q.Add("x") })
	storage.fail = false
	assert.NoError(t, verifyQueue(q), "invariant broken after the panic")
	q.Add("x") // a caller retries: collapsed into the ghost record
	assert.Equal(t, 1, q.Len(), "x was added twice and is not queued")
	assert.True(t, returnsWithin(10*time.Second, func() {
		go func() { item, _ := q.Get(); q.Done(item) }()
		q.ShutDownWithDrain()
	}), "drain waits for a ghost for ever")
	q.ShutDown()
}

// The same through Done, which queues a dirty item again: a Done that
// panics has not happened, so the item is still processing, and a Done that
// succeeds later queues it again.
func TestStoragePushPanicInDone(t *testing.T) {
	storage := &panickyStorage{}
	q := NewTypedWithConfig(TypedQueueConfig[string]{Queue: storage})
	q.Add("x")
	item, _ := q.Get()
	q.Add("x") // dirty
	storage.fail = true
	assert.Panics(t, func() { q.Done(item) })
	storage.fail = false
	assert.NoError(t, verifyQueue(q))
	assert.Equal(t, 0, q.Len(), "x is still processing")
	q.Done(item)
	assert.Equal(t, 1, q.Len(), "x queued again by the Done that succeeded")
	assert.True(t, returnsWithin(10*time.Second, func() {
		go func() { item, _ := q.Get(); q.Done(item) }()
		q.ShutDownWithDrain()
	}), "the drain did not return once x was done")
	q.ShutDown()
}
