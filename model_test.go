package workqueue

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-workqueue/workqueue/internal/delayheap"
)

// This file checks the rate-limiting queue against a small reference model
// that is obviously correct: a FIFO slice, a dirty set, a processing set, a
// map of waiting items with their ready times, and failure counts. Seeded
// random walks and the fuzz target drive both with the same operations and
// compare everything observable after every step.

type opKind uint8

const (
	opAdd opKind = iota
	opGet
	opDone
	opAddAfter
	opAddRateLimited
	opForget
	opNumRequeues
	opLen
	opStep
	opShutDown
	opShutDownWithDrain
	opRemove
	// opGetContext: with a negative duration, the context has ended before
	// the call; otherwise it ends while the call waits, if it waits.
	opGetContext
	// opSnapshot lists as many items of each kind as the item number says.
	opSnapshot
	opKinds
)

var opNames = [...]string{"Add", "Get", "Done", "AddAfter", "AddRateLimited", "Forget", "NumRequeues", "Len", "Step", "ShutDown", "ShutDownWithDrain", "Remove", "GetContext", "Snapshot"}

type modelOp struct {
	kind opKind
	item int
	dur  time.Duration
}

func (o modelOp) String() string {
	return fmt.Sprintf("%s(k%d, %v)", opNames[o.kind], o.item, o.dur)
}

const (
	modelItems     = 12
	modelBase      = time.Millisecond
	modelMax       = 10 * time.Second
	modelFast      = 2 * time.Millisecond
	modelSlow      = time.Second
	modelFastTries = 3
)

// delays are the durations walks use: negative, zero, tiny, and up to an
// hour, many of them equal so that ready times tie.
var delays = []time.Duration{-time.Second, 0, 1, time.Millisecond, 5 * time.Millisecond, 100 * time.Millisecond,
	time.Second, time.Second, 10 * time.Second, time.Minute, time.Hour}

// queueModel is the reference: what the queue should do, written for
// clarity, not speed.
type queueModel struct {
	now          time.Duration
	fifo         []int
	dirty        map[int]bool // queued, or added again while processing
	processing   map[int]bool
	waiting      map[int]modelWait
	nextSeq      uint64
	failures     map[int]int
	shuttingDown bool
	draining     bool
}

type modelWait struct {
	readyAt time.Duration
	seq     uint64
}

func newQueueModel() *queueModel {
	return &queueModel{dirty: map[int]bool{}, processing: map[int]bool{}, waiting: map[int]modelWait{}, failures: map[int]int{}}
}

func (m *queueModel) add(item int) {
	if m.shuttingDown || m.dirty[item] {
		return
	}
	m.dirty[item] = true
	if !m.processing[item] {
		m.fifo = append(m.fifo, item)
	}
}

func (m *queueModel) get() int {
	item := m.fifo[0]
	m.fifo = m.fifo[1:]
	m.processing[item] = true
	delete(m.dirty, item)
	return item
}

func (m *queueModel) done(item int) {
	if !m.processing[item] {
		return
	}
	delete(m.processing, item)
	if m.dirty[item] {
		m.fifo = append(m.fifo, item)
	}
}

func (m *queueModel) addAfter(item int, d time.Duration) {
	if m.shuttingDown {
		return
	}
	if d <= 0 {
		m.add(item)
		return
	}
	readyAt := m.now + d
	if w, ok := m.waiting[item]; ok && readyAt >= w.readyAt {
		return
	}
	m.waiting[item] = modelWait{readyAt: readyAt, seq: m.nextSeq}
	m.nextSeq++
}

// when is the max of an exponential backoff and a fast-slow limiter.
func (m *queueModel) when(item int) time.Duration {
	n := m.failures[item]
	m.failures[item] = n + 1
	exp := modelBase
	for i := 0; i < n && exp < modelMax; i++ {
		exp *= 2
	}
	exp = min(exp, modelMax)
	fastSlow := modelSlow
	if n < modelFastTries {
		fastSlow = modelFast
	}
	return max(exp, fastSlow)
}

// step moves time on and adds the items whose delay ended, in order of
// ready time and then of their add.
func (m *queueModel) step(d time.Duration) {
	m.now += d
	var ready []int
	for item, w := range m.waiting {
		if w.readyAt <= m.now {
			ready = append(ready, item)
		}
	}
	slices.SortFunc(ready, func(a, b int) int {
		wa, wb := m.waiting[a], m.waiting[b]
		if c := cmp.Compare(wa.readyAt, wb.readyAt); c != 0 {
			return c // not a difference: an hour overflows a 32-bit int
		}
		return cmp.Compare(wa.seq, wb.seq)
	})
	for _, item := range ready {
		delete(m.waiting, item)
		m.add(item)
	}
}

