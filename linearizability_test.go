package workqueue

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The linearizability test checks that the queues are linearizable: that every history of
// concurrent calls that a queue produces could also have been produced by
// the calls one at a time, each taking effect at some instant between its
// call and its return, on the obvious sequential queue (linState). Each
// history runs a few workers and a shutdown goroutine on a fresh queue with
// two or three keys, so that deduplication, the dirty mark and shutdown
// collide, records when every call started and returned, and gives the
// history to porcupine, which searches for such an order.
//
// ShutDownWithDrain does not take effect at one instant: it stops adds, then
// waits. It is recorded as two operations over the same interval, drain-begin
// (a ShutDown that releases no drain) and drain-end (legal once nothing is
// queued or processing, or once a ShutDown has released drains).
//
// The test is in four files: this one holds the tests,
// linearizability_model_test.go the sequential specification (and
// linearizability_priority_test.go the priority queue's),
// linearizability_harness_test.go the recording of histories and the
// wiring to porcupine, and linearizability_broken_test.go the reference
// queues, right and deliberately broken, that show the checker works.

// TestLinearizability checks histories of concurrent calls on every
// configuration of the queue. A failure prints the shortest rejected
// history and writes porcupine's view of it.
func TestLinearizability(t *testing.T) {
	tests := []struct {
		name  string
		setup linSetup
	}{
		{"queue", linSetup{}},
		{"queue/custom storage", linSetup{custom: true}},
		{"queue/metrics", linSetup{metrics: true}},
		{"rate limiting", linSetup{rateLimiting: true}},
		{"rate limiting/custom storage", linSetup{rateLimiting: true, custom: true}},
		{"rate limiting/metrics", linSetup{rateLimiting: true, metrics: true}},
		{"rate limiting/AddCancelsDelay and parking", linSetup{rateLimiting: true, addCancelsDelay: true, parking: true}},
		{"priority queue", linSetup{rateLimiting: true, priority: true}},
		{"priority queue/metrics", linSetup{rateLimiting: true, priority: true, metrics: true}},
		{"priority queue/fairness", linSetup{rateLimiting: true, priority: true, fairness: true}},
		{"priority queue/fairness and metrics", linSetup{rateLimiting: true, priority: true, fairness: true, metrics: true}},
		{"priority queue/fairness and MaxWait", linSetup{rateLimiting: true, priority: true, fairness: true, maxWait: true}},
		{"queue/parking", linSetup{parking: true}},
		{"queue/custom storage and parking", linSetup{custom: true, parking: true}},
		{"rate limiting/parking", linSetup{rateLimiting: true, parking: true}},
		{"rate limiting/parking and metrics", linSetup{rateLimiting: true, parking: true, metrics: true}},
		{"priority queue/parking", linSetup{rateLimiting: true, priority: true, parking: true}},
		{"priority queue/fairness and parking", linSetup{rateLimiting: true, priority: true, fairness: true, parking: true}},
		{"queue/group limits and parking", linSetup{groups: true, parking: true}},
		{"rate limiting/group limits and metrics", linSetup{rateLimiting: true, groups: true, metrics: true}},
		{"priority queue/group limits", linSetup{rateLimiting: true, priority: true, groups: true}},
		{"priority queue/fairness, group limits and parking", linSetup{rateLimiting: true, priority: true, fairness: true, groups: true, parking: true}},
		{"rate limiting/debounce and parking", linSetup{rateLimiting: true, debounce: true, parking: true}},
		{"rate limiting/debounce and metrics", linSetup{rateLimiting: true, debounce: true, metrics: true}},
		{"priority queue/debounce and parking", linSetup{rateLimiting: true, priority: true, debounce: true, parking: true}},
		{"priority queue/fairness, debounce and metrics", linSetup{rateLimiting: true, priority: true, fairness: true, debounce: true, metrics: true}},
	}
	seed := linBaseSeed(t)
	for ti, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			histories := linHistoryCount()
			var (
				operations    int
				rejected      int
				shortest      []porcupine.Operation
				shortestIndex int
			)
			for h := range histories {
				historySeed := seed + uint64(ti)<<32 + uint64(h)
				plan := randomLinPlan(rand.New(rand.NewPCG(historySeed, 0)), tt.setup.rateLimiting, tt.setup.priority && !tt.setup.debounce, tt.setup.parking, tt.setup.debounce, tt.setup.groups)
				ops := runLinHistory(t, tt.setup.build(), plan, historySeed)
				operations += len(ops)
				if !checkLinHistory(t, tt.setup.model(), ops) {
					rejected++
					if shortest == nil || len(ops) < len(shortest) {
						shortest, shortestIndex = ops, h
					}
				}
			}
			t.Logf("%d histories, %d operations, %d not linearizable", histories, operations, rejected)
			if rejected == 0 {
				return
			}
			path := visualizeLinHistory(t, tt.setup.model(), shortest, t.Name())
			assert.Failf(t, "not linearizable", "%d of %d histories are not linearizable; the shortest, history %d with %d operations (view: %s):\n%s",
				rejected, histories, shortestIndex, len(shortest), path, formatLinHistory(shortest))
		})
	}
}

