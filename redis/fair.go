package redisqueue

import (
	"strconv"
)

// fairUnit is fair_seq's FAIR_UNIT: the span of sequence numbers in which
// every flow of weight 1 gets one key queued. It is divisible by every
// weight from 1 to 10, so that their shares are exact.
const fairUnit = 2520

// sorted reports whether the queue keeps every key in PRIO with a flow
// (see prelude.lua): with Options.Fairness or MaxWait.
func (q *Queue[T]) sorted() bool {
	return q.fairness != nil || q.maxWait > 0 || q.groups != nil
}

// sortedArgs returns the fifth and sixth values of key's add in the
// variant of addopts.lua for a sorted queue: its flow (see flowOf) and
// its group (see groupLimits.of).
func (q *Queue[T]) sortedArgs(key string) []any {
	item, err := q.codec.Decode(key)
	return []any{q.flowOf(key, item, err == nil), q.groups.of(item, err == nil)}
}

// flowOf returns the "STEP FLOW" for FLOWS (see prelude.lua) of key,
// which encodes item if decoded: its fairness key, from Options.Fairness
// ("" for all without it), and the step of that key's weight, led by "a"
// with MaxWait; or UNFAIR, "s", with neither (GroupLimits alone). A key
// the codec cannot decode is a flow of its own, of weight 1.
func (q *Queue[T]) flowOf(key string, item T, decoded bool) string {
	if q.fairness == nil && q.maxWait == 0 {
		return "s" // UNFAIR
	}
	flow, weight := "", 1
	if q.fairness != nil {
		flow = "\x00" + key
		if decoded {
			flow = q.fairness(item)
			if q.fairWeight != nil {
				weight = q.fairWeight(flow)
			}
		}
	}
	step := strconv.Itoa(fairUnit / min(max(weight, 1), fairUnit))
	if q.maxWait > 0 {
		step = "a" + step
	}
	return step + " " + flow
}

// script returns s's variant for the handle's queue: the one with the
// lines for a sorted queue if it is one.
func (q *Queue[T]) script(s *script) *script {
	if q.sorted() {
		return s.fair
	}
	return s
}
