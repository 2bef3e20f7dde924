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
)

// This file checks the rate-limiting queue against a small reference model
// that is obviously correct: a FIFO slice, a dirty set, a processing set, a
// map of waiting items with their ready times, failure counts, and the
// parking specification that every model shares (parkSpec, in
// parking_test.go). Seeded
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
	// opPark parks the item, if it is processing, until the events that
	// modelEvents gives for the duration; opWake wakes event item%2.
	opPark
	opWake
	opWakeItem
	// opReschedule is Reschedule with the duration.
	opReschedule
	opKinds
)

var opNames = [...]string{"Add", "Get", "Done", "AddAfter", "AddRateLimited", "Forget", "NumRequeues", "Len", "Step", "ShutDown", "ShutDownWithDrain", "Remove", "GetContext", "Snapshot",
	"Park", "Wake", "WakeItem", "Reschedule"}

// modelEvents returns the events, a bit each, that a park with duration d
// waits for: one of them or both.
func modelEvents(d time.Duration) uint8 { return uint8(1 + slices.Index(delays, d)%3) }

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
	modelMaxPark   = DefaultMaxParkTime
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
	// addCancelsDelay is the delaying layer's AddCancelsDelay: an add
	// takes the item out of waiting.
	addCancelsDelay bool
	// debounce is the delaying layer's Debounce, MaxDelay set, and bursts
	// the deadline of each waiting item whose wait is a debounce.
	debounce Debounce
	bursts   map[int]time.Duration

	// parking holds the parks, and coreWaiting the woken items waiting for
	// their park's backoff, which the core queue holds, apart from the
	// delaying layer's waiting items.
	parking     parkingModel
	coreWaiting map[int]modelWait
	// fifoChoices are the orders the queue may have queued items in
	// during the last step: two goroutines (the delaying layer's and the
	// core's) hand items on at the same instant, interleaved.
	fifoChoices [][]int
}

type modelWait struct {
	readyAt time.Duration
	seq     uint64
}

func newQueueModel() *queueModel {
	return &queueModel{dirty: map[int]bool{}, processing: map[int]bool{}, waiting: map[int]modelWait{}, failures: map[int]int{},
		parking: newParkingModel(modelMaxPark), coreWaiting: map[int]modelWait{}, bursts: map[int]time.Duration{}}
}

// addNow is an Add through the delaying layer, which with AddCancelsDelay
// takes the item out of the waiting items first.
func (m *queueModel) addNow(item int) {
	if m.debounce.Quiet > 0 {
		m.addDebounced(item)
		return
	}
	if m.addCancelsDelay && !m.shuttingDown {
		delete(m.waiting, item)
	}
	m.add(item)
}

// addDebounced is an add under Debounce: nothing for an item queued or to
// be queued at Done; otherwise ready Quiet from now, but no later than
// the burst's deadline, set when it begins.
func (m *queueModel) addDebounced(item int) {
	if m.shuttingDown || m.dirty[item] {
		return
	}
	deadline, inBurst := m.bursts[item]
	if !inBurst {
		deadline = m.now + m.debounce.MaxDelay
		if w, ok := m.waiting[item]; ok {
			deadline = min(deadline, w.readyAt)
		}
		m.bursts[item] = deadline
	}
	m.wait(item, min(m.now+m.debounce.Quiet, deadline))
}

// wait sets item's ready time in the delaying layer.
func (m *queueModel) wait(item int, readyAt time.Duration) {
	m.waiting[item] = modelWait{readyAt: readyAt, seq: m.nextSeq}
	m.nextSeq++
}

// reschedule is Reschedule: the latest ready time wins, and ends a burst.
func (m *queueModel) reschedule(item int, d time.Duration) {
	if m.shuttingDown {
		return
	}
	delete(m.bursts, item)
	if d <= 0 {
		delete(m.waiting, item)
		m.add(item)
		return
	}
	m.wait(item, m.now+d)
}

func (m *queueModel) add(item int) {
	if m.shuttingDown {
		return
	}
	m.parking.drop(item) // an add ends a park, and the backoff of a woken one
	delete(m.coreWaiting, item)
	if m.dirty[item] {
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
	m.parking.handOut(item)
	return item
}

func (m *queueModel) done(item int) {
	if !m.processing[item] {
		return
	}
	m.parking.done(m.now, item)
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
		m.addNow(item)
		return
	}
	m.addRetry(item, d)
}

