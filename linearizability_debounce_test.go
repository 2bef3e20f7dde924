package workqueue

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

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
