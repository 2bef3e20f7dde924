package workqueue

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/clock"
)

// debounceQueue is what the debounce tests call of the three queues that
// debounce.
type debounceQueue interface {
	TypedRateLimitingInterface[string]
	Reschedule(item string, duration time.Duration)
}

// debounceKinds makes each queue that debounces, with db, clk and a limiter
// that delays every retry by limiterDelay.
var debounceKinds = []struct {
	name string
	make func(db Debounce, clk clock.WithTicker) debounceQueue
}{
	{"delaying", func(db Debounce, clk clock.WithTicker) debounceQueue {
		// A delaying queue has no AddRateLimited: the rate-limiting layer
		// over it, without a DelayingQueue of its own, is the same queue.
		return NewTypedRateLimitingQueueWithConfig(fixedLimiter(limiterDelay), TypedRateLimitingQueueConfig[string]{
			Clock:         clk,
			DelayingQueue: NewTypedDelayingQueueWithConfig(TypedDelayingQueueConfig[string]{Debounce: db, Clock: clk, Logger: discardLogger}),
		})
	}},
	{"rate-limiting", func(db Debounce, clk clock.WithTicker) debounceQueue {
		return NewTypedRateLimitingQueueWithConfig(fixedLimiter(limiterDelay), TypedRateLimitingQueueConfig[string]{Debounce: db, Clock: clk})
	}},
	{"priority", func(db Debounce, clk clock.WithTicker) debounceQueue {
		return NewTypedPriorityQueue(fixedLimiter(limiterDelay), TypedPriorityQueueConfig[string]{Debounce: db, Clock: clk, Logger: discardLogger})
	}},
}

const limiterDelay = 30 * time.Millisecond

// fixedLimiter delays every retry by d and counts failures.
func fixedLimiter(d time.Duration) TypedRateLimiter[string] {
	return NewTypedMaxOfRateLimiter(NewTypedItemExponentialFailureRateLimiter[string](d, d))
}

// debounceStep is one call of a debounce test at a time since its start:
// add, addAfter, reschedule or addRateLimited of item (with d); get, which
// must hand out item (the queue holds it until done); done of item; or
// ready, which checks the items Len counts.
type debounceStep struct {
	at   time.Duration
	op   string
	item string
	d    time.Duration
	n    int // for ready
}