// TestLinearizabilityCheckerCatchesBrokenQueues shows that the harness finds
// real bugs: it runs histories on the reference queue, which must all pass,
// and on two broken ones, which must each be caught. A fixed script that
// any single worker could run catches both broken queues every time; the
// random histories must catch them too, within a bound that random scripts
// meet with overwhelming probability (each history gives every bug many
// chances).
func TestLinearizabilityCheckerCatchesBrokenQueues(t *testing.T) {
	// Add a, Get a, Add a (now dirty), Len, Done a (queued again), Len.
	scripted := linPlan{
		keys: 1,
		workers: [][]linInput{{
			{kind: linAdd, key: 0}, {kind: linGet, key: -1}, {kind: linAdd, key: 0},
			{kind: linLen, key: -1}, {kind: linDone, key: -1}, {kind: linLen, key: -1},
		}},
		shutters: []linShutter{{after: []linInput{{kind: linShutDown, key: -1}}}},
		trigger:  -1,
	}
	tests := []struct {
		name string
		bug  linBug
	}{
		{"reference", linNoBug},
		{"double handout", linBugDoubleHandout},
		{"lost dirty mark", linBugLoseDirty},
	}
	seed := linBaseSeed(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ops := runLinHistory(t, linSubject{q: newLinRefQueue(tt.bug)}, scripted, seed)
			assert.Equalf(t, tt.bug == linNoBug, checkLinHistory(t, linModel, ops), "scripted history:\n%s", formatLinHistory(ops))

			checkBrokenQueue(t, linModel, seed, tt.bug != linNoBug, false, func() linSubject {
				q := newLinRefQueue(tt.bug)
				return linSubject{q: q, rl: q, ext: q}
			})
		})
	}
}

// checkBrokenQueue runs random histories, with priorities or without, on
// the queues build makes. If broken, one of the first linCatchLimit must
// be rejected; otherwise every history of linHistoryCount must pass.
func checkBrokenQueue(t *testing.T, model porcupine.Model, seed uint64, broken, priorities bool, build func() linSubject) {
	t.Helper()
	histories := linCatchLimit
	if !broken {
		histories = linHistoryCount()
	}
	for h := range histories {
		historySeed := seed + uint64(h)
		plan := randomLinPlan(rand.New(rand.NewPCG(historySeed, 0)), true, priorities, false, false, false)
		ops := runLinHistory(t, build(), plan, historySeed)
		if !checkLinHistory(t, model, ops) {
			if !broken {
				require.Failf(t, "reference queue rejected", "history %d (view: %s):\n%s", h, visualizeLinHistory(t, model, ops, t.Name()), formatLinHistory(ops))
			}
			t.Logf("caught by random history %d", h+1)
			return
		}
	}
	if broken {
		require.Failf(t, "bug not caught", "no history of %d caught the bug", histories)
	}
}

// linCatchLimit bounds the random histories that must catch a broken
// queue; the bugs are caught within a few dozen.
const linCatchLimit = 300

