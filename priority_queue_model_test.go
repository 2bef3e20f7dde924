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

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/assert"
)

// This file checks the priority queue against a reference model written
// another way: the sequential priority queue that the linearizability
// histories check against too (prioSpec, below: fixed arrays of the
// queued keys and of each level's fairness turns, scanned in full, where
// the queue keeps linked lists and rotations), with what lies above it on
// the walks' clock (pqModel: delays, debounce bursts, MaxWait, the parks'
// backoffs and expiry). Seeded random walks and a fuzz target drive both
// with the same operations and compare what they return after every step,
// with the queue's invariant checked each time.

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

// pqModelDimKey is the key of item i in fairness dimension d, and
// pqModelDim the same as the queue's fairness function returns it.
func pqModelDimKey(d, i int) int { return i % (3 - d) }

func pqModelDim(d, i int) string { return fmt.Sprint(pqModelDimKey(d, i)) }

// pqModel is the priority queue of the walks: the sequential priority
// queue that the linearizability histories check against too (prioSpec:
// the levels, the fairness turns, the keys processing and added again,
// the parks and the shutdown), with what lies above it: the items waiting
// for a delay or the end of a debounce burst, the failure counts, the
// parks on the walks' clock and, for MaxWait, when each queued item
// became ready.
type pqModel struct {
	now     time.Duration
	maxWait time.Duration
	spec    prioSpec
	// delayed holds the items waiting for a delay, each with the priority
	// it is to be queued at.
	delayed  map[int]*pqDelayed
	readyAt  [modelItems]pqReady // of each queued item; a raise keeps it
	tick     uint64
	failures map[int]int
	// parking puts the spec's parks on the walks' clock.
	parking  parkingModel
	draining bool
	debounce Debounce // MaxDelay set
}

// pqDelayed is an item waiting for its delay, until waitAt; burst is set
// while it waits for the end of a Debounce burst, which ends no later
// than deadline.
type pqDelayed struct {
	priority int
	waitAt   time.Duration
	waitSeq  uint64
	burst    bool
	deadline time.Duration
}

// pqReady is when an item became ready: MaxWait hands out the item ready
// longest first.
type pqReady struct {
	since time.Duration
	seq   uint64
}

func newPQModel(dims int, maxWait time.Duration) *pqModel {
	m := &pqModel{maxWait: maxWait, delayed: map[int]*pqDelayed{}, failures: map[int]int{},
		spec: newPrioSpec(dims, func(d int, key int8) int8 { return int8(pqModelDimKey(d, int(key))) })}
	m.parking = newParkingModel(&m.spec.parks, pqModelMaxPark)
	return m
}

// when is the delay AddRateLimited takes for item, as queueModel's.
func (m *pqModel) when(item int) time.Duration { return modelBackoff(m.failures, item) }

func (m *pqModel) next() uint64 { m.tick++; return m.tick }

// ready applies an add of item at priority to the spec, noting when item
// became ready if the add queued it.
func (m *pqModel) ready(item, priority int) {
	was := m.spec.isQueued(int8(item))
	m.spec = m.spec.add(int8(item), int8(priority))
	m.noteReady(item, was)
}

