package workqueue

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// This file checks the priority queue against a reference model written
// another way: the model keeps a plain map of items with numbers (the
// order each was queued in, the turn of each fairness key) and finds the
// next item by scanning them all, where the queue keeps linked lists and
// rotations. Seeded random walks and a fuzz target drive both with the
// same operations and compare what they return after every step, with the
// queue's invariant checked each time.

type pqOpKind uint8

const (
	pqOpAdd pqOpKind = iota
	pqOpAddAfter
	pqOpAddRateLimited
	pqOpGet
	pqOpDone
	pqOpStep
	pqOpRemove
	pqOpForget
	pqOpSnapshot
	// pqOpPark parks the item, if it is processing, until the events that
	// pqModelEvents gives for its priority field; pqOpWake wakes event
	// item%2.
	pqOpPark
	pqOpWake
	pqOpWakeItem
	// pqOpReschedule is AddWithOpts with Reschedule, the duration and the
	// priority.
	pqOpReschedule
	pqOpShutDown
	pqOpShutDownWithDrain
	pqOpKinds
)

var pqOpNames = [...]string{"Add", "AddAfter", "AddRateLimited", "Get", "Done", "Step", "Remove", "Forget", "Snapshot", "Park", "Wake", "WakeItem", "Reschedule", "ShutDown", "ShutDownWithDrain"}

// pqModelMaxPark is the walks' MaxParkTime: short, so that walks reach it.
const pqModelMaxPark = 20 * time.Millisecond

// pqModelEvents returns the events, a bit each, that a park op waits for.
func pqModelEvents(op pqModelOp) uint8 { return uint8(1 + (op.priority+1)%3) }

type pqModelOp struct {
	kind     pqOpKind
	item     int
	priority int
	dur      time.Duration
}

func (o pqModelOp) String() string {
	return fmt.Sprintf("%s(k%d, @%d, %v)", pqOpNames[o.kind], o.item, o.priority, o.dur)
}

// pqModelConfigs are the queue configurations the walks run on.
var pqModelConfigs = []struct {
	name     string
	dims     int
	maxWait  time.Duration
	debounce Debounce
}{
	{"fifo", 0, 0, Debounce{}},
	{"fairness", 1, 0, Debounce{}},
	{"nested", 2, 0, Debounce{}},
	{"maxwait", 0, 5 * time.Millisecond, Debounce{}},
	{"nested-maxwait", 2, time.Second, Debounce{}},
	{"debounce", 1, 0, pqModelDebounce},
	{"debounce-maxwait", 0, 5 * time.Millisecond, pqModelDebounce},
	{"debounce-window", 0, 0, Debounce{Quiet: 10 * time.Millisecond}},
}

// pqModelDebounce ties with the walks' delays and has a longest wait that
// their short steps reach.
var pqModelDebounce = Debounce{Quiet: 3 * time.Millisecond, MaxDelay: 4 * time.Millisecond}

// pqModelDim is the key of item i in fairness dimension d.
func pqModelDim(d, i int) string { return fmt.Sprint(i % (3 - d)) }

type pqModelItem struct {
	processing bool
	queued     bool
	pending    pending
	priority   int
	seq        uint64 // when queued at its level: the order within its key
	readySince time.Duration
	readySeq   uint64
	waitAt     time.Duration
	waitSeq    uint64
	// burst is set while the item waits for the end of a Debounce burst,
	// which ends no later than deadline.
	burst    bool
	deadline time.Duration
}

type pqModel struct {
	now      time.Duration
	dims     int
	maxWait  time.Duration
	items    map[int]*pqModelItem
	turnAt   map[string]uint64 // the turn of each key path "priority/key/key"
	tick     uint64
	failures map[int]int
	// parking holds the parks; a parked item stays in items, with nothing
	// pending, so that it keeps its priority.
	parking      parkingModel
	shuttingDown bool
	draining     bool
	debounce     Debounce // MaxDelay set
}

func newPQModel(dims int, maxWait time.Duration) *pqModel {
	return &pqModel{dims: dims, maxWait: maxWait, items: map[int]*pqModelItem{}, turnAt: map[string]uint64{}, failures: map[int]int{},
		parking: newParkingModel(pqModelMaxPark)}
}

// when is the delay AddRateLimited takes for item, as queueModel's.
func (m *pqModel) when(item int) time.Duration { return modelBackoff(m.failures, item) }