// TestLinearizabilityModel checks the model and porcupine on hand-written
// histories: operations with the same number run one after the other,
// call i*10 to return i*10+5; overlap stretches an operation's return.
func TestLinearizabilityModel(t *testing.T) {
	type op = linStep
	add := func(key int8) op { return op{in: linInput{kind: linAdd, key: key}} }
	get := func(key int8) op { return op{in: linInput{kind: linGet, key: -1}, out: linOutput{key: key}} }
	getShutdown := op{in: linInput{kind: linGet, key: -1}, out: linOutput{key: -1, shutdown: true}}
	done := func(key int8) op { return op{in: linInput{kind: linDone, key: key}} }
	length := func(n int) op { return op{in: linInput{kind: linLen, key: -1}, out: linOutput{n: n}} }
	requeues := func(key int8, n int) op {
		return op{in: linInput{kind: linNumRequeues, key: key}, out: linOutput{n: n}}
	}
	rateLimited := func(key int8) op { return op{in: linInput{kind: linAddRateLimited, key: key}} }
	shutDown := op{in: linInput{kind: linShutDown, key: -1}}
	drain := func(overlap int) []op {
		return []op{{in: linInput{kind: linDrainBegin, key: -1}, overlap: overlap}, {in: linInput{kind: linDrainEnd, key: -1}, overlap: overlap}}
	}
	overlapping := func(o op, by int) op { o.overlap = by; return o }

	tests := []struct {
		name  string
		steps [][]op // steps[i] run at time i*10; the operations of one step overlap
		want  bool
	}{
		{"fifo", [][]op{{add(0)}, {add(1)}, {add(0)}, {length(2)}, {get(0)}, {get(1)}, {length(0)}}, true},
		{"fifo inverted", [][]op{{add(0)}, {add(1)}, {get(1)}}, false},
		{"concurrent adds in either order", [][]op{{add(0), add(1)}, {get(1)}, {get(0)}}, true},
		{"dirty item queued again by Done", [][]op{{add(0)}, {get(0)}, {add(0)}, {length(0)}, {done(0)}, {length(1)}, {get(0)}}, true},
		{"dirty item handed out twice", [][]op{{add(0)}, {get(0)}, {add(0)}, {get(0)}}, false},
		{"dirty mark lost", [][]op{{add(0)}, {get(0)}, {add(0)}, {done(0)}, {length(0)}}, false},
		{"Len 0 after own Add", [][]op{{add(0)}, {length(0)}}, false},
		{"Len during Add", [][]op{{overlapping(add(0), 10)}, {length(0)}}, true},
		{"Get after shutdown drains", [][]op{{add(0)}, {shutDown}, {get(0)}, {getShutdown}}, true},
		{"shutdown Get while queued", [][]op{{add(0)}, {shutDown}, {getShutdown}}, false},
		{"Add after shutdown ignored", [][]op{{shutDown}, {add(0)}, {length(0)}, {getShutdown}}, true},
		{"rate limited after shutdown records nothing", [][]op{{shutDown}, {rateLimited(0)}, {requeues(0, 0)}}, true},
		{"rate limited dropped yet counted", [][]op{{overlapping(rateLimited(0), 10), shutDown}, {getShutdown}, {requeues(0, 1)}}, false},
		{"drain waits for Done", [][]op{{add(0)}, {get(0)}, append(drain(10), done(0))}, true},
		{"drain ends while processing", [][]op{{add(0)}, {get(0)}, drain(0), {done(0)}}, false},
		{"drain released by ShutDown", [][]op{{add(0)}, {get(0)}, append(drain(10), shutDown)}, true},
		{"drain ends while queued", [][]op{{add(0)}, drain(0), {get(0)}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ops := linStepOps(tt.steps)
			assert.Equalf(t, tt.want, checkLinHistory(t, linModel, ops), "history:\n%s", formatLinHistory(ops))
		})
	}
}

