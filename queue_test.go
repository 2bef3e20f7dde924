package workqueue

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/go-workqueue/workqueue/internal/ring"
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
func racyRounds() int { return sized(100, 50, 20) }

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

// contextQueue is what the GetContext tests need of each layer.
type contextQueue interface {
	TypedInterface[string]
	GetContext(ctx context.Context) (string, error)
}

// contextLayers builds each layer of this package, so that every test runs
// on all of them.
var contextLayers = []struct {
	name string
	new  func() contextQueue
}{
	{"queue", func() contextQueue { return NewTyped[string]() }},
	{"delaying", func() contextQueue { return NewTypedDelayingQueue[string]() }},
	{"rate-limiting", func() contextQueue {
		return NewTypedRateLimitingQueue(DefaultTypedControllerRateLimiter[string]())
	}},
}

// getResult is what a GetContext call returned.
type getResult struct {
	item string
	err  error
}

// goGetContext calls q.GetContext(ctx) in a new goroutine, which sends the
// result on the returned channel.
func goGetContext(q contextGetter[string], ctx context.Context) <-chan getResult {
	out := make(chan getResult, 1)
	go func() {
		item, err := q.GetContext(ctx)
		out <- getResult{item, err}
	}()
	return out
}

func TestGetContext(t *testing.T) {
	tests := []struct {
		name string
		// setup prepares the queue and returns the context to call with,
		// and what to do once the call is asleep.
		setup    func(q contextQueue) (context.Context, func())
		wantItem string
		wantErr  error
		wantLen  int
	}{
		{"an item is queued", func(q contextQueue) (context.Context, func()) {
			q.Add("a")
			return context.Background(), func() {}
		}, "a", nil, 0},
		{"an item is added while it waits", func(q contextQueue) (context.Context, func()) {
			return context.Background(), func() { q.Add("a") }
		}, "a", nil, 0},
		{"the context has ended already, with an item queued", func(q contextQueue) (context.Context, func()) {
			q.Add("a")
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			return ctx, func() {}
		}, "", context.Canceled, 1},
		{"the context is cancelled while it waits", func(q contextQueue) (context.Context, func()) {
			ctx, cancel := context.WithCancel(context.Background())
			return ctx, cancel
		}, "", context.Canceled, 0},
		{"the deadline passes while it waits", func(q contextQueue) (context.Context, func()) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			return ctx, func() {
				time.Sleep(time.Second)
				synctest.Wait() // the call has returned
				cancel()
			}
		}, "", context.DeadlineExceeded, 0},
		{"shut down while it waits", func(q contextQueue) (context.Context, func()) {
			return context.Background(), q.ShutDown
		}, "", ErrShutDown, 0},
		{"shut down with an item queued", func(q contextQueue) (context.Context, func()) {
			q.Add("a")
			q.ShutDown()
			return context.Background(), func() {}
		}, "a", nil, 0},
	}
	for _, layer := range contextLayers {
		for _, tt := range tests {
			t.Run(layer.name+"/"+tt.name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					q := layer.new()
					defer q.ShutDown()
					ctx, whileAsleep := tt.setup(q)
					out := goGetContext(q, ctx)
					synctest.Wait()
					whileAsleep()
					got := <-out
					assert.Equal(t, tt.wantItem, got.item)
					assert.ErrorIs(t, got.err, tt.wantErr)
					assert.Equal(t, tt.wantLen, q.Len())
				})
			})
		}
	}
}