func (m *pqModel) next() uint64 { m.tick++; return m.tick }

// path returns the key paths of item at priority, from its first
// dimension to its leaf.
func (m *pqModel) path(item, priority int) []string {
	p := fmt.Sprint(priority)
	var out []string
	for d := range m.dims {
		p += "/" + pqModelDim(d, item)
		out = append(out, p)
	}
	return out
}

// queuedUnder reports whether an item is queued under key path p.
func (m *pqModel) queuedUnder(p string) bool {
	for i, it := range m.items {
		if it.queued && slices.Contains(m.path(i, it.priority), p) {
			return true
		}
	}
	return false
}

func (m *pqModel) enqueue(item int) {
	it := m.items[item]
	for _, p := range m.path(item, it.priority) {
		if !m.queuedUnder(p) {
			m.turnAt[p] = m.next() // a key with nothing queued joins at the back
		}
	}
	it.queued, it.seq = true, m.next()
}

// makeReady queues item as ready since now.
func (m *pqModel) makeReady(item int) {
	m.enqueue(item)
	m.items[item].readySince, m.items[item].readySeq = m.now, m.next()
}

func (m *pqModel) raise(item, priority int) {
	if it := m.items[item]; priority > it.priority {
		it.priority = priority
		if it.queued {
			it.queued = false
			m.enqueue(item)
		}
	}
}

func (m *pqModel) add(item, priority int, after time.Duration) {
	how := addEarliest
	if after <= 0 && m.debounce.Quiet > 0 {
		how = addDebounced
	}
	m.addAs(item, priority, after, how)
}

// addAs is an add with a delay set as how says.
func (m *pqModel) addAs(item, priority int, after time.Duration, how addKind) {
	if m.shuttingDown {
		return
	}
	it := m.items[item]
	if m.parking.drop(item) && !it.processing { // an add ends a park: from here on, as if none
		delete(m.items, item)
		it = nil
	}
	if after > 0 || how == addDebounced {
		switch {
		case it == nil:
			it = &pqModelItem{pending: pendingDelay, priority: priority, waitAt: m.now + after, waitSeq: m.next()}
			m.items[item] = it
		case it.pending == pendingReady:
			m.raise(item, priority)
			return
		case it.pending == pendingDelay:
			it.priority = max(it.priority, priority)
			if how != addDebounced { // a debounced add sets its time below
				if how == addRescheduled || m.now+after < it.waitAt {
					it.waitAt, it.waitSeq = m.now+after, m.next()
				}
				if it.burst && m.now+after < it.deadline {
					it.deadline = m.now + after
				}
			}
		default:
			it.pending, it.priority, it.waitAt, it.waitSeq = pendingDelay, priority, m.now+after, m.next()
			it.burst = false
		}
		switch how {
		case addRescheduled:
			it.burst = false
		case addDebounced:
			if !it.burst {
				it.burst, it.deadline = true, m.now+m.debounce.MaxDelay
				if it.waitAt > m.now { // it waited for a delay already
					it.deadline = min(it.deadline, it.waitAt)
				}
			}
			it.waitAt, it.waitSeq = min(m.now+m.debounce.Quiet, it.deadline), m.next()
		}
		return
	}
	switch {
	case it == nil:
		m.items[item] = &pqModelItem{pending: pendingReady, priority: priority}
		m.makeReady(item)
	case it.pending == pendingReady:
		m.raise(item, priority)
	case it.pending == pendingDelay:
		it.pending, it.priority, it.burst = pendingReady, max(it.priority, priority), false
		if !it.processing {
			m.makeReady(item)
		}
	default:
		it.pending, it.priority = pendingReady, priority
	}
}