// remove takes item out of the queue and the waiting items, and forgets
// its failures; a processing item stays processing, but is not queued again.
func (m *queueModel) remove(item int) bool {
	_, removed := m.waiting[item]
	delete(m.waiting, item)
	delete(m.failures, item)
	if m.dirty[item] {
		delete(m.dirty, item)
		removed = true
		if i := slices.Index(m.fifo, item); i >= 0 {
			m.fifo = slices.Delete(m.fifo, i, i+1)
		}
	}
	return removed
}

func (m *queueModel) shutDown() {
	m.shuttingDown = true
	clear(m.waiting)
}

func (m *queueModel) idle() bool { return len(m.fifo) == 0 && len(m.processing) == 0 }

// recordingLimiter remembers the last delay its limiter returned.
type recordingLimiter struct {
	TypedRateLimiter[string]
	last time.Duration
}

func (r *recordingLimiter) When(item string) time.Duration {
	r.last = r.TypedRateLimiter.When(item)
	return r.last
}

var modelKeys = func() []string {
	keys := make([]string, modelItems)
	for i := range keys {
		keys[i] = fmt.Sprintf("k%d", i)
	}
	return keys
}()

// runModelWalk applies ops to a new rate-limiting queue and to the model,
// comparing after every step. It must run in a synctest bubble, whose clock
// the Step operation moves. It returns how many operations it applied
// (those that cannot apply, such as a Get from an empty queue, are passed
// over) and a description of the first divergence, or "".
func runModelWalk(ops []modelOp) (executed int, divergence string) {
	limiter := &recordingLimiter{TypedRateLimiter: NewTypedMaxOfRateLimiter(
		NewTypedItemExponentialFailureRateLimiter[string](modelBase, modelMax),
		NewTypedItemFastSlowRateLimiter[string](modelFast, modelSlow, modelFastTries),
	)}
	q := NewTypedRateLimitingQueue[string](limiter).(TypedRateLimitingQueue[string])
	delaying := q.(*rateLimitingQueue[string]).TypedDelayingInterface.(*delayingQueue[string])
	typed := delaying.queue.(*Typed[string])
	m := newQueueModel()
	var drained atomic.Bool
	defer func() {
		q.ShutDown() // releases a drain still waiting
		synctest.Wait()
	}()

	diverged := func(i int, op modelOp, format string, args ...any) (int, string) {
		return executed + 1, fmt.Sprintf("step %d %v: %s", i, op, fmt.Sprintf(format, args...))
	}
	for i, op := range ops {
		key := modelKeys[op.item]
		if m.draining && op.kind != opGet && op.kind != opGetContext && op.kind != opDone && op.kind != opLen && op.kind != opSnapshot {
			continue // while a drain waits, only workers act
		}
		switch op.kind {
		case opAdd:
			q.Add(key)
			m.add(op.item)
		case opGet:
			if len(m.fifo) == 0 {
				continue // Get would block; the model knows it
			}
			if got := q.Len(); got != len(m.fifo) {
				return diverged(i, op, "Len before Get = %d, model %d", got, len(m.fifo))
			}
			got, shutdown := q.Get()
			want := m.get()
			if shutdown || got != modelKeys[want] {
				return diverged(i, op, "Get = %q, %v; model k%d", got, shutdown, want)
			}
		case opGetContext:
			if div := modelGetContext(q, m, op); div != "" {
				return diverged(i, op, "%s", div)
			}
		case opSnapshot:
			if div := modelSnapshot(q.(snapshotter[string]), m, op.item); div != "" {
				return diverged(i, op, "%s", div)
			}
		case opRemove:
			if got, want := q.Remove(key), m.remove(op.item); got != want {
				return diverged(i, op, "Remove = %v, model %v", got, want)
			}
		case opDone:
			q.Done(key)
			m.done(op.item)
		case opAddAfter:
			q.AddAfter(key, op.dur)
			m.addAfter(op.item, op.dur)
		case opAddRateLimited:
			limiter.last = -1
			q.AddRateLimited(key)
			if !m.shuttingDown {
				want := m.when(op.item)
				if limiter.last != want {
					return diverged(i, op, "limiter delay = %v, model %v", limiter.last, want)
				}
				m.addAfter(op.item, want)
			} else if limiter.last != -1 {
				return diverged(i, op, "limiter consulted after shutdown")
			}
		case opForget:
			q.Forget(key)
			delete(m.failures, op.item)
		case opNumRequeues:
			if got, want := q.NumRequeues(key), m.failures[op.item]; got != want {
				return diverged(i, op, "NumRequeues = %d, model %d", got, want)
			}
		case opLen:
		case opStep:
			d := max(op.dur, 0) // time does not go back
			time.Sleep(d)
			m.step(d)
		case opShutDown:
			q.ShutDown()
			m.shutDown()
			m.draining = false
		case opShutDownWithDrain:
			if m.shuttingDown {
				continue
			}
			go func() {
				q.ShutDownWithDrain()
				drained.Store(true)
			}()
			m.shutDown()
			m.draining = true
		}
		executed++
		synctest.Wait()
		if err := verifyQueue(typed); err != nil {
			return diverged(i, op, "queue invariant: %v", err)
		}
		delaying.mu.Lock()
		err := delayheap.Verify(delaying.delays.heap)
		delaying.mu.Unlock()
		if err != nil {
			return diverged(i, op, "heap invariant: %v", err)
		}
		if got := q.Len(); got != len(m.fifo) {
			return diverged(i, op, "Len = %d, model %d (fifo %v)", got, len(m.fifo), m.fifo)
		}
		if got := q.ShuttingDown(); got != m.shuttingDown {
			return diverged(i, op, "ShuttingDown = %v, model %v", got, m.shuttingDown)
		}
		if got, want := q.NumRequeues(key), m.failures[op.item]; got != want {
			return diverged(i, op, "NumRequeues = %d, model %d", got, want)
		}
		if m.draining {
			if drained.Load() != m.idle() {
				return diverged(i, op, "drain returned = %v, model idle = %v", drained.Load(), m.idle())
			}
			m.draining = !m.idle()
		}
	}
	return executed, ""
}

