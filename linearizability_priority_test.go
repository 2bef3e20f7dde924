package workqueue

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/assert"
)

// The sequential specification of TypedPriorityQueue for the
// linearizability test: the histories of linearizability_test.go, with adds
// at priorities 0 to 2 and, with fairness, two fairness keys.

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

// linPrioState is the sequential priority queue: a value that porcupine
// compares with ==. fifo lists the queued keys in the order they joined
// the level of their priority: the first of a level is handed out first,
// or, with fairness, the first of the key whose turn it is at that level.
type linPrioState struct {
	linCommon
	fifo   [linMaxKeys]int8
	queued int8
	// prio is the priority of each key's pending add: the one it is
	// queued at, or, for a processing key added again, the one Done
	// queues it at: the highest asked for meanwhile.
	prio [linMaxKeys]int8
	// rot holds, with fairness, each level's fairness keys that have
	// items queued there, the next in turn first; -1 pads.
	rot  [linLevels][2]int8
	fair bool
}

func newLinPrioState(fair bool) linPrioState {
	s := linPrioState{fair: fair}
	for l := range s.rot {
		s.rot[l] = [2]int8{-1, -1}
	}
	return s
}

func (s linPrioState) isQueued(key int8) bool { return slices.Contains(s.fifo[:s.queued], key) }

// queuedAt reports whether any key of tenant that Get may hand out is
// queued at level.
func (s linPrioState) queuedAt(level, tenant int8) bool {
	for _, k := range s.fifo[:s.queued] {
		if s.prio[k] == level && linTenant(k) == tenant && s.eligible(k) {
			return true
		}
	}
	return false
}

// reconcile brings the rotations up to date after a change: a tenant with
// nothing left at a level that Get may hand out leaves the level's
// rotation, and one that got something joins at the back. (In these
// histories no change makes two tenants join one level at once.)
func (s linPrioState) reconcile() linPrioState {
	if !s.fair {
		return s
	}
	for level := range int8(linLevels) {
		rot := &s.rot[level]
		for i := 1; i >= 0; i-- {
			if rot[i] >= 0 && !s.queuedAt(level, rot[i]) {
				copy(rot[i:], rot[i+1:])
				rot[1] = -1
			}
		}
		for tenant := range int8(2) {
			if s.queuedAt(level, tenant) && rot[0] != tenant && rot[1] != tenant {
				if rot[0] < 0 {
					rot[0] = tenant
				} else {
					rot[1] = tenant
				}
			}
		}
	}
	return s
}

// enqueue queues key at its priority: at the back of its level, and its
// tenant at the back of the level's rotation if it had nothing queued
// there.
func (s linPrioState) enqueue(key int8) linPrioState {
	s.fifo[s.queued] = key
	s.queued++
	return s.reconcile()
}

// dequeue takes the queued key out; a tenant left with nothing queued at
// the level leaves its rotation.
func (s linPrioState) dequeue(key int8) linPrioState {
	i := slices.Index(s.fifo[:s.queued], key)
	copy(s.fifo[i:], s.fifo[i+1:s.queued])
	s.queued--
	s.fifo[s.queued] = 0
	return s.reconcile()
}

// next returns the key Get hands out and the state after the rotation
// turned for it, before the key leaves the queue; at least one is queued.
func (s linPrioState) next() (int8, linPrioState) {
	level := int8(-1)
	for _, k := range s.fifo[:s.queued] {
		if s.eligible(k) {
			level = max(level, s.prio[k])
		}
	}
	if level < 0 {
		return -1, s
	}
	tenant := int8(-1)
	if s.fair {
		tenant = s.rot[level][0]
		if s.rot[level][1] >= 0 { // its turn is over: to the back
			s.rot[level] = [2]int8{s.rot[level][1], tenant}
		}
	}
	for _, k := range s.fifo[:s.queued] {
		if s.prio[k] == level && (tenant < 0 || linTenant(k) == tenant) && s.eligible(k) {
			return k, s
		}
	}
	panic("linPrioState.next: the rotation names a key with nothing queued")
}

func (s linPrioState) add(key, priority int8) linPrioState {
	bit := uint8(1) << key
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

// get hands out the next key, which must be want at priority prio (-1:
// any), and reports whether it could.
func (s linPrioState) get(want, prio int8) (bool, linPrioState) {
	if s.queued == 0 {
		return false, s
	}
	key, s := s.next()
	if key < 0 || key != want || prio >= 0 && prio != s.prio[key] {
		return false, s
	}
	s.handOut(key) // first: the group's slots count it when its tenant leaves the rotations
	s = s.dequeue(key)
	return true, s
}

func (s linPrioState) done(key int8) linPrioState {
	bit := uint8(1) << key
	if s.processing&bit == 0 {
		return s
	}
	s.settle(key)
	s.processing &^= bit
	if s.dirty&bit != 0 {
		s.dirty &^= bit
		s = s.enqueue(key)
	}
	return s.reconcile() // a slot freed: the group's tenant may join
}

func (s linPrioState) remove(key int8) (bool, linPrioState) {
	bit := uint8(1) << key
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
func (s linPrioState) step(in linInput, out linOutput) (bool, linPrioState) {
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
		return s.get(out.key, out.prio)
	case linDone:
		return true, s.done(key)
	case linSetGroupLimit:
		s.groupLimit = in.prio
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
	panic(fmt.Sprintf("linPrioState.step: unexpected operation %v", in.kind))
}

func (s linPrioState) hash() uint64 {
	h := uint64(s.queued)
	for i := range linMaxKeys {
		h |= uint64(s.fifo[i]&3)<<(4+2*i) | uint64(s.prio[i]&3)<<(10+2*i)
	}
	for l := range s.rot {
		h |= uint64(s.rot[l][0]+1)<<(16+4*l) | uint64(s.rot[l][1]+1)<<(18+4*l)
	}
	return s.linCommon.hash(h)
}

func (s linPrioState) String() string {
	var b strings.Builder
	b.WriteString("queued [")
	for i, key := range s.fifo[:s.queued] {
		if i > 0 {
			b.WriteString(" ")
		}
		fmt.Fprintf(&b, "%s@%d", linKeyNames[key], s.prio[key])
	}
	b.WriteString("]")
	if s.fair {
		for l, r := range s.rot {
			if r[0] >= 0 {
				fmt.Fprintf(&b, " turns@%d %v", l, r)
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

func linPrioModelFor(fair bool) porcupine.Model { return linModelOf(newLinPrioState(fair)) }

// linPrioGroupModelFor is the specification of a priority queue with
// group limits; see linGroupModel.
func linPrioGroupModelFor(fair bool) porcupine.Model {
	s := newLinPrioState(fair)
	s.grouped, s.groupLimit = true, 1
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