// pick returns the item Get hands out next; one is queued.
func (m *pqModel) pick() int {
	queued := func(yield func(int, *pqModelItem) bool) {
		for i, it := range m.items {
			if it.queued && !yield(i, it) {
				return
			}
		}
	}
	best := -1
	if m.maxWait > 0 {
		for i, it := range queued {
			if m.now-it.readySince >= m.maxWait && (best < 0 || it.readySeq < m.items[best].readySeq) {
				best = i
			}
		}
		if best >= 0 {
			return best // out of turn: serve leaves the turns as they are
		}
	}
	top := 0
	first := true
	for _, it := range queued {
		if first || it.priority > top {
			top, first = it.priority, false
		}
	}
	prefix := fmt.Sprint(top)
	for d := range m.dims {
		choice := ""
		for i, it := range queued {
			p := m.path(i, it.priority)[d]
			if it.priority == top && strings.HasPrefix(p, prefix+"/") && (choice == "" || m.turnAt[p] < m.turnAt[choice]) {
				choice = p
			}
		}
		prefix = choice
	}
	for i, it := range queued {
		leaf := fmt.Sprint(it.priority)
		if m.dims > 0 {
			leaf = m.path(i, it.priority)[m.dims-1]
		}
		if it.priority == top && leaf == prefix && (best < 0 || it.seq < m.items[best].seq) {
			best = i
		}
	}
	return best
}

// serve takes item out of its level, its keys having had their turn.
func (m *pqModel) serve(item int) {
	it := m.items[item]
	for _, p := range m.path(item, it.priority) {
		m.turnAt[p] = m.next()
	}
	it.queued = false
}

func (m *pqModel) get() (int, int) {
	item := m.pick()
	if it := m.items[item]; m.maxWait > 0 && m.now-it.readySince >= m.maxWait {
		it.queued = false
	} else {
		m.serve(item)
	}
	it := m.items[item]
	it.processing, it.pending = true, pendingNone
	m.parking.handOut(item)
	return item, it.priority
}

func (m *pqModel) done(item int) {
	it := m.items[item]
	if it == nil || !it.processing {
		return
	}
	it.processing = false
	m.parking.done(m.now, item)
	switch {
	case it.pending == pendingReady:
		m.makeReady(item)
	case it.pending == pendingNone && !m.parking.has(item):
		delete(m.items, item)
	}
}

// park applies Park(item, events), and reports whether it took effect and
// then the park backoff it took.
func (m *pqModel) park(item int, events uint8) (backoff time.Duration, parked bool) {
	it := m.items[item]
	if m.shuttingDown || it == nil || !it.processing || it.pending == pendingReady || it.pending == pendingDelay {
		return 0, false
	}
	return m.parking.park(m.now, item, events, m.release), true
}

// release makes the items of ended parks ready: queued, or delayed until
// their backoff has passed.
func (m *pqModel) release(ended ...endedPark) {
	for _, p := range ended {
		it := m.items[p.item]
		if p.until > m.now {
			it.pending, it.waitAt, it.waitSeq = pendingDelay, p.until, m.next()
			continue
		}
		it.pending = pendingReady
		if !it.processing {
			m.makeReady(p.item)
		}
	}
}

// heldItem returns an item being processed, chosen by n, and its key, as
// a worker's Park or Done names one; n itself if none is.
func (m *pqModel) heldItem(n int) (int, string) {
	var processing []int
	for item, it := range m.items {
		if it.processing {
			processing = append(processing, item)
		}
	}
	if len(processing) > 0 {
		slices.Sort(processing)
		n = processing[n%len(processing)]
	}
	return n, modelKeys[n]
}

// step moves time on; each item whose delay ends is queued at its ready
// time, in order of ready time and then of the add that set it, and each
// park that has lasted pqModelMaxPark ends then, after the delays that end
// at the same instant, oldest first.
func (m *pqModel) step(d time.Duration) {
	end := m.now + d
	for {
		delayed := -1
		for i, it := range m.items {
			if it.pending == pendingDelay && it.waitAt <= end && (delayed < 0 ||
				cmp.Or(cmp.Compare(it.waitAt, m.items[delayed].waitAt), cmp.Compare(it.waitSeq, m.items[delayed].waitSeq)) < 0) {
				delayed = i
			}
		}
		expiry, expires := m.parking.nextExpiry()
		expires = expires && expiry <= end
		switch {
		case delayed >= 0 && (!expires || m.items[delayed].waitAt <= expiry):
			it := m.items[delayed]
			m.now = it.waitAt
			it.pending, it.burst = pendingReady, false
			if !it.processing {
				m.makeReady(delayed)
			}
		case expires:
			m.now = expiry
			m.release(m.parking.expire(expiry)...)
		default:
			m.now = end
			return
		}
	}
}

func (m *pqModel) remove(item int) bool {
	delete(m.failures, item)
	m.parking.forget(item)
	parked := m.parking.drop(item)
	it := m.items[item]
	if it == nil || it.pending == pendingNone && !parked {
		return false
	}
	if it.queued {
		it.queued = false
	}
	it.pending, it.burst = pendingNone, false
	if !it.processing {
		delete(m.items, item)
	}
	return true
}

