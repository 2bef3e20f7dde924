package workqueue

import (
	"fmt"
	"math/bits"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/assert"
)

// The sequential specification of the queues for the linearizability test:
// the operations a history records (linInput, linOutput), the sequential
// FIFO queue (linState) with what every model shares (linCommon: the
// processing and dirty keys, failures, shutdown and parking), and the
// porcupine model built from them. The priority queue's specification is in
// linearizability_priority_test.go.

// linMaxKeys is the most keys a history uses; the model keeps one bit per key.
const linMaxKeys = 3

var linKeyNames = [linMaxKeys]string{"a", "b", "c"}

// linKeyIndex returns the index of a key, -1 for the zero value (what Get
// returns at shutdown) and -2 for anything else, which no step accepts.
func linKeyIndex(item string) int8 {
	if item == "" {
		return -1
	}
	for i, name := range linKeyNames {
		if item == name {
			return int8(i)
		}
	}
	return -2
}

type linKind uint8

const (
	linAdd linKind = iota
	linAddAfterZero
	linAddAfterNegative
	linAddRateLimited
	linForget
	linNumRequeues
	linLen
	linShuttingDown
	linGet
	linDone
	linShutDown
	// linDrain is what a plan asks for; the history records it as the two
	// operations below.
	linDrain
	linDrainBegin
	linDrainEnd
	// linGetContext is GetContext with a context that has ended already or
	// ends within microseconds.
	linGetContext
	linRemove
	// linAddPriority is a priority queue's AddWithOpts with the input's
	// priority.
	linAddPriority
	// linPark is Park, which records no failure, even on a queue with a
	// rate limiter; linWake is Wake of the one event in the input's events.
	linPark
	linWake
	linWakeItem
	// linSetGroupLimit is SetGroupLimit of the group of a and b, with
	// the input's prio as the limit.
	linSetGroupLimit
	// linRescheduleZero and linRescheduleLater are Reschedule with no
	// delay and with an hour, which the histories' clock never reaches
	// (linDebounced).
	linRescheduleZero
	linRescheduleLater
)

var linKindNames = [...]string{
	linAdd: "Add", linAddAfterZero: "AddAfter0", linAddAfterNegative: "AddAfter-1", linAddRateLimited: "AddRateLimited",
	linForget: "Forget", linNumRequeues: "NumRequeues", linLen: "Len", linShuttingDown: "ShuttingDown",
	linGet: "Get", linDone: "Done", linShutDown: "ShutDown", linDrain: "ShutDownWithDrain",
	linDrainBegin: "ShutDownWithDrain(begin)", linDrainEnd: "ShutDownWithDrain(end)",
	linGetContext: "GetContext", linRemove: "Remove", linAddPriority: "AddWithOpts",
	linPark: "Park", linWake: "Wake", linWakeItem: "WakeItem", linSetGroupLimit: "SetGroupLimit",
	linRescheduleZero: "Reschedule0", linRescheduleLater: "Reschedule1h",
}

// linEventNames name the events of the parking histories, by bit.
var linEventNames = [...]string{"e0", "e1"}

// linEvents returns the names of the events in mask.
func linEvents(mask uint8) []string {
	var names []string
	for i, name := range linEventNames {
		if mask&(1<<i) != 0 {
			names = append(names, name)
		}
	}
	return names
}

// linInput is an operation's input: its kind and key, -1 for none, for
// linAddPriority the priority, and for a park or a wake the events, a bit
// per event. In a worker's plan a Done or a Park has key -1: it marks the
// oldest item the worker holds.
type linInput struct {
	kind   linKind
	key    int8
	prio   int8
	events uint8
}

// linOutput is what an operation returned: Get's and GetContext's item
// (key) and shutdown (for GetContext: ErrShutDown), ShuttingDown's result
// (shutdown), Len's and NumRequeues' result and whether Remove removed
// anything (n), and whether GetContext returned its context's error
// (cancelled), and the priority a priority queue's Get handed the item out
// at (prio; -1 where the call does not say).
type linOutput struct {
	key       int8
	shutdown  bool
	n         int
	cancelled bool
	prio      int8
}