// modelGetContext calls GetContext as op says, compares the outcome with
// the model's and returns a description of the difference, or "". An item
// it gets is processing, as after a Get.
func modelGetContext(q TypedRateLimitingQueue[string], m *queueModel, op modelOp) string {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if op.dur < 0 {
		cancel()
		if got, err := q.GetContext(ctx); err != context.Canceled {
			return fmt.Sprintf("GetContext with an ended context = %q, %v; want context.Canceled", got, err)
		}
		return ""
	}
	out := goGetContext(q, ctx)
	synctest.Wait() // returned, or asleep waiting
	cancel()
	got := <-out
	switch {
	case len(m.fifo) > 0:
		if want := m.get(); got.err != nil || got.item != modelKeys[want] {
			return fmt.Sprintf("GetContext = %q, %v; model k%d", got.item, got.err, want)
		}
	case m.shuttingDown:
		if got.err != ErrShutDown {
			return fmt.Sprintf("GetContext on a shut down, empty queue = %q, %v; want ErrShutDown", got.item, got.err)
		}
	case got.err != context.Canceled:
		return fmt.Sprintf("GetContext on an empty queue = %q, %v; want context.Canceled", got.item, got.err)
	}
	return ""
}

// modelSnapshot takes a snapshot listing n items of each kind and compares
// it with the model.
func modelSnapshot(q snapshotter[string], m *queueModel, n int) string {
	s := q.Snapshot(n)
	if s.Depth != len(m.fifo) || s.Processing != len(m.processing) || s.Waiting != len(m.waiting) {
		return fmt.Sprintf("Snapshot counts %d queued, %d processing, %d waiting; model %d, %d, %d",
			s.Depth, s.Processing, s.Waiting, len(m.fifo), len(m.processing), len(m.waiting))
	}
	var queued []string
	for _, item := range m.fifo[:min(n, len(m.fifo))] {
		queued = append(queued, modelKeys[item])
	}
	if !slices.Equal(s.Queued, queued) {
		return fmt.Sprintf("Snapshot lists queued %v; model %v", s.Queued, queued)
	}
	waiting := slices.Collect(maps.Keys(m.waiting))
	slices.SortFunc(waiting, func(a, b int) int {
		wa, wb := m.waiting[a], m.waiting[b]
		if c := cmp.Compare(wa.readyAt, wb.readyAt); c != 0 {
			return c
		}
		return cmp.Compare(wa.seq, wb.seq)
	})
	var delayed []string
	for _, item := range waiting[:min(n, len(waiting))] {
		delayed = append(delayed, modelKeys[item])
	}
	var gotDelayed []string
	for _, d := range s.Delayed {
		gotDelayed = append(gotDelayed, d.Item)
	}
	if !slices.Equal(gotDelayed, delayed) {
		return fmt.Sprintf("Snapshot lists delayed %v; model %v", gotDelayed, delayed)
	}
	if len(s.InFlight) > min(n, len(m.processing)) {
		return fmt.Sprintf("Snapshot lists %d in flight, for n %d and %d processing", len(s.InFlight), n, len(m.processing))
	}
	for _, f := range s.InFlight {
		item := slices.Index(modelKeys, f.Item)
		if !m.processing[item] || f.Requeue != m.dirty[item] {
			return fmt.Sprintf("Snapshot lists %q in flight, requeue %v; model processing %v, dirty %v", f.Item, f.Requeue, m.processing[item], m.dirty[item])
		}
	}
	for item, failures := range s.Failures {
		if want := m.failures[slices.Index(modelKeys, item)]; failures != want {
			return fmt.Sprintf("Snapshot counts %d failures of %q; model %d", failures, item, want)
		}
	}
	return ""
}

