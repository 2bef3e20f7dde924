package redisqueue

import (
	"strconv"
)

// fairUnit is fair_seq's FAIR_UNIT: the span of sequence numbers in which
// every flow of weight 1 gets one key queued. It is divisible by every
// weight from 1 to 10, so that their shares are exact.
const fairUnit = 2520

// sorted reports whether the queue keeps every key in PRIO with a flow
// (see lua/workqueue.lua): with Options.Fairness or MaxWait.
func (q *Queue[T]) sorted() bool {
	return q.fairness != nil || q.maxWait > 0 || q.groups != nil
}

// sortedArgs returns the fifth, sixth and seventh values of key's add
// for addopts on a sorted queue: its flow (see flowOf), its group (see
// groupLimits.of) and its second-level fairness key (see innerOf).
func (q *Queue[T]) sortedArgs(key string) []any {
	item, err := q.codec.Decode(key)
	decoded := err == nil
	return []any{q.flowOf(key, item, decoded), q.groups.of(item, decoded), q.innerOf(item, decoded)}
}

// innerOf returns the "STEP NAME" for INNER (see lua/workqueue.lua) of an item,
// decoded if it could be: its key of Options.Fairness[1] and the step
// of that key's weight; "" without a second Fairness function or for a key the codec
// cannot decode, which has no second level.
func (q *Queue[T]) innerOf(item T, decoded bool) string {
	if q.nested == nil || !decoded {
		return ""
	}
	name := q.nested(item)
	return fairStep(q.nestedWeight, name) + " " + name
}

// fairStep returns the step of a fairness key's weight, by weight (nil:
// every key 1).
func fairStep(weight func(string) int, key string) string {
	w := 1
	if weight != nil {
		w = weight(key)
	}
	return strconv.Itoa(fairUnit / min(max(w, 1), fairUnit))
}

// flowOf returns the "STEP FLOW" for FLOWS (see lua/workqueue.lua) of key,
// which encodes item if decoded: its fairness key, from Options.Fairness
// ("" for all without it), and the step of that key's weight, led by "a"
// with MaxWait and by "n" (after the "a") with two Fairness functions; or
// UNFAIR, "s", with neither (GroupLimits alone). A key the codec cannot decode is
// a flow of its own, of weight 1, with no second level.
func (q *Queue[T]) flowOf(key string, item T, decoded bool) string {
	if q.fairness == nil && q.maxWait == 0 {
		return "s" // UNFAIR
	}
	flow, step := "", fairStep(nil, "")
	if q.fairness != nil {
		flow = "\x00" + key
		if decoded {
			flow = q.fairness(item)
			step = fairStep(q.fairWeight, flow)
			if q.nested != nil {
				step = "n" + step
			}
		}
	}
	if q.maxWait > 0 {
		step = "a" + step
	}
	return step + " " + flow
}