// TestGetContextPassesOnItsWakeup wakes a GetContext caller with an add
// and ends its context, both while the test holds the queue's lock, so the
// caller sees both when it gets the lock. Whichever its select chose, the
// item is handed out once, and never left queued while a Get caller
// sleeps: a caller whose context won passes the wakeup on.
func TestGetContextPassesOnItsWakeup(t *testing.T) {
	tests := []struct {
		name string
		// cancelFirst ends the context before the add; the select of the
		// sleeping caller then picks the context.
		cancelFirst bool
		wantFirst   error
	}{
		{"woken, then the context ends", false, nil},
		{"the context ends, then woken", true, context.Canceled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				q := NewTyped[string]()
				defer q.ShutDown()
				ctx, cancel := context.WithCancel(context.Background())
				first := make(chan error, 1)
				go func() {
					item, err := q.GetContext(ctx)
					if err == nil {
						q.Done(item)
					}
					first <- err
				}()
				synctest.Wait()
				second := make(chan string, 1)
				go func() {
					item, _ := q.Get()
					second <- item
				}()
				synctest.Wait()
				q.core.mu.Lock()
				if tt.cancelFirst {
					cancel()
				}
				q.addLocked("x", q.core.items.Hash("x")) // wakes the first caller
				cancel()
				q.core.mu.Unlock()
				synctest.Wait()
				require.ErrorIs(t, <-first, tt.wantFirst)
				select {
				case item := <-second:
					require.NotNil(t, tt.wantFirst, "both callers got %q", item)
					require.Equal(t, "x", item)
				default:
					require.Nil(t, tt.wantFirst, "x left queued (Len %d) while a Get caller sleeps", q.Len())
				}
				require.NoError(t, verifyQueue(q))
			})
		})
	}
}

// TestGetContextStress runs producers of distinct items against consumers
// whose contexts end at random, then drains: every item must be handed out
// exactly once, and the queue's invariant hold at the end.
func TestGetContextStress(t *testing.T) {
	const producers, consumers, perProducer = 4, 6, 2000
	for _, layer := range contextLayers {
		t.Run(layer.name, func(t *testing.T) {
			q := layer.new()
			var mu sync.Mutex
			got := map[int]int{}
			var consumersDone sync.WaitGroup
			for c := range consumers {
				consumersDone.Go(func() {
					rng := rand.New(rand.NewPCG(uint64(c), 1))
					for {
						ctx, cancel := context.WithTimeout(context.Background(), time.Duration(rng.IntN(20))*time.Microsecond)
						item, err := q.GetContext(ctx)
						cancel()
						switch {
						case errors.Is(err, ErrShutDown):
							return
						case err != nil:
							continue
						}
						n, _ := strconv.Atoi(item)
						mu.Lock()
						got[n]++
						mu.Unlock()
						q.Done(item)
					}
				})
			}
			var producersDone sync.WaitGroup
			for p := range producers {
				producersDone.Go(func() {
					for i := p * perProducer; i < (p+1)*perProducer; i++ {
						q.Add(strconv.Itoa(i))
					}
				})
			}
			producersDone.Wait()
			q.ShutDownWithDrain()
			consumersDone.Wait()
			require.Len(t, got, producers*perProducer)
			for n, times := range got {
				require.Equalf(t, 1, times, "item %d handed out %d times", n, times)
			}
			if typed, ok := q.(*Typed[string]); ok {
				require.NoError(t, verifyQueue(typed))
			}
		})
	}
}

// TestGetContextUnsupported checks the outcome on a layer over a queue from
// outside this package that has no GetContext: an error, not a hang.
func TestGetContextUnsupported(t *testing.T) {
	q := NewTypedDelayingQueueWithConfig(TypedDelayingQueueConfig[string]{Queue: foreignQueue{NewTyped[string]()}})
	defer q.ShutDown()
	q.Add("a")
	_, err := q.GetContext(context.Background())
	assert.ErrorIs(t, err, errors.ErrUnsupported)
	assert.Equal(t, 1, q.Len(), "the item stays queued")
	assert.False(t, q.Remove("a"), "a foreign queue without Remove keeps its items")
}

// foreignQueue hides every method of the queue it wraps beyond
// TypedInterface, as a queue from outside this package would.
type foreignQueue struct{ TypedInterface[string] }

// removeStep is one step of a scripted Remove test: runQueueOps's steps
// plus "remove", whose want is what Remove reports.
type removeStep struct {
	queueOp
	removed bool
}

func runRemoveSteps(t *testing.T, q *Typed[string], steps []removeStep) {
	t.Helper()
	for i, step := range steps {
		if step.op == "remove" {
			require.Equalf(t, step.removed, q.Remove(step.item), "step %d: Remove(%q)", i, step.item)
		} else {
			runQueueOps(t, q, []queueOp{step.queueOp})
		}
		require.NoErrorf(t, verifyQueue(q), "step %d", i)
	}
}