// TestLinearizabilityParkingModel checks the parking rules of the model on
// hand-written histories, among them the lost wakeup: a wake between an
// item's Get and its park must not leave it parked.
func TestLinearizabilityParkingModel(t *testing.T) {
	type op = linStep
	add := func(key int8) op { return op{in: linInput{kind: linAdd, key: key}} }
	get := func(key int8) op { return op{in: linInput{kind: linGet, key: -1}, out: linOutput{key: key}} }
	done := func(key int8) op { return op{in: linInput{kind: linDone, key: key}} }
	length := func(n int) op { return op{in: linInput{kind: linLen, key: -1}, out: linOutput{n: n}} }
	park := func(key int8, events uint8) op { return op{in: linInput{kind: linPark, key: key, events: events}} }
	wake := func(events uint8, n int) op {
		return op{in: linInput{kind: linWake, key: -1, events: events}, out: linOutput{n: n}}
	}
	wakeItem := func(key int8, ok bool) op {
		o := op{in: linInput{kind: linWakeItem, key: key}}
		if ok {
			o.out.n = 1
		}
		return o
	}
	remove := func(key int8, ok bool) op {
		o := op{in: linInput{kind: linRemove, key: key}}
		if ok {
			o.out.n = 1
		}
		return o
	}
	shutDown := op{in: linInput{kind: linShutDown, key: -1}}
	// parked returns the steps that park key until events, then after.
	parked := func(key int8, events uint8, after ...[]op) [][]op {
		return append([][]op{{add(key)}, {get(key)}, {park(key, events)}, {done(key)}}, after...)
	}
	tests := []struct {
		name  string
		steps [][]op
		want  bool
	}{
		{"parked items are not queued", [][]op{{add(0)}, {get(0)}, {park(0, 1)}, {done(0)}, {length(0)}}, true},
		{"a wake queues them", [][]op{{add(0)}, {get(0)}, {park(0, 1)}, {done(0)}, {wake(1, 1)}, {length(1)}, {get(0)}}, true},
		{"another event does not", [][]op{{add(0)}, {get(0)}, {park(0, 1)}, {done(0)}, {wake(2, 0)}, {length(0)}}, true},
		{"wake after Get, before Park: lost", [][]op{{add(0)}, {get(0)}, {wake(1, 0)}, {park(0, 1)}, {done(0)}, {length(0)}}, false},
		{"wake after Get, before Park: queued at Done", [][]op{{add(0)}, {get(0)}, {wake(1, 0)}, {park(0, 1)}, {done(0)}, {length(1)}}, true},
		{"wake before Get is waited for", [][]op{{wake(1, 0)}, {add(0)}, {get(0)}, {park(0, 1)}, {done(0)}, {length(0)}}, true},
		{"wake between Park and Done", [][]op{{add(0)}, {get(0)}, {park(0, 1)}, {wake(1, 1)}, {length(0)}, {done(0)}, {length(1)}}, true},
		{"a wake queues in park order", slices.Concat(parked(1, 1), parked(0, 1, []op{wake(1, 2)}, []op{get(1)}, []op{get(0)})), true},
		{"a wake queues in key order", slices.Concat(parked(1, 1), parked(0, 1, []op{wake(1, 2)}, []op{get(0)})), false},
		{"an add queues a parked item", parked(0, 1, []op{add(0)}, []op{length(1)}, []op{wake(1, 0)}), true},
		{"an add since Get wins", [][]op{{add(0)}, {get(0)}, {add(0)}, {park(0, 1)}, {done(0)}, {length(1)}}, true},
		{"WakeItem", parked(0, 1, []op{wakeItem(0, true)}, []op{wakeItem(0, false)}, []op{get(0)}), true},
		{"Remove", parked(0, 1, []op{remove(0, true)}, []op{wake(1, 0)}, []op{length(0)}), true},
		{"shutdown drops parked items", parked(0, 1, []op{shutDown}, []op{wake(1, 0)}, []op{length(0)}), true},
		{"concurrent wake and park: either order", [][]op{{add(0)}, {get(0)}, {park(0, 1), wake(1, 1)}, {done(0)}, {length(1)}}, true},
		{"concurrent wake and park: never lost", [][]op{{add(0)}, {get(0)}, {park(0, 1), wake(1, 0)}, {done(0)}, {length(0)}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ops := linStepOps(tt.steps)
			assert.Equalf(t, tt.want, checkLinHistory(t, linModel, ops), "history:\n%s", formatLinHistory(ops))
		})
	}
}

// linStep is one operation of a hand-written history.
type linStep struct {
	in      linInput
	out     linOutput
	overlap int // extra length of the interval, to overlap later operations
}

// linStepOps turns a hand-written history into operations: those of
// steps[i] start at time i*10, overlap each other, and return at i*10+5
// plus their overlap.
func linStepOps(steps [][]linStep) []porcupine.Operation {
	var ops []porcupine.Operation
	for i, step := range steps {
		for c, o := range step {
			ops = append(ops, porcupine.Operation{
				ClientId: c, Input: o.in, Output: o.out,
				Call: int64(i * 10), Return: int64(i*10 + 5 + o.overlap),
			})
		}
	}
	return ops
}

// TestLinearizabilityCheckerCatchesBrokenPriorityQueues shows that the
// priority histories can fail: they must accept a reference priority queue
// and catch three broken ones, each within linCatchLimit histories.
func TestLinearizabilityCheckerCatchesBrokenPriorityQueues(t *testing.T) {
	tests := []struct {
		name string
		fair bool
		bug  linPrioBug
	}{
		{"reference", false, linPrioNoBug},
		{"reference with fairness", true, linPrioNoBug},
		{"raise keeps its place", false, linBugRaiseKeepsPlace},
		{"requeued at priority 0", false, linBugRequeueAtZero},
		{"fairness ignored", true, linBugUnfair},
	}
	seed := linBaseSeed(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkBrokenQueue(t, linPrioModelFor(tt.fair), seed, tt.bug != linPrioNoBug, true, func() linSubject {
				q := newLinRefPriorityQueue(tt.fair, tt.bug)
				return linSubject{q: q, rl: q, ext: q, prio: q}
			})
		})
	}
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