func (m *pqModel) shutDown() {
	m.shuttingDown = true
	for i, it := range m.items {
		if parked := m.parking.drop(i); it.pending == pendingDelay || parked {
			it.pending, it.burst = pendingNone, false
			if !it.processing {
				delete(m.items, i)
			}
		}
	}
}

// delayed lists the n items that wait for a delay and are ready first, as
// key@ready time.
func (m *pqModel) delayed(n int) []string {
	var delayed []int
	for i, it := range m.items {
		if it.pending == pendingDelay {
			delayed = append(delayed, i)
		}
	}
	slices.SortFunc(delayed, func(a, b int) int {
		return cmp.Or(cmp.Compare(m.items[a].waitAt, m.items[b].waitAt), cmp.Compare(m.items[a].waitSeq, m.items[b].waitSeq))
	})
	var out []string
	for _, i := range delayed[:min(n, len(delayed))] {
		out = append(out, fmt.Sprintf("%s@%v", modelKeys[i], m.items[i].waitAt))
	}
	return out
}

// pqSnapshotDelayed lists s's delayed items as delayed does, taken at now
// on the model's clock.
func pqSnapshotDelayed(s Snapshot[string], now time.Duration) []string {
	start := s.Taken.Add(-now)
	var out []string
	for _, d := range s.Delayed {
		out = append(out, fmt.Sprintf("%s@%v", d.Item, d.ReadyAt.Sub(start)))
	}
	return out
}

func (m *pqModel) len() int {
	n := 0
	for _, it := range m.items {
		if it.queued {
			n++
		}
	}
	return n
}

// depths returns how many items are ready at each priority, queued or to
// be queued by Done, as the depth metrics count them.
func (m *pqModel) depths() map[int]int {
	depths := map[int]int{}
	for _, it := range m.items {
		if it.pending == pendingReady {
			depths[it.priority]++
		}
	}
	return depths
}

func (m *pqModel) readyCount() int {
	n := 0
	for _, d := range m.depths() {
		n += d
	}
	return n
}

// clone returns a copy of m that can be changed without changing m.
func (m *pqModel) clone() *pqModel {
	c := *m
	c.items = map[int]*pqModelItem{}
	for i, it := range m.items {
		copied := *it
		c.items[i] = &copied
	}
	c.turnAt = maps.Clone(m.turnAt)
	c.failures = maps.Clone(m.failures)
	c.parking = m.parking.clone()
	return &c
}

// runPQModelWalk applies ops to a new priority queue and to the model,
// comparing after every step, in a synctest bubble. It returns how many
// operations it applied and the first divergence, or "".
func runPQModelWalk(dims int, maxWait time.Duration, debounce Debounce, ops []pqModelOp) (executed int, divergence string) {
	return runPQModelWalkOn(dims, maxWait, debounce, debounce, ops)
}