func TestRemove(t *testing.T) {
	op := func(op, item string, want any) removeStep {
		return removeStep{queueOp: queueOp{op: op, item: item, want: want}}
	}
	remove := func(item string, removed bool) removeStep {
		return removeStep{queueOp: queueOp{op: "remove", item: item}, removed: removed}
	}
	tests := []struct {
		name string
		// custom runs the steps on custom FIFO storage instead of the
		// default storage, where they differ.
		custom bool
		steps  []removeStep
	}{
		{"a queued item leaves the queue", false, []removeStep{
			op("add", "a", nil), op("add", "b", nil), op("add", "c", nil),
			remove("b", true), op("len", "", 2),
			op("get", "", "a"), op("get", "", "c"), op("len", "", 0),
		}},
		{"an unknown item", false, []removeStep{
			op("add", "a", nil), remove("x", false), op("len", "", 1),
		}},
		{"removed twice", false, []removeStep{
			op("add", "a", nil), remove("a", true), remove("a", false), op("len", "", 0),
		}},
		{"a processing item keeps being processed", false, []removeStep{
			op("add", "a", nil), op("get", "", "a"), remove("a", false),
			op("add", "a", nil), op("done", "a", nil), op("get", "", "a"),
		}},
		{"a dirty item is not queued again by Done", false, []removeStep{
			op("add", "a", nil), op("get", "", "a"), op("add", "a", nil),
			remove("a", true), op("done", "a", nil), op("len", "", 0),
			op("add", "b", nil), op("get", "", "b"),
		}},
		{"added again after removal, it goes to the back", false, []removeStep{
			op("add", "a", nil), op("add", "b", nil), remove("a", true), op("add", "a", nil),
			op("len", "", 2), op("get", "", "b"), op("get", "", "a"), op("len", "", 0),
		}},
		{"added again and removed again", false, []removeStep{
			op("add", "a", nil), remove("a", true), op("add", "a", nil), remove("a", true),
			op("add", "a", nil), op("len", "", 1), op("get", "", "a"), op("len", "", 0),
		}},
		{"custom storage: a queued item leaves the queue", true, []removeStep{
			op("add", "a", nil), op("add", "b", nil), op("add", "c", nil),
			remove("b", true), op("len", "", 2),
			op("get", "", "a"), op("get", "", "c"), op("len", "", 0),
		}},
		{"custom storage: added again, it keeps its old place", true, []removeStep{
			op("add", "a", nil), op("add", "b", nil), remove("a", true), op("add", "a", nil),
			op("len", "", 2), op("get", "", "a"), op("get", "", "b"),
		}},
		{"custom storage: Done of a removed item does nothing", true, []removeStep{
			op("add", "a", nil), remove("a", true), op("done", "a", nil), op("len", "", 0),
			op("add", "b", nil), op("get", "", "b"), op("len", "", 0),
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			config := TypedQueueConfig[string]{}
			if tt.custom {
				config.Queue = DefaultQueue[string]()
			}
			q := NewTypedWithConfig(config)
			defer q.ShutDown()
			runRemoveSteps(t, q, tt.steps)
		})
	}
}

// TestRemoveReleasesMemory checks that removed items do not pin the
// queue's memory: once nothing is held, the table and the FIFO's links have
// let go of what the burst made them grow to.
func TestRemoveReleasesMemory(t *testing.T) {
	q := NewTyped[int]()
	defer q.ShutDown()
	for i := range 5000 {
		q.Add(i)
	}
	for i := range 4999 {
		require.True(t, q.Remove(i))
	}
	got, _ := q.Get()
	assert.Equal(t, 4999, got)
	q.Done(got)
	require.NoError(t, verifyQueue(q))
	assert.Zero(t, q.core.items.IDLimit(), "entries held after every item left")
	assert.Zero(t, q.core.order.(*fifoOrder).links.Size(), "links kept after every item left")
}

func TestRemoveEndsADrain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := NewTyped[string]()
		q.Add("a")
		drained := make(chan struct{})
		go func() {
			q.ShutDownWithDrain()
			close(drained)
		}()
		synctest.Wait()
		select {
		case <-drained:
			t.Fatal("drain returned with an item queued")
		default:
		}
		require.True(t, q.Remove("a"))
		synctest.Wait()
		select {
		case <-drained:
		default:
			t.Fatal("drain still waits after the last item was removed")
		}
	})
}