// addRetry is AddAfter of a positive delay, or AddRateLimited: the earliest
// ready time wins, and bounds a burst.
func (m *queueModel) addRetry(item int, d time.Duration) {
	if m.shuttingDown {
		return
	}
	if d <= 0 {
		if m.debounce.Quiet > 0 || m.addCancelsDelay {
			delete(m.waiting, item)
			delete(m.bursts, item)
		}
		m.add(item)
		return
	}
	readyAt := m.now + d
	if deadline, ok := m.bursts[item]; ok && readyAt < deadline {
		m.bursts[item] = readyAt
	}
	if w, ok := m.waiting[item]; ok && readyAt >= w.readyAt {
		return
	}
	m.wait(item, readyAt)
}

// when is the max of an exponential backoff and a fast-slow limiter, over
// item's failures.
func (m *queueModel) when(item int) time.Duration { return modelBackoff(m.failures, item) }

// modelBackoff is the limiter of newModelLimiter: it returns the delay for
// item after counts[item] failures, and counts one more. The walks give the
// queue one such limiter for failures, and one of its own as ParkBackoff.
func modelBackoff(counts map[int]int, item int) time.Duration {
	n := counts[item]
	counts[item] = n + 1
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

// step moves time on, instant by instant: at each, the delaying layer's
// goroutine adds the items whose delay ended, in order of ready time and
// then of their add, and the core's goroutine queues the woken items whose
// backoff ended, then ends the parks that lasted modelMaxPark. When both act
// at one instant, the core's goroutine may queue its items between any two
// of the delaying layer's, which it adds to the core one at a time:
// fifoChoices lists every order the queue may show.
func (m *queueModel) step(d time.Duration) {
	end := m.now + d
	m.fifoChoices = [][]int{slices.Clone(m.fifo)}
	for {
		next, ok := m.nextInstant()
		if !ok || next > end {
			break
		}
		m.now = next
		outer := m.readyAt(m.waiting, next)
		for _, item := range outer {
			delete(m.waiting, item)
			delete(m.bursts, item)
		}
		inner := m.readyAt(m.coreWaiting, next)
		for _, item := range inner {
			delete(m.coreWaiting, item)
		}
		for _, p := range m.parking.expire(next) {
			if p.until > next {
				m.release(p)
				continue
			}
			inner = append(inner, p.item)
		}
		var choices [][]int
		for _, fifo := range m.fifoChoices {
			for _, added := range interleavings(outer, inner) {
				if choice := m.appended(fifo, added); !slices.ContainsFunc(choices, func(c []int) bool { return slices.Equal(c, choice) }) {
					choices = append(choices, choice)
				}
			}
		}
		m.fifoChoices = choices
		for _, item := range slices.Concat(outer, inner) {
			m.add(item)
		}
	}
	m.now = end
}

// interleavings returns every sequence that merges a and b, each kept in
// its order.
func interleavings(a, b []int) [][]int {
	if len(a) == 0 || len(b) == 0 {
		return [][]int{slices.Concat(a, b)}
	}
	var merged [][]int
	for _, rest := range interleavings(a[1:], b) {
		merged = append(merged, slices.Concat(a[:1], rest))
	}
	for _, rest := range interleavings(a, b[1:]) {
		merged = append(merged, slices.Concat(b[:1], rest))
	}
	return merged
}

// nextInstant returns the next instant at which a goroutine acts.
func (m *queueModel) nextInstant() (time.Duration, bool) {
	next, ok := time.Duration(0), false
	at := func(t time.Duration) {
		if !ok || t < next {
			next, ok = t, true
		}
	}
	for _, w := range m.waiting {
		at(w.readyAt)
	}
	for _, w := range m.coreWaiting {
		at(w.readyAt)
	}
	if t, ok := m.parking.nextExpiry(); ok {
		at(t)
	}
	return next, ok
}

// readyAt returns the items of waiting ready at t, in order of their add.
func (m *queueModel) readyAt(waiting map[int]modelWait, t time.Duration) []int {
	var ready []int
	for item, w := range waiting {
		if w.readyAt == t {
			ready = append(ready, item)
		}
	}
	slices.SortFunc(ready, func(a, b int) int { return cmp.Compare(waiting[a].seq, waiting[b].seq) })
	return ready
}

// appended returns fifo with the items that adds of added, in that order,
// would queue: those neither queued nor processing, each once.
func (m *queueModel) appended(fifo, added []int) []int {
	fifo = slices.Clone(fifo)
	for _, item := range added {
		if !m.dirty[item] && !m.processing[item] && !slices.Contains(fifo, item) {
			fifo = append(fifo, item)
		}
	}
	return fifo
}

// heldItem returns an item being processed, chosen by n, and its key, as
// a worker's Park or Done names one; n itself if none is.
func (m *queueModel) heldItem(n int) (int, string) {
	if processing := slices.Sorted(maps.Keys(m.processing)); len(processing) > 0 {
		n = processing[n%len(processing)]
	}
	return n, modelKeys[n]
}

// park applies Park(item, events): nothing for an item not processing, or
// added again or woken since its Get. It reports whether the park took
// effect, and then the park backoff it took.
func (m *queueModel) park(item int, events uint8) (backoff time.Duration, parked bool) {
	_, woken := m.coreWaiting[item]
	if m.shuttingDown || !m.processing[item] || m.dirty[item] || woken {
		return 0, false
	}
	return m.parking.park(m.now, item, events, m.release), true
}

// release makes the items of ended parks ready: queued, or waiting in the
// core until their backoff has passed.
func (m *queueModel) release(ended ...endedPark) {
	for _, p := range ended {
		if p.until > m.now {
			m.coreWaiting[p.item] = modelWait{readyAt: p.until, seq: m.nextSeq}
			m.nextSeq++
			continue
		}
		m.add(p.item)
	}
}

// remove takes item out of the queue and the waiting items, and forgets
// its failures; a processing item stays processing, but is not queued again.
func (m *queueModel) remove(item int) bool {
	_, removed := m.waiting[item]
	_, woken := m.coreWaiting[item]
	removed = m.parking.drop(item) || removed || woken
	delete(m.waiting, item)
	delete(m.bursts, item)
	delete(m.coreWaiting, item)
	delete(m.failures, item)
	m.parking.forget(item)
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
	clear(m.bursts)
	clear(m.coreWaiting)
	m.parking.shutDown()
}

func (m *queueModel) idle() bool { return len(m.fifo) == 0 && len(m.processing) == 0 }

// recordingLimiter remembers the last delay its limiter returned.
type recordingLimiter struct {
	TypedRateLimiter[string]
	last time.Duration
}

// newModelLimiter returns the limiter that modelBackoff follows.
func newModelLimiter() *recordingLimiter {
	return &recordingLimiter{TypedRateLimiter: NewTypedMaxOfRateLimiter(
		NewTypedItemExponentialFailureRateLimiter[string](modelBase, modelMax),
		NewTypedItemFastSlowRateLimiter[string](modelFast, modelSlow, modelFastTries),
	)}
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
func runModelWalk(ops []modelOp, addCancelsDelay bool, debounce Debounce) (executed int, divergence string) {
	return runModelWalkOn(ops, addCancelsDelay, debounce, debounce)
}

// runModelWalkOn is runModelWalk of a queue whose Debounce may differ from
// the model's, to show that the walks catch a queue that debounces wrong.
func runModelWalkOn(ops []modelOp, addCancelsDelay bool, debounce, queueDebounce Debounce) (executed int, divergence string) {
	limiter := newModelLimiter()
	parkLimiter := newModelLimiter()
	// Half the walks trace, adding with links, so that the core's links
	// are checked after every step; the queue's behaviour is the same.
	traced := len(ops) > 0 && ops[0].item%2 == 0
	var provider MetricsProvider
	if traced {
		provider = tracingProvider{&recordingProvider{}, &linkTracer{}}
	}
	config := TypedRateLimitingQueueConfig[string]{
		DelayingQueue: NewTypedDelayingQueueWithConfig(TypedDelayingQueueConfig[string]{Logger: discardLogger, AddCancelsDelay: addCancelsDelay,
			Debounce: queueDebounce, MetricsProvider: provider}),
		ParkBackoff: parkLimiter,
	}
	q := NewTypedRateLimitingQueueWithConfig[string](limiter, config)
	delaying := q.delaying.(*TypedDelayingQueue[string])
	typed := delaying.queue.(*Typed[string])
	m := newQueueModel()
	m.addCancelsDelay = addCancelsDelay
	m.debounce = debounce.checked("runModelWalk")
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
			if traced {
				q.AddContext(withLink(context.Background(), byte(i)), key)
			} else {
				q.Add(key)
			}
			m.addNow(op.item)
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
			if div := modelSnapshot(q, m, op.item); div != "" {
				return diverged(i, op, "%s", div)
			}
		case opRemove:
			if got, want := q.Remove(key), m.remove(op.item); got != want {
				return diverged(i, op, "Remove = %v, model %v", got, want)
			}
		case opDone:
			if op.dur >= 0 { // mostly an item being processed, as workers do
				op.item, key = m.heldItem(op.item)
			}
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
				m.addRetry(op.item, want)
			} else if limiter.last != -1 {
				return diverged(i, op, "limiter consulted after shutdown")
			}
		case opReschedule:
			q.Reschedule(key, op.dur)
			m.reschedule(op.item, op.dur)
		case opForget:
			q.Forget(key)
			delete(m.failures, op.item)
			m.parking.forget(op.item)
		case opNumRequeues:
			if got, want := q.NumRequeues(key), m.failures[op.item]; got != want {
				return diverged(i, op, "NumRequeues = %d, model %d", got, want)
			}
		case opPark:
			op.item, key = m.heldItem(op.item)
			if div := modelParkOp(q, limiter, parkLimiter, m, op.item, modelEvents(op.dur)); div != "" {
				return diverged(i, op, "%s", div)
			}
		case opWake:
			if got, want := q.Wake(linEventNames[op.item%2]), m.parking.wake(1<<(op.item%2), m.release); got != want {
				return diverged(i, op, "Wake = %d, model %d", got, want)
			}
		case opWakeItem:
			if got, want := q.WakeItem(key), m.parking.wakeItem(m.now, op.item, m.release); got != want {
				return diverged(i, op, "WakeItem = %v, model %v", got, want)
			}
		case opLen:
		case opStep:
			d := max(op.dur, 0) // time does not go back
			time.Sleep(d)
			m.step(d)
			synctest.Wait()
			queued := q.Snapshot(modelItems).Queued
			choice := slices.IndexFunc(m.fifoChoices, func(fifo []int) bool { return slices.Equal(modelNames(fifo), queued) })
			if choice < 0 {
				return diverged(i, op, "queued %v, model one of %v", queued, m.fifoChoices)
			}
			m.fifo = m.fifoChoices[choice]
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
		typed.core.mu.Lock() // the delaying layer's delays are the core's, which verifyQueue checked
		var err error
		if typed.core.delays != nil {
			err = verifyBursts(typed.core.delays)
		}
		typed.core.mu.Unlock()
		if err != nil {
			return diverged(i, op, "heap invariant: %v", err)
		}
		if got := q.Len(); got != len(m.fifo) {
			return diverged(i, op, "Len = %d, model %d (fifo %v)", got, len(m.fifo), m.fifo)
		}
		if got, want := q.Snapshot(0).Parked, m.parking.parked(); got != want {
			return diverged(i, op, "parked %d, model %d", got, want)
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

// modelNames returns the keys of items.
func modelNames(items []int) []string {
	names := make([]string, 0, len(items))
	for _, item := range items {
		names = append(names, modelKeys[item])
	}
	return names
}

// modelGetContext calls GetContext as op says, compares the outcome with
// the model's and returns a description of the difference, or "". An item
// it gets is processing, as after a Get.
func modelGetContext(q rateLimitingQueue[string], m *queueModel, op modelOp) string {
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
	waitingCount := len(m.waiting) + len(m.coreWaiting)
	if s.Depth != len(m.fifo) || s.Processing != len(m.processing) || s.Waiting != waitingCount {
		return fmt.Sprintf("Snapshot counts %d queued, %d processing, %d waiting; model %d, %d, %d",
			s.Depth, s.Processing, s.Waiting, len(m.fifo), len(m.processing), waitingCount)
	}
	if queued := modelNames(m.fifo[:min(n, len(m.fifo))]); !slices.Equal(s.Queued, queued) {
		return fmt.Sprintf("Snapshot lists queued %v; model %v", s.Queued, queued)
	}
	// The delayed adds and the core's waiting items wait in one heap:
	// those ready at one time are listed in the order they last moved in.
	type waiter struct {
		item int
		modelWait
	}
	var waiting []waiter
	for item, w := range m.coreWaiting {
		waiting = append(waiting, waiter{item, w})
	}
	for item, w := range m.waiting {
		waiting = append(waiting, waiter{item, w})
	}
	slices.SortFunc(waiting, func(a, b waiter) int {
		return cmp.Or(cmp.Compare(a.readyAt, b.readyAt), cmp.Compare(a.seq, b.seq))
	})
	var delayed []string
	for _, w := range waiting[:min(n, len(waiting))] {
		delayed = append(delayed, fmt.Sprintf("%s@%v", modelKeys[w.item], w.readyAt))
	}
	start := s.Taken.Add(-m.now) // the model's times count from it
	var gotDelayed []string
	for _, d := range s.Delayed {
		gotDelayed = append(gotDelayed, fmt.Sprintf("%s@%v", d.Item, d.ReadyAt.Sub(start)))
	}
	if !slices.Equal(gotDelayed, delayed) {
		return fmt.Sprintf("Snapshot lists delayed %v; model %v", gotDelayed, delayed)
	}
	parked := m.parking.settledOrder()
	var gotParked []string
	for _, p := range s.ParkedItems {
		gotParked = append(gotParked, p.Item)
		if want := linEvents(m.parking.events[slices.Index(modelKeys, p.Item)]); !slices.Equal(p.Events, want) {
			return fmt.Sprintf("Snapshot lists %q parked until %v; model %v", p.Item, p.Events, want)
		}
	}
	if wantParked := modelNames(parked[:min(n, len(parked))]); s.Parked != len(parked) || !slices.Equal(gotParked, wantParked) {
		return fmt.Sprintf("Snapshot lists %d parked %v; model %d %v", s.Parked, gotParked, len(parked), wantParked)
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
		case r < 210:
			kind = opAdd
		case r < 380:
			kind = opGet
		case r < 530:
			kind = opDone
		case r < 590:
			kind = opAddAfter
		case r < 610:
			kind = opReschedule
		case r < 690:
			kind = opAddRateLimited
		case r < 720:
			kind = opForget
		case r < 740:
			kind = opNumRequeues
		case r < 750:
			kind = opLen
		case r < 780:
			kind = opRemove
		case r < 800:
			kind = opGetContext
		case r < 815:
			kind = opSnapshot
		case r < 885:
			kind = opPark
		case r < 915:
			kind = opWake
		case r < 930:
			kind = opWakeItem
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

// modelDebounces are the Debounce settings the walks take turns with: none,
// and quiet periods equal to one of the walks' delays, so that ready times
// tie, with longest waits that the walks' short steps reach.
var modelDebounces = []Debounce{{}, {Quiet: 100 * time.Millisecond, MaxDelay: 105 * time.Millisecond}, {Quiet: time.Second}}

var (
	modelOps  = flag.Int64("modelops", 0, "operations TestModelRandomWalks checks; 0 means 3,000,000 with WORKQUEUE_SOAK=1, 300,000 by default, and 100,000 with -short")
	modelSeed = flag.Uint64("modelseed", 0, "first seed of TestModelRandomWalks; change it to soak with new walks")
)

func TestModelRandomWalks(t *testing.T) {
	const walkLength = 2000
	target := *modelOps
	if target == 0 {
		target = sized[int64](3_000_000, 300_000, 100_000)
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
						n, divergence := runModelWalk(ops, walk%4 >= 2, modelDebounces[walk%3])
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
			if _, divergence := runModelWalk(ops, len(data)%2 == 1, modelDebounces[len(data)%3]); divergence != "" {
				t.Fatal(divergence)
			}
		})
	})
}