func linKeyName(key int8) string {
	switch {
	case key >= 0:
		return linKeyNames[key]
	case key == -1:
		return `""`
	default:
		return "?"
	}
}

func linDescribe(in linInput, out linOutput) string {
	name := linKindNames[in.kind]
	switch in.kind {
	case linGet, linGetContext:
		switch {
		case out.shutdown:
			return fmt.Sprintf("%s() -> %s, shutdown", name, linKeyName(out.key))
		case out.cancelled:
			return fmt.Sprintf("%s() -> %s, cancelled", name, linKeyName(out.key))
		case out.prio >= 0 && in.kind == linGet:
			return fmt.Sprintf("GetWithPriority() -> %s, %d", linKeyName(out.key), out.prio)
		}
		return fmt.Sprintf("%s() -> %s", name, linKeyName(out.key))
	case linAddPriority:
		return fmt.Sprintf("AddWithOpts(Priority %d, %s)", in.prio, linKeyName(in.key))
	case linSetGroupLimit:
		return fmt.Sprintf("SetGroupLimit(ab, %d)", in.prio)
	case linRemove, linWakeItem:
		return fmt.Sprintf("%s(%s) -> %v", name, linKeyName(in.key), out.n == 1)
	case linPark:
		return fmt.Sprintf("Park(%s, %s)", linKeyName(in.key), strings.Join(linEvents(in.events), ", "))
	case linWake:
		return fmt.Sprintf("Wake(%s) -> %d", strings.Join(linEvents(in.events), ", "), out.n)
	case linLen:
		return fmt.Sprintf("Len() -> %d", out.n)
	case linNumRequeues:
		return fmt.Sprintf("NumRequeues(%s) -> %d", linKeyName(in.key), out.n)
	case linShuttingDown:
		return fmt.Sprintf("ShuttingDown() -> %v", out.shutdown)
	case linShutDown, linDrain, linDrainBegin, linDrainEnd:
		return name + "()"
	}
	return fmt.Sprintf("%s(%s)", name, linKeyName(in.key))
}

// linState is the sequential queue: a value, so that porcupine can keep
// states and compare them with ==. An item is in at most one of the FIFO and
// the processing set; dirty items are processing items added again.
type linState struct {
	linCommon
	fifo   [linMaxKeys]int8
	queued int8
	// custom is set for a queue with custom storage, where a removed item
	// stays in the FIFO, hidden (bit per key), until a Get passes it or an
	// add shows it again in its old place.
	custom bool
	hidden uint8
}

// linCommon is what the sequential queues of every model keep apart from
// their order: the keys being processed, those added again meanwhile, the
// failures and the shutdown.
type linCommon struct {
	processing uint8 // bit per key
	dirty      uint8 // bit per key
	failures   [linMaxKeys]uint8
	shutdown   bool
	released   bool // a ShutDown has released every drain

	// parks are the parks, by the specification the model walks apply
	// too.
	parks parkSpec

	// grouped is set for a queue with group limits: a and b form a
	// group whose limit is groupLimit (0 for none), c has no group.
	grouped    bool
	groupLimit int8
}

// linGroupKeys is the bit mask of the keys of the limited group.
const linGroupKeys = 0b011

// eligible reports whether Get may hand out key: its group, if it has
// one, has a free slot.
func (c *linCommon) eligible(key int8) bool {
	return !c.grouped || linGroupKeys&(1<<key) == 0 || c.groupLimit <= 0 || bits.OnesCount8(c.processing&linGroupKeys) < int(c.groupLimit)
}

// handOut marks key, just handed out by Get, as processing.
func (c *linCommon) handOut(key int8) {
	c.processing |= 1 << key
	c.parks.handOut(int(key))
}