func TestRemoveMetrics(t *testing.T) {
	provider := &recordingProvider{}
	q := NewTypedWithConfig(TypedQueueConfig[string]{Name: "q", MetricsProvider: provider})
	defer q.ShutDown()
	q.Add("a")
	q.Add("b")
	q.Remove("a")
	assert.Equal(t, 1.0, provider.Value("q", "depth"))
	got, _ := q.Get()
	require.Equal(t, "b", got)
	q.Add("b") // dirty: counted in the depth until removed
	assert.Equal(t, 1.0, provider.Value("q", "depth"))
	q.Remove("b")
	assert.Equal(t, 0.0, provider.Value("q", "depth"))
	q.Done("b")
	assert.Equal(t, 0.0, provider.Value("q", "depth"))
	assert.Len(t, provider.Observations("q", "latency"), 1, "only b's Get waited")
}

// TestRemoveLayers checks Remove on the delaying and rate-limiting layers:
// it takes an item back from the heap and the queue, and the rate-limiting
// layer forgets its failures.
func TestRemoveLayers(t *testing.T) {
	tests := []struct {
		name        string
		setup       func(q rateLimitingQueue[string])
		removed     bool
		wantLen     int
		wantRequeue int
	}{
		{"waiting for its delay", func(q rateLimitingQueue[string]) { q.AddAfter("a", time.Second) }, true, 0, 0},
		{"queued", func(q rateLimitingQueue[string]) { q.Add("a") }, true, 0, 0},
		{"waiting and queued", func(q rateLimitingQueue[string]) {
			q.Add("a")
			q.AddAfter("a", time.Second)
		}, true, 0, 0},
		{"retrying", func(q rateLimitingQueue[string]) {
			q.AddRateLimited("a")
			q.AddRateLimited("a")
		}, true, 0, 0},
		{"only failures", func(q rateLimitingQueue[string]) {
			q.AddRateLimited("a")
			q.Remove("a")
			q.AddRateLimited("b") // so the limiter holds something else
		}, false, 0, 0},
		{"another item", func(q rateLimitingQueue[string]) { q.AddAfter("b", time.Second) }, false, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				clock := clocktesting.NewFakeClock(time.Unix(0, 0))
				limiter := NewTypedItemExponentialFailureRateLimiter[string](time.Millisecond, time.Minute)
				q := NewTypedRateLimitingQueueWithConfig[string](limiter, TypedRateLimitingQueueConfig[string]{Clock: clock})
				defer q.ShutDown()
				tt.setup(q)
				synctest.Wait()
				assert.Equal(t, tt.removed, q.Remove("a"))
				assert.Equal(t, tt.wantRequeue, q.NumRequeues("a"))
				clock.Step(time.Hour) // whatever still waits is now ready
				synctest.Wait()
				for q.Len() > 0 {
					item, _ := q.Get()
					assert.NotEqual(t, "a", item, "a was handed out after Remove")
					q.Done(item)
				}
				assert.Equal(t, tt.wantLen, q.Len())
			})
		})
	}
}

// Add, Get and Done unlock without a deferred call only on a queue that calls no
// user code with its lock held: a panic there would leave the queue locked.
func TestUnguardedOnlyWithoutUserCodeUnderTheLock(t *testing.T) {
	for _, tc := range []struct {
		name   string
		config TypedQueueConfig[string]
		want   bool
	}{
		{"defaults", TypedQueueConfig[string]{}, true},
		{"named, no provider", TypedQueueConfig[string]{Name: "q"}, true},
		{"custom storage", TypedQueueConfig[string]{Queue: DefaultQueue[string]()}, false},
		{"group limits", TypedQueueConfig[string]{GroupLimits: &GroupLimits[string]{Group: func(string) string { return "g" }, Default: 1}}, false},
		{"metrics provider", TypedQueueConfig[string]{Name: "q", MetricsProvider: nilProvider{}}, false},
		{"fake clock", TypedQueueConfig[string]{Clock: clocktesting.NewFakeClock(time.Unix(0, 0))}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := NewTypedWithConfig(tc.config)
			defer q.ShutDown()
			assert.Equal(t, tc.want, q.core.unguarded, "got unguarded %v, want %v", q.core.unguarded, tc.want)
		})
	}
}