// noteReady notes that item is ready since now if it is queued and was
// not.
func (m *pqModel) noteReady(item int, wasQueued bool) {
	if !wasQueued && m.spec.isQueued(int8(item)) {
		m.readyAt[item] = pqReady{since: m.now, seq: m.next()}
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
	if m.spec.shutdown {
		return
	}
	d := m.delayed[item]
	if after <= 0 && how != addDebounced {
		if d != nil { // ready now, at the higher of the two priorities
			priority = max(priority, d.priority)
			delete(m.delayed, item)
		}
		m.ready(item, priority)
		return
	}
	m.spec.unpark(int8(item)) // an add ends a park: from here on, as if none
	if m.spec.holdsReady(int8(item)) {
		m.ready(item, priority) // raised, if higher; the delay is moot
		return
	}
	if d == nil {
		d = &pqDelayed{priority: priority, waitAt: m.now + after, waitSeq: m.next()}
		m.delayed[item] = d
	} else {
		d.priority = max(d.priority, priority)
		if how != addDebounced { // a debounced add sets its time below
			if how == addRescheduled || m.now+after < d.waitAt {
				d.waitAt, d.waitSeq = m.now+after, m.next()
			}
			if d.burst && m.now+after < d.deadline {
				d.deadline = m.now + after
			}
		}
	}
	m.spec.delayAt(int8(item), int8(d.priority))
	switch how {
	case addRescheduled:
		d.burst = false
	case addDebounced:
		if !d.burst {
			d.burst, d.deadline = true, m.now+m.debounce.MaxDelay
			if d.waitAt > m.now { // it waited for a delay already
				d.deadline = min(d.deadline, d.waitAt)
			}
		}
		d.waitAt, d.waitSeq = min(m.now+m.debounce.Quiet, d.deadline), m.next()
	}
}

// get hands out the next item, one being queued, and returns it and its
// priority: with MaxWait, the item ready longest if it has waited that
// long, out of turn; otherwise the spec's next.
func (m *pqModel) get() (int, int) {
	key := int8(-1)
	if m.maxWait > 0 {
		for _, k := range m.spec.queuedKeys() {
			if r := m.readyAt[k]; m.now-r.since >= m.maxWait && (key < 0 || r.seq < m.readyAt[key].seq) {
				key = k
			}
		}
	}
	if key >= 0 {
		m.spec = m.spec.takeOut(key) // out of turn: the turns stay as they are
	} else {
		key, m.spec = m.spec.get()
	}
	return int(key), int(m.spec.prio[key])
}

func (m *pqModel) done(item int) {
	was := m.spec.isQueued(int8(item))
	settled, spec := m.spec.done(int8(item))
	m.spec = spec
	if settled {
		m.parking.tookEffect(m.now, item)
	}
	m.noteReady(item, was)
}

// park applies Park(item, events), and reports whether it took effect and
// then the park backoff it took.
func (m *pqModel) park(item int, events uint8) (backoff time.Duration, parked bool) {
	if !m.spec.mayPark(int8(item)) || m.delayed[item] != nil {
		return 0, false
	}
	return m.parking.park(m.now, item, events, m.release), true
}

// release makes the items of ended parks ready, at the priority they were
// handed out at: queued, or delayed until their backoff has passed.
func (m *pqModel) release(ended ...endedPark) {
	for _, p := range ended {
		priority := int(m.spec.prio[p.item])
		if p.until > m.now {
			m.delayed[p.item] = &pqDelayed{priority: priority, waitAt: p.until, waitSeq: m.next()}
			continue
		}
		m.ready(p.item, priority)
	}
}

// heldItem returns an item being processed, chosen by n, and its key, as
// a worker's Park or Done names one; n itself if none is.
func (m *pqModel) heldItem(n int) (int, string) {
	if processing := m.spec.processingKeys(); len(processing) > 0 {
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
		for i, it := range m.delayed {
			if it.waitAt <= end && (delayed < 0 ||
				cmp.Or(cmp.Compare(it.waitAt, m.delayed[delayed].waitAt), cmp.Compare(it.waitSeq, m.delayed[delayed].waitSeq)) < 0) {
				delayed = i
			}
		}
		expiry, expires := m.parking.nextExpiry()
		expires = expires && expiry <= end
		switch {
		case delayed >= 0 && (!expires || m.delayed[delayed].waitAt <= expiry):
			it := m.delayed[delayed]
			m.now = it.waitAt
			delete(m.delayed, delayed)
			m.ready(delayed, it.priority)
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
	delayed := m.delayed[item] != nil
	delete(m.delayed, item)
	removed, spec := m.spec.remove(int8(item))
	m.spec = spec
	return removed || delayed
}

// shutDown applies a ShutDown, or with release false a
// ShutDownWithDrain: the delays and the parks end, and nothing is queued
// for them.
func (m *pqModel) shutDown(release bool) {
	m.spec.shutDown(release)
	clear(m.delayed)
}

// idle reports whether nothing is queued, processing, parked or delayed:
// a drain returns.
func (m *pqModel) idle() bool {
	return m.spec.queued == 0 && m.spec.processing == 0 && m.spec.parks.parks == 0 && len(m.delayed) == 0
}

// delayedItems lists the n items that wait for a delay and are ready
// first, as key@ready time.
func (m *pqModel) delayedItems(n int) []string {
	delayed := slices.Collect(maps.Keys(m.delayed))
	slices.SortFunc(delayed, func(a, b int) int {
		return cmp.Or(cmp.Compare(m.delayed[a].waitAt, m.delayed[b].waitAt), cmp.Compare(m.delayed[a].waitSeq, m.delayed[b].waitSeq))
	})
	var out []string
	for _, i := range delayed[:min(n, len(delayed))] {
		out = append(out, fmt.Sprintf("%s@%v", modelKeys[i], m.delayed[i].waitAt))
	}
	return out
}

// pqSnapshotDelayed lists s's delayed items as delayedItems does, taken
// at now on the model's clock.
func pqSnapshotDelayed(s Snapshot[string], now time.Duration) []string {
	start := s.Taken.Add(-now)
	var out []string
	for _, d := range s.Delayed {
		out = append(out, fmt.Sprintf("%s@%v", d.Item, d.ReadyAt.Sub(start)))
	}
	return out
}

func (m *pqModel) len() int { return int(m.spec.queued) }

// depths returns how many items are ready at each priority, queued or to
// be queued by Done, as the depth metrics count them.
func (m *pqModel) depths() map[int]int {
	depths := map[int]int{}
	for key := range int8(specKeys) {
		if m.spec.holdsReady(key) {
			depths[int(m.spec.prio[key])]++
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
	c.delayed = map[int]*pqDelayed{}
	for i, d := range m.delayed {
		copied := *d
		c.delayed[i] = &copied
	}
	c.failures = maps.Clone(m.failures)
	c.parking = m.parking.clone(&c.spec.parks)
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
			if m.spec.shutdown {
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
			if got, want := pqSnapshotDelayed(s, m.now), m.delayedItems(op.item); !slices.Equal(got, want) {
				return diverged(i, op, "Snapshot delayed %v, model %v", got, want)
			}
		case pqOpShutDown:
			q.ShutDown()
			m.shutDown(true)
			m.draining = false
		case pqOpShutDownWithDrain:
			if m.spec.shutdown {
				continue
			}
			go func() {
				q.ShutDownWithDrain()
				drained.Store(true)
			}()
			m.shutDown(false)
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
		if got, want := provider.depths(), m.depths(); !maps.Equal(got, want) || provider.Value("model", "depth") != float64(m.readyCount()) {
			return diverged(i, op, "depth by priority %v, model %v", got, want)
		}
		if got := q.ShuttingDown(); got != m.spec.shutdown {
			return diverged(i, op, "ShuttingDown = %v, model %v", got, m.spec.shutdown)
		}
		if m.draining {
			idle := m.idle()
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

// The sequential priority queue, written once: the priority walks
// (through pqModel, which adds the delays, the bursts and the clock), the
// group-limit walks (through groupModel, in groups_model_test.go, which
// adds MaxWait's clock) and the linearizability histories of
// core_test.go (adds at priorities 0 to 2 and, with fairness, two
// fairness keys) all apply it.

const (
	// prioMin and prioLevels are the priorities a prioSpec holds: the
	// walks' -1 to 2.
	prioMin    = -1
	prioLevels = 4
	// prioFanout is the most keys a fairness dimension has: the walks'
	// first has three.
	prioFanout = 3
)

// linLevels is the number of priorities the histories add at: 0, 1 and 2.
const linLevels = 3

// linTenant is the fairness key of key in the fairness histories: a and b
// share one, c has its own, so that a key's items wait behind another's.
func linTenant(key int8) int8 {
	if key == 2 {
		return 1
	}
	return 0
}

// prioRotation holds the fairness keys that have items queued under one
// node of a level, the next in turn first, each plus one (zeros pad), and
// the turns each has left before it goes to the back.
type prioRotation struct {
	keys [prioFanout]int8
	left [prioFanout]int8
}

func (r *prioRotation) has(k int8) bool { return slices.Contains(r.keys[:], k+1) }

// first returns the key whose turn it is, -1 if none has items queued.
func (r *prioRotation) first() int8 { return r.keys[0] - 1 }

// push adds k at the back, with turns hand-outs in a row.
func (r *prioRotation) push(k, turns int8) {
	i := slices.Index(r.keys[:], 0)
	r.keys[i], r.left[i] = k+1, turns
}

func (r *prioRotation) drop(k int8) {
	i := slices.Index(r.keys[:], k+1)
	copy(r.keys[i:], r.keys[i+1:])
	copy(r.left[i:], r.left[i+1:])
	r.keys[prioFanout-1], r.left[prioFanout-1] = 0, 0
}

// turn counts a hand-out for the first key; once its turns are used up it
// goes to the back, with turns again.
func (r *prioRotation) turn(turns int8) {
	if r.left[0]--; r.left[0] <= 0 {
		k := r.first()
		r.drop(k)
		r.push(k, turns)
	}
}

// prioSpec is the sequential priority queue: a value that porcupine
// compares with ==, over keys 0 to specKeys-1. fifo lists the queued keys
// in the order they joined the level of their priority: the first of the
// highest level Get may hand out (its group, if it has one, has a free
// slot) goes first or, with fairness, the first of the keys whose turn it
// is at that level, in each dimension. A queue without priorities is one
// whose adds are all at priority 0.
type prioSpec struct {
	queueSpec
	fifo   [specKeys]int8
	queued int8
	// prio is the priority of each key's pending add: the one it is
	// queued at, or, for a processing key added again, the one Done
	// queues it at: the highest asked for meanwhile. A processing or
	// parked key keeps the one it was handed out at, or that of a delayed
	// add since (delayAt).
	prio [specKeys]int8
	// dims is the number of fairness dimensions, 0 to 2, fairKey the
	// fairness key of each key in each, and weight the weight of each
	// fairness key (0 counts as 1): the hand-outs in a row its turn lasts.
	dims    int8
	fairKey [2][specKeys]int8
	weight  [2][prioFanout]int8
	// rot holds, at each level, the turns of the first dimension's keys
	// (rot[l][0]) and, under each of them k, those of the second's
	// (rot[l][1+k]): the keys that have items queued there that Get may
	// hand out.
	rot [prioLevels][1 + prioFanout]prioRotation
}

// newPrioSpec returns an empty priority queue with dims fairness
// dimensions, where fairKey gives each key's fairness key in each.
func newPrioSpec(dims int, fairKey func(d int, key int8) int8) prioSpec {
	s := prioSpec{dims: int8(dims)}
	for d := range dims {
		for key := range int8(specKeys) {
			s.fairKey[d][key] = fairKey(d, key)
		}
	}
	return s
}

// newLinPrioSpec returns the histories' priority queue: with fairness, by
// linTenant.
func newLinPrioSpec(fair bool) prioSpec {
	if !fair {
		return prioSpec{}
	}
	return newPrioSpec(1, func(_ int, key int8) int8 { return linTenant(key) })
}

func (s *prioSpec) isQueued(key int8) bool { return slices.Contains(s.fifo[:s.queued], key) }

// queuedKeys returns the queued keys in the order they joined their level.
func (s *prioSpec) queuedKeys() []int8 { return slices.Clone(s.fifo[:s.queued]) }

// nodes returns how many rotations s keeps at each level: none without
// fairness, the level's own, and with two dimensions, one under each key
// of the first.
func (s *prioSpec) nodes() int {
	switch s.dims {
	case 0:
		return 0
	case 1:
		return 1
	}
	return 1 + prioFanout
}

// childAt returns the fairness key under node of level of key, queued,
// -1 if Get may not hand key out there: another level, another node, or
// a group without a free slot.
func (s *prioSpec) childAt(key, level int8, node int) int8 {
	switch {
	case s.prio[key] != level || !s.eligible(key):
		return -1
	case node == 0:
		return s.fairKey[0][key]
	case s.fairKey[0][key] == int8(node-1):
		return s.fairKey[1][key]
	}
	return -1
}

// turns returns the hand-outs in a row of the turn of key k under node.
func (s *prioSpec) turns(node int, k int8) int8 {
	return max(s.weight[min(node, 1)][k], 1)
}

// reconcile brings the rotations up to date after a change: a key with
// nothing left under a node that Get may hand out leaves its rotation,
// and keys that got something join at the back, several at once in the
// order of their first queued item.
func (s prioSpec) reconcile() prioSpec {
	for l := range int8(prioLevels) {
		level := l + prioMin
		for node := range s.nodes() {
			rot := &s.rot[l][node]
			var under [prioFanout]bool
			for _, k := range s.fifo[:s.queued] {
				if c := s.childAt(k, level, node); c >= 0 {
					under[c] = true
				}
			}
			for i := prioFanout - 1; i >= 0; i-- {
				if k := rot.keys[i] - 1; k >= 0 && !under[k] {
					rot.drop(k)
				}
			}
			for _, k := range s.fifo[:s.queued] {
				if c := s.childAt(k, level, node); c >= 0 && !rot.has(c) {
					rot.push(c, s.turns(node, c))
				}
			}
		}
	}
	return s
}

// enqueue queues key at its priority: at the back of its level, and its
// fairness keys at the back of their rotations if they had nothing queued
// there.
func (s prioSpec) enqueue(key int8) prioSpec {
	s.fifo[s.queued] = key
	s.queued++
	return s.reconcile()
}

// dequeue takes the queued key out; a fairness key left with nothing
// queued under its node leaves its rotation.
func (s prioSpec) dequeue(key int8) prioSpec {
	i := slices.Index(s.fifo[:s.queued], key)
	copy(s.fifo[i:], s.fifo[i+1:s.queued])
	s.queued--
	s.fifo[s.queued] = 0
	return s.reconcile()
}

// next returns the key Get hands out, -1 if Get may hand out none, and
// the state after the rotations turned for it, before the key leaves the
// queue.
func (s prioSpec) next() (int8, prioSpec) {
	level, found := int8(0), false
	for _, k := range s.fifo[:s.queued] {
		if s.eligible(k) && (!found || s.prio[k] > level) {
			level, found = s.prio[k], true
		}
	}
	if !found {
		return -1, s
	}
	var path [2]int8
	node := 0
	for d := range s.dims {
		rot := &s.rot[level-prioMin][node]
		path[d] = rot.first()
		if path[d] < 0 {
			panic("prioSpec.next: a level with items queued has no turns")
		}
		rot.turn(s.turns(node, path[d]))
		node = 1 + int(path[d])
	}
	for _, k := range s.fifo[:s.queued] {
		if s.prio[k] == level && s.eligible(k) && (s.dims < 1 || s.fairKey[0][k] == path[0]) && (s.dims < 2 || s.fairKey[1][k] == path[1]) {
			return k, s
		}
	}
	panic("prioSpec.next: the rotation names a key with nothing queued")
}

// add applies an add of key at priority: nothing after a shutdown;
// otherwise it ends key's park, and queues key at the back of its level,
// or again at its Done if it is processing; a queued key raised to a
// higher priority goes to the back of its new level, and a lower one
// changes nothing.
func (s prioSpec) add(key, priority int8) prioSpec {
	bit := uint16(1) << key
	if !s.shutdown {
		s.unpark(key)
	}
	switch {
	case s.shutdown:
	case s.processing&bit != 0 && s.dirty&bit != 0:
		s.prio[key] = max(s.prio[key], priority)
	case s.processing&bit != 0:
		s.dirty |= bit
		s.prio[key] = priority
	case s.isQueued(key):
		if priority > s.prio[key] { // raised: to the back of its new level
			s = s.dequeue(key)
			s.prio[key] = priority
			s = s.enqueue(key)
		}
	default:
		s.prio[key] = priority
		s = s.enqueue(key)
	}
	return s
}

// delayAt notes a delayed add of key at priority, which the layer above
// holds until its delay ends: a processing key takes that priority, which
// a park of it ended later queues it at.
func (s *prioSpec) delayAt(key, priority int8) {
	if s.isProcessing(key) {
		s.prio[key] = priority
	}
}

// get applies a Get that does not wait: it hands out the next key, -1 if
// there is none it may hand out.
func (s prioSpec) get() (int8, prioSpec) {
	key, s := s.next()
	if key < 0 {
		return -1, s
	}
	return key, s.takeOut(key)
}

// takeOut hands out key, queued, without a turn of the rotations: what
// Get does after next, and what MaxWait does out of turn.
func (s prioSpec) takeOut(key int8) prioSpec {
	s.handOut(key) // first: the group's slots count it when its key leaves the rotations
	return s.dequeue(key)
}

// done applies Done(key): for a key processing, its park takes effect, if
// it has one, and done reports whether one did; a key added again
// meanwhile is queued at its priority.
func (s prioSpec) done(key int8) (settled bool, _ prioSpec) {
	bit := uint16(1) << key
	if s.processing&bit == 0 {
		return false, s
	}
	settled = s.parks.done(int(key))
	s.processing &^= bit
	if s.dirty&bit != 0 {
		s.dirty &^= bit
		s = s.enqueue(key)
	}
	return settled, s.reconcile() // a slot freed: the group's key may join
}

// remove applies Remove(key): it ends key's park, takes it out of its
// level and forgets its failures; a processing key stays processing, but
// is not queued again. It reports whether key was queued, parked or to be
// queued at its Done.
func (s prioSpec) remove(key int8) (bool, prioSpec) {
	bit := uint16(1) << key
	parked, parking := s.unpark(key)
	removed := s.dirty&bit != 0 || parked || parking
	s.dirty &^= bit
	if s.processing&bit == 0 && s.isQueued(key) {
		s = s.dequeue(key)
		removed = true
	}
	s.failures[key] = 0
	return removed, s
}

// step applies one operation with its output to s. It reports false if the
// queue could not have returned out at this point.
func (s prioSpec) step(in linInput, out linOutput) (bool, prioSpec) {
	if !validKey(in) {
		return false, s
	}
	if handled, ok := s.stepCommon(in, out, int(s.queued)); handled {
		return ok, s
	}
	key := in.key
	switch in.kind {
	case linAdd, linAddAfterZero, linAddAfterNegative:
		return true, s.add(key, 0)
	case linAddPriority:
		return true, s.add(key, in.prio)
	case linAddRateLimited:
		if s.shutdown {
			return true, s
		}
		s.failures[key]++
		return true, s.add(key, 0)
	case linRemove:
		removed, s := s.remove(key)
		return out.n == 1 == removed, s
	case linGet, linGetContext:
		got, s := s.get()
		return got >= 0 && got == out.key && (out.prio < 0 || out.prio == s.prio[got]), s
	case linDone:
		_, s := s.done(key)
		return true, s
	case linSetGroupLimit:
		s.limits[0] = in.prio
		return true, s.reconcile()
	case linWake:
		woken, n := s.wake(in.events)
		for _, k := range woken {
			s = s.enqueue(k) // at the priority it was handed out at
		}
		return out.n == n, s
	case linWakeItem:
		woken, queue := s.wakeItem(key)
		if queue {
			s = s.enqueue(key)
		}
		return out.n == 1 == woken, s
	}
	panic(fmt.Sprintf("prioSpec.step: unexpected operation %v", in.kind))
}

func (s prioSpec) hash() uint64 {
	h := uint64(s.queued)
	for i := range linMaxKeys {
		h |= uint64(s.fifo[i]&3)<<(4+2*i) | uint64(s.prio[i]&3)<<(10+2*i)
	}
	for l := range s.rot {
		h |= uint64(s.rot[l][0].keys[0])<<(16+4*l) | uint64(s.rot[l][0].keys[1])<<(18+4*l)
	}
	return s.queueSpec.hash(h)
}

func (s prioSpec) String() string {
	var b strings.Builder
	b.WriteString("queued [")
	for i, key := range s.fifo[:s.queued] {
		if i > 0 {
			b.WriteString(" ")
		}
		fmt.Fprintf(&b, "%s@%d", linKeyNames[key], s.prio[key])
	}
	b.WriteString("]")
	for l := range s.rot {
		for node, r := range s.rot[l] {
			if r.keys[0] != 0 {
				fmt.Fprintf(&b, " turns@%d", l+prioMin)
				if node > 0 {
					fmt.Fprintf(&b, "/%d", node-1)
				}
				for _, k := range r.keys {
					if k != 0 {
						fmt.Fprintf(&b, " %d", k-1)
					}
				}
			}
		}
	}
	s.describe(&b, func(key int8) string { return fmt.Sprintf("*@%d", s.prio[key]) })
	return b.String()
}

// linPriorityModel is the specification of a priority queue, and
// linFairModel of one with fairness by linTenant.
var (
	linPriorityModel = linPrioModelFor(false)
	linFairModel     = linPrioModelFor(true)
)

func linPrioModelFor(fair bool) porcupine.Model { return linModelOf(newLinPrioSpec(fair)) }

// linPrioGroupModelFor is the specification of a priority queue with
// group limits; see linGroupModel.
func linPrioGroupModelFor(fair bool) porcupine.Model {
	s := newLinPrioSpec(fair)
	s.queueSpec = linGrouped()
	return linModelOf(s)
}

// TestLinearizabilityPriorityModel checks the priority model and porcupine
// on hand-written histories, one operation at a time unless they overlap.
func TestLinearizabilityPriorityModel(t *testing.T) {
	type op = linStep
	add := func(key, prio int8) op { return op{in: linInput{kind: linAddPriority, key: key, prio: prio}} }
	get := func(key, prio int8) op {
		return op{in: linInput{kind: linGet, key: -1}, out: linOutput{key: key, prio: prio}}
	}
	done := func(key int8) op { return op{in: linInput{kind: linDone, key: key}} }
	length := func(n int) op { return op{in: linInput{kind: linLen, key: -1}, out: linOutput{n: n}} }
	tests := []struct {
		name  string
		fair  bool
		steps [][]op // steps[i] run at time i*10; the operations of one step overlap
		want  bool
	}{
		{"higher first", false, [][]op{{add(0, 0)}, {add(1, 2)}, {get(1, 2)}, {get(0, 0)}}, true},
		{"lower first", false, [][]op{{add(0, 0)}, {add(1, 2)}, {get(0, 0)}}, false},
		{"wrong priority reported", false, [][]op{{add(0, 1)}, {get(0, 0)}}, false},
		{"a raise goes to the back of its level", false, [][]op{{add(0, 0)}, {add(1, 1)}, {add(0, 1)}, {get(1, 1)}, {get(0, 1)}}, true},
		{"a raise keeps its place", false, [][]op{{add(0, 0)}, {add(1, 1)}, {add(0, 1)}, {get(0, 1)}}, false},
		{"a lower re-add keeps the priority", false, [][]op{{add(0, 2)}, {add(0, 0)}, {length(1)}, {get(0, 2)}}, true},
		{"Done queues at the highest asked meanwhile", false, [][]op{{add(0, 0)}, {get(0, 0)}, {add(0, 1)}, {add(0, 2)}, {add(0, 0)}, {done(0)}, {get(0, 2)}}, true},
		{"Done queues at 0", false, [][]op{{add(0, 0)}, {get(0, 0)}, {add(0, 2)}, {done(0)}, {get(0, 0)}}, false},
		{"concurrent adds either way", false, [][]op{{add(0, 1), add(1, 1)}, {get(1, 1)}, {get(0, 1)}}, true},
		{"fairness: keys take turns", true, [][]op{{add(0, 0)}, {add(1, 0)}, {add(2, 0)}, {get(0, 0)}, {get(2, 0)}, {get(1, 0)}}, true},
		{"fairness: FIFO is not fair", true, [][]op{{add(0, 0)}, {add(1, 0)}, {add(2, 0)}, {get(0, 0)}, {get(1, 0)}}, false},
		{"fairness: a key joins the back", true, [][]op{{add(0, 0)}, {add(1, 0)}, {get(0, 0)}, {add(2, 0)}, {get(1, 0)}, {get(2, 0)}}, true},
		{"fairness within a priority only", true, [][]op{{add(0, 1)}, {add(1, 1)}, {add(2, 0)}, {get(0, 1)}, {get(1, 1)}, {get(2, 0)}}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ops := linStepOps(tt.steps)
			assert.Equalf(t, tt.want, checkLinHistory(t, linPrioModelFor(tt.fair), ops), "history:\n%s", formatLinHistory(ops))
		})
	}
}
