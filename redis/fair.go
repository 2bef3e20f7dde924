package redisqueue

import (
	"strconv"
)

// fairUnit is fair_seq's FAIR_UNIT: the span of sequence numbers in which
// every flow of weight 1 gets one key queued. It is divisible by every
// weight from 1 to 10, so that their shares are exact.
const fairUnit = 2520

// fairArg is the argument the add and done scripts take for
// Options.Fairness: "1" when it is set, else "0".
func (q *Queue[T]) fairArg() string {
	if q.fairness == nil {
		return "0"
	}
	return "1"
}

// flowOf returns key's "STEP FLOW" for FLOWS (see prelude.lua): its
// fairness key, from Options.Fairness of the item it encodes, and the
// step of that key's weight. A key the codec cannot decode is a flow of
// its own, of weight 1.
func (q *Queue[T]) flowOf(key string) string {
	flow, weight := "\x00"+key, 1
	if item, err := q.codec.Decode(key); err == nil {
		flow = q.fairness(item)
		if q.fairWeight != nil {
			weight = q.fairWeight(flow)
		}
	}
	step := fairUnit / min(max(weight, 1), fairUnit)
	return strconv.Itoa(step) + " " + flow
}

// doneScript returns the done script of the handle's queue: the one that
// queues again fairly with Options.Fairness.
func (q *Queue[T]) doneScript() *script {
	if q.fairness == nil {
		return doneScript
	}
	return fairDoneScript
}