// unpark ends key's park, if it has one, and reports whether it was
// parked since its Done and whether it was parked by its worker.
func (c *linCommon) unpark(key int8) (parked, parking bool) {
	had, settled := c.parks.drop(int(key))
	return settled, had && !settled
}

// park applies a worker's Park(key, events): nothing after a shutdown, for
// a key not processing, or for one added again since its Get; a Done that
// queues it again if one of events woke since its Get; otherwise a park
// that takes effect at Done, replacing one asked for before.
func (c *linCommon) park(key int8, events uint8) {
	bit := uint8(1) << key
	if c.shutdown || c.processing&bit == 0 || c.dirty&bit != 0 {
		return
	}
	if c.parks.park(int(key), events) {
		c.dirty |= bit
	}
}

// wake applies Wake(events): it ends the parks waiting for them, in the
// order they were asked for, returning the keys parked since their Done
// (to queue, in that order) and the number of parks it ended. A key still
// processing is queued again at its Done.
func (c *linCommon) wake(events uint8) (woken []int8, n int) {
	if c.shutdown {
		return nil, 0
	}
	ended := c.parks.wake(events)
	for _, p := range ended {
		if p.settled {
			woken = append(woken, int8(p.item))
		} else {
			c.dirty |= 1 << p.item
		}
	}
	return woken, len(ended)
}

// wakeItem applies WakeItem(key): it ends key's park, if it has one, and
// reports whether it did and whether to queue key now (parked since its
// Done). A key still processing is queued again at its Done.
func (c *linCommon) wakeItem(key int8) (woken, queue bool) {
	woken, settled := c.parks.wakeItem(int(key))
	if woken && !settled {
		c.dirty |= 1 << key
	}
	return woken, settled
}

// dropParks is the shutdown's part: every park ends, and nothing is
// queued.
func (c *linCommon) dropParks() { c.parks.shutDown() }

// settle makes the park of key, whose Done ends its processing, take
// effect.
func (c *linCommon) settle(key int8) { c.parks.done(int(key)) }

// stepCommon applies in if it does not depend on the order, and reports
// whether it did and whether out is what the queue could have returned.
// queued is the number of items Get can hand out.
func (c *linCommon) stepCommon(in linInput, out linOutput, queued int) (handled, ok bool) {
	switch in.kind {
	case linForget:
		c.failures[in.key] = 0
	case linNumRequeues:
		return true, out.n == int(c.failures[in.key])
	case linLen:
		return true, out.n == queued
	case linShuttingDown:
		return true, out.shutdown == c.shutdown
	case linShutDown:
		c.shutdown, c.released = true, true
		c.dropParks()
	case linDrainBegin:
		c.shutdown = true
		c.dropParks()
	case linPark:
		c.park(in.key, in.events)
	case linDrainEnd:
		return true, c.released || c.shutdown && queued == 0 && c.processing == 0
	case linGet, linGetContext:
		switch {
		case out.cancelled:
			return true, in.kind == linGetContext && out.key == -1 && !out.shutdown
		case out.shutdown:
			return true, out.key == -1 && queued == 0 && c.shutdown
		}
		return false, false
	default:
		return false, false
	}
	return true, true
}

// validKey reports whether in names a key where it must.
func validKey(in linInput) bool {
	switch in.kind {
	case linAdd, linAddAfterZero, linAddAfterNegative, linAddRateLimited, linForget, linNumRequeues, linDone, linRemove, linAddPriority,
		linPark, linWakeItem:
		return in.key >= 0 && in.key < linMaxKeys
	}
	return true
}

// hash mixes c into h.
func (c linCommon) hash(h uint64) uint64 {
	parked, parking := c.parks.masks()
	h ^= uint64(c.processing)<<40 | uint64(c.dirty)<<44 | uint64(parked)<<32 | uint64(parking)<<36
	for i, n := range c.failures {
		h ^= uint64(n) << (48 + 4*i)
	}
	if c.shutdown {
		h ^= 1 << 62
	}
	if c.released {
		h ^= 1 << 63
	}
	return h ^ uint64(c.groupLimit)<<28
}