func TestDebounce(t *testing.T) {
	const ms = time.Millisecond
	quiet := Debounce{Quiet: 100 * ms, MaxDelay: 300 * ms}
	add := func(at time.Duration) debounceStep { return debounceStep{at: at, op: "add", item: "a"} }
	ready := func(at time.Duration, n int) debounceStep { return debounceStep{at: at, op: "ready", n: n} }
	get := func(at time.Duration) debounceStep { return debounceStep{at: at, op: "get", item: "a"} }
	done := func(at time.Duration) debounceStep { return debounceStep{at: at, op: "done", item: "a"} }
	call := func(at time.Duration, op string, d time.Duration) debounceStep {
		return debounceStep{at: at, op: op, item: "a", d: d}
	}
	tests := []struct {
		name  string
		db    Debounce
		steps []debounceStep
	}{
		{"ready a quiet period after the last add", quiet,
			[]debounceStep{add(0), add(40 * ms), add(80 * ms), ready(179*ms, 0), ready(180*ms, 1), get(180 * ms), done(180 * ms), ready(time.Hour, 0)}},
		{"never later than MaxDelay after the first add", quiet,
			[]debounceStep{add(0), add(90 * ms), add(180 * ms), add(270 * ms), ready(299*ms, 0), ready(300*ms, 1),
				get(300 * ms), add(350 * ms), done(360 * ms), ready(449*ms, 0), ready(450*ms, 1)}},
		{"MaxDelay zero means Quiet", Debounce{Quiet: 100 * ms},
			[]debounceStep{add(0), add(50 * ms), ready(99*ms, 0), ready(100*ms, 1)}},
		{"AddAfter of no delay is debounced", quiet,
			[]debounceStep{call(0, "addAfter", 0), call(50*ms, "addAfter", -time.Second), ready(149*ms, 0), ready(150*ms, 1)}},
		{"an add of a queued item changes nothing", quiet,
			[]debounceStep{add(0), ready(100*ms, 1), add(150 * ms), get(160 * ms), done(170 * ms), ready(time.Hour, 0)}},
		{"an add of a processing item is queued at Done once quiet", quiet,
			[]debounceStep{add(0), get(100 * ms), add(110 * ms), done(150 * ms), ready(209*ms, 0), ready(210*ms, 1)}},
		{"an add of a processing item whose burst ended is queued at Done", quiet,
			[]debounceStep{add(0), get(100 * ms), add(110 * ms), ready(250*ms, 0), done(250 * ms), ready(250*ms, 1), get(250 * ms), done(250 * ms), ready(time.Hour, 0)}},
		{"a shorter AddAfter ends the burst", quiet,
			[]debounceStep{add(0), call(10*ms, "addAfter", 20*ms), ready(29*ms, 0), ready(30*ms, 1), get(30 * ms), done(30 * ms), ready(time.Hour, 0)}},
		{"an AddAfter bounds the burst", quiet,
			[]debounceStep{add(0), call(0, "addAfter", 200*ms), add(90 * ms), add(180 * ms), ready(199*ms, 0), ready(200*ms, 1)}},
		{"an add during a longer AddAfter is debounced", quiet,
			[]debounceStep{call(0, "addAfter", time.Second), add(10 * ms), ready(109*ms, 0), ready(110*ms, 1), get(110 * ms), done(110 * ms), ready(time.Hour, 0)}},
		{"AddRateLimited is not debounced and ends the burst", quiet,
			[]debounceStep{add(0), call(10*ms, "addRateLimited", 0), ready(39*ms, 0), ready(40*ms, 1), get(40 * ms), done(40 * ms), ready(time.Hour, 0)}},
		{"Reschedule replaces a burst with a later time", quiet,
			[]debounceStep{add(0), call(10*ms, "reschedule", 500*ms), ready(509*ms, 0), ready(510*ms, 1)}},
		{"an add after a Reschedule is debounced within it", quiet,
			[]debounceStep{call(0, "reschedule", time.Second), add(10 * ms), ready(109*ms, 0), ready(110*ms, 1), get(110 * ms), done(110 * ms), ready(time.Hour, 0)}},
		{"Reschedule of no delay adds at once", quiet,
			[]debounceStep{add(0), call(10*ms, "reschedule", 0), ready(10*ms, 1), get(10 * ms), done(10 * ms), ready(time.Hour, 0)}},
		{"without Debounce an Add is at once", Debounce{},
			[]debounceStep{add(0), ready(0, 1)}},
	}
	for _, kind := range debounceKinds {
		for _, tt := range tests {
			t.Run(kind.name+"/"+tt.name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					q := kind.make(tt.db, clock.RealClock{})
					defer q.ShutDown()
					runDebounceSteps(t, q, tt.steps)
				})
			})
		}
	}
}

// forEachDebounceKind runs test on a new queue of each kind, with db, in a
// synctest bubble.
func forEachDebounceKind(t *testing.T, db Debounce, test func(t *testing.T, kind string, q debounceQueue)) {
	for _, kind := range debounceKinds {
		t.Run(kind.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				q := kind.make(db, clock.RealClock{})
				defer q.ShutDown()
				test(t, kind.name, q)
			})
		})
	}
}

// runDebounceSteps runs steps on q in a synctest bubble.
func runDebounceSteps(t *testing.T, q debounceQueue, steps []debounceStep) {
	t.Helper()
	start := time.Now()
	for _, s := range steps {
		time.Sleep(time.Until(start.Add(s.at)))
		synctest.Wait() // the delay goroutine has moved what is due
		switch s.op {
		case "add":
			q.Add(s.item)
		case "addAfter":
			q.AddAfter(s.item, s.d)
		case "reschedule":
			q.Reschedule(s.item, s.d)
		case "addRateLimited":
			q.AddRateLimited(s.item)
		case "ready":
			require.Equal(t, s.n, q.Len(), "at %v: got %d ready, want %d", s.at, q.Len(), s.n)
		case "get":
			require.Equal(t, 1, q.Len(), "at %v: nothing ready to get", s.at)
			got, _ := q.Get()
			require.Equal(t, s.item, got, "at %v: got %q, want %q", s.at, got, s.item)
		case "done":
			q.Done(s.item)
		default:
			t.Fatalf("unknown step %q", s.op)
		}
	}
}