// randomOps returns a walk of n operations; shutdowns are rare, so most of
// a walk exercises a live queue.
func randomOps(rng *rand.Rand, n int) []modelOp {
	ops := make([]modelOp, n)
	for i := range ops {
		var kind opKind
		switch r := rng.IntN(1000); {
		case r < 230:
			kind = opAdd
		case r < 400:
			kind = opGet
		case r < 560:
			kind = opDone
		case r < 660:
			kind = opAddAfter
		case r < 760:
			kind = opAddRateLimited
		case r < 800:
			kind = opForget
		case r < 830:
			kind = opNumRequeues
		case r < 845:
			kind = opLen
		case r < 890:
			kind = opRemove
		case r < 920:
			kind = opGetContext
		case r < 930:
			kind = opSnapshot
		case r < 998:
			kind = opStep
		case r < 999:
			kind = opShutDown
		default:
			kind = opShutDownWithDrain
		}
		ops[i] = modelOp{kind: kind, item: rng.IntN(modelItems), dur: delays[rng.IntN(len(delays))]}
	}
	return ops
}

// decodeOps turns fuzz input into operations, three bytes each.
func decodeOps(data []byte) []modelOp {
	ops := make([]modelOp, 0, len(data)/3)
	for len(data) >= 3 {
		ops = append(ops, modelOp{
			kind: opKind(data[0] % byte(opKinds)),
			item: int(data[1]) % modelItems,
			dur:  delays[int(data[2])%len(delays)],
		})
		data = data[3:]
	}
	return ops
}

var (
	modelOps  = flag.Int64("modelops", 10_000_000, "operations TestModelRandomWalks checks")
	modelSeed = flag.Uint64("modelseed", 0, "first seed of TestModelRandomWalks; change it to soak with new walks")
)

func TestModelRandomWalks(t *testing.T) {
	const walkLength = 2000
	target := *modelOps
	if testing.Short() {
		target /= 100
	}
	// Walks of two interleaved series run in parallel, one per core, until
	// the operations applied reach the target.
	var total, walks, divergences atomic.Int64
	var firstDivergence atomic.Value
	t.Run("group", func(t *testing.T) {
		for half := range 2 {
			t.Run(fmt.Sprint(half), func(t *testing.T) {
				t.Parallel()
				for walk := half; total.Load() < target; walk += 2 {
					rng := rand.New(rand.NewPCG(*modelSeed+uint64(walk), 0x5eed))
					ops := randomOps(rng, walkLength)
					synctest.Test(t, func(t *testing.T) {
						n, divergence := runModelWalk(ops)
						total.Add(int64(n))
						walks.Add(1)
						if divergence != "" {
							divergences.Add(1)
							firstDivergence.CompareAndSwap(nil, fmt.Sprintf("walk %d: %s", walk, divergence))
						}
					})
				}
			})
		}
	})
	summary := fmt.Sprintf("model check: %d operations in %d walks, %d divergences", total.Load(), walks.Load(), divergences.Load())
	t.Log(summary)
	if d := firstDivergence.Load(); d != nil {
		t.Fatalf("the queue diverged from the model: %v", d)
	}
}

func FuzzModel(f *testing.F) {
	f.Add([]byte{0, 1, 0, 1, 0, 0, 2, 1, 0})
	f.Add([]byte{3, 2, 6, 3, 2, 5, 8, 0, 6, 1, 0, 0, 2, 2, 0})
	f.Add([]byte{4, 3, 0, 4, 3, 0, 8, 0, 9, 1, 0, 0, 6, 3, 0})
	f.Add([]byte{0, 1, 0, 0, 2, 0, 1, 0, 0, 10, 0, 0, 2, 1, 0, 1, 0, 0, 2, 2, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		ops := decodeOps(data)
		synctest.Test(t, func(t *testing.T) {
			if _, divergence := runModelWalk(ops); divergence != "" {
				t.Fatal(divergence)
			}
		})
	})
}