// describe writes the processing keys, each with pending(key) if it was
// added again meanwhile, then the failures and the shutdown.
func (c linCommon) describe(b *strings.Builder, pending func(key int8) string) {
	b.WriteString(" processing {")
	sep := ""
	for key := range int8(linMaxKeys) {
		if c.processing&(1<<key) != 0 {
			b.WriteString(sep + linKeyNames[key])
			if c.dirty&(1<<key) != 0 {
				b.WriteString(pending(key))
			}
			sep = " "
		}
	}
	b.WriteString("}")
	for key, n := range c.failures {
		if n > 0 {
			fmt.Fprintf(b, " failures(%s)=%d", linKeyNames[key], n)
		}
	}
	if c.parks.parks > 0 {
		_, parking := c.parks.masks()
		b.WriteString(" parks [")
		for i, key := range c.parks.order[:c.parks.parks] {
			if i > 0 {
				b.WriteString(" ")
			}
			b.WriteString(linKeyNames[key] + "(" + strings.Join(linEvents(c.parks.events[key]), ",") + ")")
			if parking&(1<<key) != 0 {
				b.WriteString("@Done")
			}
		}
		b.WriteString("]")
	}
	if c.released {
		b.WriteString(" shut down")
	} else if c.shutdown {
		b.WriteString(" draining")
	}
}

// visible returns the number of items Get can hand out.
func (s linState) visible() int {
	return int(s.queued) - bits.OnesCount8(s.hidden)
}

func (s linState) add(key int8) linState {
	bit := uint8(1) << key
	if !s.shutdown {
		s.unpark(key)
	}
	switch {
	case s.shutdown:
	case s.processing&bit != 0:
		s.dirty |= bit
	case slices.Contains(s.fifo[:s.queued], key):
		s.hidden &^= bit
	default:
		s.fifo[s.queued] = key
		s.queued++
	}
	return s
}

// step applies one operation with its output to s. It reports false if the
// queue could not have returned out at this point.
func (s linState) step(in linInput, out linOutput) (bool, linState) {
	if !validKey(in) {
		return false, s // a Done of something no Get returned
	}
	if handled, ok := s.stepCommon(in, out, s.visible()); handled {
		return ok, s
	}
	key := in.key
	switch in.kind {
	case linAdd, linAddAfterZero, linAddAfterNegative:
		return true, s.add(key)
	case linAddPriority:
		return false, s // not an operation of this model's queues
	case linAddRateLimited:
		if s.shutdown {
			return true, s // the limiter is not consulted
		}
		s.failures[key]++
		return true, s.add(key)
	case linWake:
		woken, n := s.wake(in.events)
		for _, k := range woken {
			s = s.add(k)
		}
		return out.n == n, s
	case linWakeItem:
		woken, queue := s.wakeItem(key)
		if queue {
			s = s.add(key)
		}
		return out.n == 1 == woken, s
	case linRemove:
		bit := uint8(1) << key
		parked, parking := s.unpark(key)
		removed := s.dirty&bit != 0 || parked || parking
		s.dirty &^= bit
		if i := slices.Index(s.fifo[:s.queued], key); i >= 0 && s.hidden&bit == 0 {
			if s.custom {
				s.hidden |= bit
			} else {
				s = s.drop(i)
			}
			removed = true
		}
		s.failures[key] = 0
		return out.n == 1 == removed, s
	case linGet, linGetContext:
		for s.queued > 0 && s.hidden&(1<<s.fifo[0]) != 0 { // Get passes removed items
			s.hidden &^= 1 << s.fifo[0]
			s = s.drop(0)
		}
		i := slices.IndexFunc(s.fifo[:s.queued], s.eligible) // the first whose group has a free slot
		if i < 0 || s.fifo[i] != out.key {
			return false, s
		}
		s = s.drop(i)
		s.handOut(out.key)
		return true, s
	case linSetGroupLimit:
		s.groupLimit = in.prio
		return true, s
	case linDone:
		bit := uint8(1) << key
		if s.processing&bit == 0 {
			return true, s
		}
		s.settle(key)
		s.processing &^= bit
		if s.dirty&bit != 0 {
			s.dirty &^= bit
			s.fifo[s.queued] = key
			s.queued++
		}
		return true, s
	}
	panic(fmt.Sprintf("linState.step: unexpected operation %v", in.kind))
}