// TestReschedule pins down Reschedule against AddAfter on every queue: the
// latest call wins, earlier or later.
func TestReschedule(t *testing.T) {
	const ms = time.Millisecond
	call := func(at time.Duration, op string, d time.Duration) debounceStep {
		return debounceStep{at: at, op: op, item: "a", d: d}
	}
	ready := func(at time.Duration, n int) debounceStep { return debounceStep{at: at, op: "ready", n: n} }
	get := func(at time.Duration) debounceStep { return debounceStep{at: at, op: "get", item: "a"} }
	done := func(at time.Duration) debounceStep { return debounceStep{at: at, op: "done", item: "a"} }
	tests := []struct {
		name  string
		steps []debounceStep
	}{
		{"later than a pending AddAfter",
			[]debounceStep{call(0, "addAfter", 100*ms), call(10*ms, "reschedule", 300*ms), ready(100*ms, 0), ready(309*ms, 0), ready(310*ms, 1),
				get(310 * ms), done(310 * ms), ready(time.Hour, 0)}},
		{"earlier than a pending AddAfter",
			[]debounceStep{call(0, "addAfter", time.Second), call(0, "reschedule", 100*ms), ready(100*ms, 1), get(100 * ms), done(100 * ms), ready(time.Hour, 0)}},
		{"replaced by a later Reschedule",
			[]debounceStep{call(0, "reschedule", 100*ms), call(50*ms, "reschedule", 100*ms), ready(100*ms, 0), ready(150*ms, 1)}},
		{"an AddAfter after it keeps the earliest",
			[]debounceStep{call(0, "reschedule", 100*ms), call(0, "addAfter", 300*ms), ready(100*ms, 1), get(100 * ms), done(100 * ms), ready(time.Hour, 0)}},
		{"of a processing item, queued at Done",
			[]debounceStep{call(0, "add", 0), get(0), call(0, "reschedule", 100*ms), ready(100*ms, 0), done(100 * ms), ready(100*ms, 1)}},
		{"of no delay, at once and instead of the waiting add",
			[]debounceStep{call(0, "addAfter", 100*ms), call(0, "reschedule", 0), ready(0, 1), get(0), done(0), ready(time.Hour, 0)}},
		{"without a waiting add",
			[]debounceStep{call(0, "reschedule", 100*ms), ready(99*ms, 0), ready(100*ms, 1)}},
	}
	for _, kind := range debounceKinds {
		for _, tt := range tests {
			t.Run(kind.name+"/"+tt.name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					q := kind.make(Debounce{}, clock.RealClock{})
					defer q.ShutDown()
					runDebounceSteps(t, q, tt.steps)
				})
			})
		}
	}
}

// TestRescheduleOfAReadyItem: a Reschedule does not take back an add that
// made the item ready. On the priority queue the item is handed out once;
// the delaying and rate-limiting queues, like their AddAfter, add it again
// when the delay ends.
func TestRescheduleOfAReadyItem(t *testing.T) {
	const ms = time.Millisecond
	forEachDebounceKind(t, Debounce{}, func(t *testing.T, kind string, q debounceQueue) {
		q.Add("a")
		q.Reschedule("a", 100*ms)
		assert.Equal(t, []string{"a"}, drainReady(q), "ready at once")
		time.Sleep(100 * ms)
		again := drainReady(q)
		if kind == "priority" {
			assert.Empty(t, again, "the priority queue held one ready time")
		} else {
			assert.Equal(t, []string{"a"}, again, "added again at the delay's end, as AddAfter does")
		}
	})
}

func TestDebounceRemoveAndShutDownEndTheBurst(t *testing.T) {
	const ms = time.Millisecond
	forEachDebounceKind(t, Debounce{Quiet: 100 * ms, MaxDelay: 200 * ms}, func(t *testing.T, kind string, q debounceQueue) {
		q.Add("a")
		assert.True(t, q.(remover[string]).Remove("a"), "Remove takes back a debounced item")
		time.Sleep(150 * ms)
		for i := range 3 {
			if i > 0 {
				time.Sleep(90 * ms)
			}
			q.Add("a") // at 150, 240 and 330 ms: a new burst, from 150 ms
		}
		time.Sleep(19 * ms)
		synctest.Wait()
		assert.Equal(t, 0, q.Len(), "the new burst's MaxDelay counts from its first add")
		time.Sleep(ms)
		assert.Equal(t, []string{"a"}, drainReady(q))
		q.Add("b")
		q.ShutDown()
		time.Sleep(time.Second)
		assert.Equal(t, 0, q.Len(), "a shutdown drops a debounced item")
		q.Add("b")
		assert.Zero(t, q.(snapshotter[string]).Snapshot(0).Waiting, "an add after a shutdown does nothing")
	})
}

func TestDebounceSnapshotListsTheReadyTime(t *testing.T) {
	const ms = time.Millisecond
	forEachDebounceKind(t, Debounce{Quiet: 100 * ms, MaxDelay: 150 * ms}, func(t *testing.T, kind string, q debounceQueue) {
		start := time.Now()
		q.Add("a")
		time.Sleep(80 * ms)
		q.Add("a")
		s := q.(snapshotter[string]).Snapshot(1)
		require.Len(t, s.Delayed, 1)
		assert.Equal(t, start.Add(150*ms), s.Delayed[0].ReadyAt, "capped by MaxDelay")
	})
}