// runPQModelWalkOn is runPQModelWalk of a queue whose Debounce may differ
// from the model's, to show that the walks catch a queue that debounces
// wrong.
func runPQModelWalkOn(dims int, maxWait time.Duration, debounce, queueDebounce Debounce, ops []pqModelOp) (executed int, divergence string) {
	var fairness []func(string) string
	for d := range dims {
		fairness = append(fairness, func(key string) string {
			var i int
			fmt.Sscanf(key, "k%d", &i)
			return pqModelDim(d, i)
		})
	}
	limiter, parkLimiter := newModelLimiter(), newModelLimiter()
	provider := &priorityRecordingProvider{}
	// Half the walks trace, adding at priority 0 with links, so that the
	// core's links are checked after every step.
	traced := len(ops) > 0 && ops[0].item%2 == 0
	var queueProvider MetricsProvider = provider
	if traced {
		queueProvider = tracedPriorityProvider{provider, &linkTracer{}}
	}
	q := NewTypedPriorityQueue[string](limiter, TypedPriorityQueueConfig[string]{Fairness: fairness, MaxWait: maxWait,
		Name: "model", MetricsProvider: queueProvider, MaxParkTime: pqModelMaxPark, ParkBackoff: parkLimiter, Logger: discardLogger,
		Debounce: queueDebounce})
	m := newPQModel(dims, maxWait)
	m.debounce = debounce.checked("runPQModelWalk")
	var drained atomic.Bool
	defer func() {
		q.ShutDown()
		synctest.Wait()
	}()
	diverged := func(i int, op pqModelOp, format string, args ...any) (int, string) {
		return executed + 1, fmt.Sprintf("step %d %v: %s", i, op, fmt.Sprintf(format, args...))
	}
	for i, op := range ops {
		key := modelKeys[op.item]
		if m.draining && op.kind != pqOpGet && op.kind != pqOpDone && op.kind != pqOpSnapshot {
			continue // while a drain waits, only workers act
		}
		switch op.kind {
		case pqOpAdd:
			if traced && op.priority == 0 {
				q.AddContext(withLink(context.Background(), byte(i)), key)
			} else {
				q.AddWithOpts(AddOpts{Priority: &op.priority}, key)
			}
			m.add(op.item, op.priority, 0)
		case pqOpAddAfter:
			q.AddWithOpts(AddOpts{Priority: &op.priority, After: op.dur}, key)
			m.add(op.item, op.priority, op.dur)
		case pqOpAddRateLimited:
			limiter.last = -1
			q.AddWithOpts(AddOpts{Priority: &op.priority, After: op.dur, RateLimited: true}, key)
			if m.shuttingDown {
				if limiter.last != -1 {
					return diverged(i, op, "limiter consulted after shutdown")
				}
				break
			}
			after := m.when(op.item)
			if limiter.last != after {
				return diverged(i, op, "limiter delay = %v, model %v", limiter.last, after)
			}
			if op.dur > 0 && op.dur < after {
				after = op.dur
			}
			m.addAs(op.item, op.priority, after, addEarliest)
		case pqOpReschedule:
			q.AddWithOpts(AddOpts{Priority: &op.priority, After: op.dur, Reschedule: true}, key)
			m.addAs(op.item, op.priority, op.dur, addRescheduled)
		case pqOpGet:
			if m.len() == 0 {
				continue // Get would block
			}
			got, priority, shutdown := q.GetWithPriority()
			want, wantPriority := m.get()
			if shutdown || got != modelKeys[want] || priority != wantPriority {
				return diverged(i, op, "Get = %q@%d, %v; model k%d@%d", got, priority, shutdown, want, wantPriority)
			}
		case pqOpDone:
			if op.dur > 0 { // mostly an item being processed, as workers do
				op.item, key = m.heldItem(op.item)
			}
			q.Done(key)
			m.done(op.item)
		case pqOpStep:
			d := max(op.dur, 0)
			time.Sleep(d)
			m.step(d)
		case pqOpRemove:
			if got, want := q.Remove(key), m.remove(op.item); got != want {
				return diverged(i, op, "Remove = %v, model %v", got, want)
			}
		case pqOpForget:
			q.Forget(key)
			delete(m.failures, op.item)
			m.parking.forget(op.item)
		case pqOpPark:
			op.item, key = m.heldItem(op.item)
			if div := modelParkOp(q, limiter, parkLimiter, m, op.item, pqModelEvents(op)); div != "" {
				return diverged(i, op, "%s", div)
			}
		case pqOpWake:
			if got, want := q.Wake(linEventNames[op.item%2]), m.parking.wake(1<<(op.item%2), m.release); got != want {
				return diverged(i, op, "Wake = %d, model %d", got, want)
			}
		case pqOpWakeItem:
			if got, want := q.WakeItem(key), m.parking.wakeItem(m.now, op.item, m.release); got != want {
				return diverged(i, op, "WakeItem = %v, model %v", got, want)
			}
		case pqOpSnapshot:
			s := q.Snapshot(op.item)
			c := m.clone()
			var want []string
			for len(want) < op.item && c.len() > 0 {
				item, _ := c.get()
				want = append(want, modelKeys[item])
			}
			if !slices.Equal(s.Queued, want) || s.Depth != m.len() || s.Parked != m.parking.parked() {
				return diverged(i, op, "Snapshot queued %v (depth %d, %d parked), model %v (%d, %d)", s.Queued, s.Depth, s.Parked, want, m.len(), m.parking.parked())
			}
			if got, want := pqSnapshotDelayed(s, m.now), m.delayed(op.item); !slices.Equal(got, want) {
				return diverged(i, op, "Snapshot delayed %v, model %v", got, want)
			}
		case pqOpShutDown:
			q.ShutDown()
			m.shutDown()
			m.draining = false
		case pqOpShutDownWithDrain:
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
		if err := verifyPriorityQueue(q); err != nil {
			return diverged(i, op, "invariant: %v", err)
		}
		q.core.mu.Lock()
		err := verifyBursts(q.core.delays)
		q.core.mu.Unlock()
		if err != nil {
			return diverged(i, op, "bursts: %v", err)
		}
		if got, want := q.Len(), m.len(); got != want {
			return diverged(i, op, "Len = %d, model %d", got, want)
		}
		if got, want := q.Snapshot(0).Parked, m.parking.parked(); got != want {
			return diverged(i, op, "parked %d, model %d", got, want)
		}
		if got, want := q.NumRequeues(key), m.failures[op.item]; got != want {
			return diverged(i, op, "NumRequeues = %d, model %d", got, want)
		}
		if got, want := provider.depths(), m.depths(); !maps.Equal(got, want) || provider.value("model", "depth") != float64(m.readyCount()) {
			return diverged(i, op, "depth by priority %v, model %v", got, want)
		}
		if got := q.ShuttingDown(); got != m.shuttingDown {
			return diverged(i, op, "ShuttingDown = %v, model %v", got, m.shuttingDown)
		}
		if m.draining {
			idle := len(m.items) == 0
			if drained.Load() != idle {
				return diverged(i, op, "drain returned = %v, model idle = %v", drained.Load(), idle)
			}
			m.draining = !idle
		}
	}
	return executed, ""
}

// pqDelays are the delays the walks use, many equal so that ready times
// tie.
var pqDelays = []time.Duration{0, 1, time.Millisecond, time.Millisecond, 3 * time.Millisecond, 10 * time.Millisecond, time.Second}

// randomPQOps returns n operations drawn from r, with shutdowns rare.
func randomPQOps(r *rand.Rand, n int) []pqModelOp {
	ops := make([]pqModelOp, n)
	for i := range ops {
		kind := pqOpKind(r.IntN(int(pqOpShutDown)))
		if r.IntN(400) == 0 {
			kind = pqOpShutDown + pqOpKind(r.IntN(2))
		}
		ops[i] = pqModelOp{kind: kind, item: r.IntN(modelItems), priority: r.IntN(4) - 1, dur: pqDelays[r.IntN(len(pqDelays))]}
	}
	return ops
}

func TestPriorityQueueModelWalks(t *testing.T) {
	walks, steps := sized(60, 20, 10), 400
	for _, config := range pqModelConfigs {
		t.Run(config.name, func(t *testing.T) {
			total := 0
			for seed := range uint64(walks) {
				ops := randomPQOps(rand.New(rand.NewPCG(seed, 15)), steps)
				synctest.Test(t, func(t *testing.T) {
					executed, divergence := runPQModelWalk(config.dims, config.maxWait, config.debounce, ops)
					total += executed
					if divergence != "" {
						t.Fatalf("seed %d: %s", seed, divergence)
					}
				})
			}
			t.Logf("%d operations checked", total)
		})
	}
}

// FuzzPriorityQueueModel decodes each input as a configuration and
// operations, three bytes each, and runs them against the model.
func FuzzPriorityQueueModel(f *testing.F) {
	f.Add([]byte{0, 0, 1, 2, 3, 3, 0, 4, 1, 0})
	f.Add([]byte{2, 0, 0, 1, 0, 1, 2, 3, 3, 0, 3, 0, 4, 0, 0, 3, 0})
	f.Add([]byte{4, 1, 3, 5, 5, 4, 6, 3, 0, 3, 0, 2, 9, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		config := pqModelConfigs[int(data[0])%len(pqModelConfigs)]
		var ops []pqModelOp
		for b := data[1:]; len(b) >= 3; b = b[3:] {
			ops = append(ops, pqModelOp{
				kind:     pqOpKind(b[0] % byte(pqOpKinds)),
				item:     int(b[1]) % modelItems,
				priority: int(b[1]/modelItems)%4 - 1,
				dur:      pqDelays[int(b[2])%len(pqDelays)],
			})
		}
		synctest.Test(t, func(t *testing.T) {
			if _, divergence := runPQModelWalk(config.dims, config.maxWait, config.debounce, ops); divergence != "" {
				t.Fatal(divergence)
			}
		})
	})
}