// drop takes the item at position i out of the FIFO.
func (s linState) drop(i int) linState {
	copy(s.fifo[i:], s.fifo[i+1:s.queued])
	s.queued--
	s.fifo[s.queued] = 0
	return s
}

func (s linState) hash() uint64 {
	h := uint64(s.queued) | uint64(s.hidden)<<8
	for i := range linMaxKeys {
		h |= uint64(s.fifo[i]&3) << (16 + 2*i)
	}
	return s.linCommon.hash(h)
}

func (s linState) String() string {
	var b strings.Builder
	b.WriteString("queued [")
	for i, key := range s.fifo[:s.queued] {
		if i > 0 {
			b.WriteString(" ")
		}
		b.WriteString(linKeyNames[key])
		if s.hidden&(1<<key) != 0 {
			b.WriteString("(removed)")
		}
	}
	b.WriteString("]")
	s.describe(&b, func(int8) string { return "*" })
	return b.String()
}

// linModel is the sequential specification for porcupine, and
// linCustomModel the same for a queue with custom storage.
var (
	linModel       = linModelFor(false)
	linCustomModel = linModelFor(true)
)

func linModelFor(custom bool) porcupine.Model { return linModelOf(linState{custom: custom}) }

// linGroupModel is the specification of a queue with group limits: a and
// b share a group of limit 1 at first.
var linGroupModel = linModelOf(linState{linCommon: linCommon{grouped: true, groupLimit: 1}})

// linSpec is a sequential queue of the models: a comparable value.
type linSpec[S any] interface {
	comparable
	step(in linInput, out linOutput) (bool, S)
	hash() uint64
	String() string
}

// linModelOf returns the porcupine model that starts from init.
func linModelOf[S linSpec[S]](init S) porcupine.Model {
	return porcupine.Model{
		Init: func() any { return init },
		Step: func(state, input, output any) (bool, any) {
			return state.(S).step(input.(linInput), output.(linOutput))
		},
		Hash: func(state any) uint64 { return state.(S).hash() },
		DescribeOperation: func(input, output any) string {
			return linDescribe(input.(linInput), output.(linOutput))
		},
		DescribeState: func(state any) string { return state.(S).String() },
	}
}

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

// The linearizability specification of Debounce and Reschedule on a clock
// that never moves: the histories' Debounce waits an hour, so a debounced
// add, like a Reschedule of an hour, leaves its key waiting until a call
// takes it back (Remove, a Reschedule of no delay, AddRateLimited, whose
// delay is zero) or a shutdown drops it. linDebounced wraps a sequential
// queue of the other models with the set of waiting keys.

// linDebounceQuiet is the histories' Debounce.Quiet; their clock never
// reaches it.
const linDebounceQuiet = time.Hour

// debounceConfig returns the setup's Debounce.
func (c linSetup) debounceConfig() Debounce {
	if !c.debounce {
		return Debounce{}
	}
	return Debounce{Quiet: linDebounceQuiet}
}

// linDebounceInner is what linDebounced needs of the queue it wraps.
type linDebounceInner[S any] interface {
	linSpec[S]
	// holdsReady reports whether key is queued, or processing and to be
	// queued again at Done.
	holdsReady(key int8) bool
	// withoutPark returns the state with key's park ended and nothing
	// queued for it: what an add does first on the priority queue.
	withoutPark(key int8) S
	isShutdown() bool
}