func TestDebounceConfigPanics(t *testing.T) {
	const ms = time.Millisecond
	tests := []struct {
		db   Debounce
		want string
	}{
		{Debounce{Quiet: -ms}, "Debounce must not be negative"},
		{Debounce{Quiet: ms, MaxDelay: -ms}, "Debounce must not be negative"},
		{Debounce{MaxDelay: ms}, "Debounce.MaxDelay set without a Quiet period"},
		{Debounce{Quiet: 2 * ms, MaxDelay: ms}, "Debounce.MaxDelay must be at least Quiet"},
	}
	constructors := map[string]func(db Debounce){
		"NewTypedDelayingQueueWithConfig": func(db Debounce) {
			NewTypedDelayingQueueWithConfig(TypedDelayingQueueConfig[string]{Debounce: db}).ShutDown()
		},
		"NewTypedRateLimitingQueueWithConfig": func(db Debounce) {
			NewTypedRateLimitingQueueWithConfig(fixedLimiter(ms), TypedRateLimitingQueueConfig[string]{Debounce: db}).ShutDown()
		},
		"NewTypedPriorityQueue": func(db Debounce) {
			NewTypedPriorityQueue(fixedLimiter(ms), TypedPriorityQueueConfig[string]{Debounce: db}).ShutDown()
		},
	}
	for _, name := range slices.Sorted(maps.Keys(constructors)) {
		for _, tt := range tests {
			t.Run(fmt.Sprintf("%s/%+v", name, tt.db), func(t *testing.T) {
				assert.PanicsWithValue(t, fmt.Sprintf("workqueue: %s: %s, got %+v", name, tt.want, tt.db), func() { constructors[name](tt.db) })
			})
		}
	}
	t.Run("with a DelayingQueue", func(t *testing.T) {
		delaying := NewTypedDelayingQueue[string]()
		defer delaying.ShutDown()
		assert.PanicsWithValue(t, "workqueue: NewTypedRateLimitingQueueWithConfig: Debounce with a DelayingQueue; set it in the DelayingQueue's own config", func() {
			NewTypedRateLimitingQueueWithConfig(fixedLimiter(ms), TypedRateLimitingQueueConfig[string]{DelayingQueue: delaying, Debounce: Debounce{Quiet: ms}})
		})
	})
}

// verifyBursts checks the delayer's bursts: every item in a burst waits,
// ready no later than its burst's deadline. The caller holds the owner's
// lock.
func verifyBursts[T comparable](d *delayer[T]) error {
	for item, deadline := range d.bursts {
		readyAt, ok := d.heap.ReadyAt(item)
		if !ok {
			return fmt.Errorf("%v is in a burst but not waiting", item)
		}
		if readyAt > deadline {
			return fmt.Errorf("%v is ready at %d, after its burst's deadline %d", item, readyAt, deadline)
		}
	}
	return nil
}

// TestModelCatchesDebouncePastItsLongestWait is the broken variant of the
// model walks for Debounce: a queue whose bursts extend past their longest
// wait (its MaxDelay an hour, the model's as the walks set it) must diverge
// from the model within a few walks, on the rate-limiting queue and on the
// priority queue.
func TestModelCatchesDebouncePastItsLongestWait(t *testing.T) {
	const walks = 20
	broken := func(db Debounce) Debounce { db.MaxDelay = time.Hour; return db }
	tests := []struct {
		name string
		walk func(seed uint64) string
	}{
		{"rate-limiting", func(seed uint64) string {
			db := modelDebounces[1]
			_, divergence := runModelWalkOn(randomOps(rand.New(rand.NewPCG(seed, 0x5eed)), 2000), false, db, broken(db))
			return divergence
		}},
		{"priority", func(seed uint64) string {
			db := Debounce{Quiet: 10 * time.Millisecond} // as the "debounce-window" walks
			_, divergence := runPQModelWalkOn(0, 0, db, broken(db), randomPQOps(rand.New(rand.NewPCG(seed, 15)), 400))
			return divergence
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			caught := -1
			for seed := uint64(0); seed < walks && caught < 0; seed++ {
				synctest.Test(t, func(t *testing.T) {
					if divergence := tt.walk(seed); divergence != "" {
						caught = int(seed)
						t.Logf("caught in walk %d: %s", seed, divergence)
					}
				})
			}
			assert.GreaterOrEqual(t, caught, 0, "no walk of %d caught a debounce past its longest wait", walks)
		})
	}
}