func (s linState) holdsReady(key int8) bool {
	bit := uint8(1) << key
	return s.dirty&bit != 0 || slices.Contains(s.fifo[:s.queued], key) && s.hidden&bit == 0
}

func (s linState) withoutPark(key int8) linState { s.unpark(key); return s }
func (s linState) isShutdown() bool              { return s.shutdown }

func (s linPrioState) holdsReady(key int8) bool {
	return s.dirty&(1<<key) != 0 || s.isQueued(key)
}

func (s linPrioState) withoutPark(key int8) linPrioState { s.unpark(key); return s }
func (s linPrioState) isShutdown() bool                  { return s.shutdown }

// linDebounced is a sequential queue with Debounce on a clock that never
// moves. prio selects the priority queue's rules, where a key waits in the
// core: an add ends its park first, a Reschedule of a ready key changes
// nothing, and a Park of a waiting key does nothing. On the delaying
// layer the waiting keys are apart from the queue below, whose parks and
// queued keys they leave alone.
type linDebounced[S linDebounceInner[S]] struct {
	inner   S
	waiting uint8 // bit per key
	prio    bool
}

func (s linDebounced[S]) step(in linInput, out linOutput) (bool, linDebounced[S]) {
	key := in.key
	var bit uint8
	if key >= 0 && key < linMaxKeys {
		bit = 1 << key
	}
	switch in.kind {
	case linAdd, linAddAfterZero, linAddAfterNegative, linRescheduleLater:
		if bit == 0 {
			return false, s
		}
		debounced := in.kind != linRescheduleLater
		if s.inner.isShutdown() || s.inner.holdsReady(key) && (debounced || s.prio) {
			return true, s
		}
		if s.prio {
			s.inner = s.inner.withoutPark(key)
		}
		s.waiting |= bit
		return true, s
	case linRescheduleZero:
		if bit == 0 {
			return false, s
		}
		if !s.inner.isShutdown() {
			s.waiting &^= bit
		}
		ok, inner := s.inner.step(linInput{kind: linAdd, key: key}, out)
		s.inner = inner
		return ok, s
	case linAddRateLimited:
		if bit != 0 && !s.inner.isShutdown() {
			s.waiting &^= bit // its zero delay wins
		}
	case linRemove:
		if bit == 0 {
			return false, s
		}
		removedInner, inner := s.inner.step(in, linOutput{n: 1})
		removed := removedInner || s.waiting&bit != 0
		s.inner, s.waiting = inner, s.waiting&^bit
		return out.n == 1 == removed, s
	case linPark:
		if s.prio && s.waiting&bit != 0 {
			return true, s
		}
	case linShutDown, linDrainBegin:
		s.waiting = 0
	}
	ok, inner := s.inner.step(in, out)
	s.inner = inner
	return ok, s
}

func (s linDebounced[S]) hash() uint64 { return s.inner.hash() ^ uint64(s.waiting)<<56 }

func (s linDebounced[S]) String() string {
	var b strings.Builder
	b.WriteString(s.inner.String())
	if s.waiting != 0 {
		b.WriteString(" waiting {")
		sep := ""
		for key := range int8(linMaxKeys) {
			if s.waiting&(1<<key) != 0 {
				b.WriteString(sep + linKeyNames[key])
				sep = " "
			}
		}
		b.WriteString("}")
	}
	return b.String()
}

// linDebounceModel returns the specification of c's queue with Debounce.
func linDebounceModel(c linSetup) porcupine.Model {
	switch {
	case c.priority:
		return linModelOf(linDebounced[linPrioState]{inner: newLinPrioState(c.fairness), prio: true})
	case c.custom:
		panic(fmt.Sprintf("linDebounceModel: no model for %+v", c))
	}
	return linModelOf(linDebounced[linState]{})
}
