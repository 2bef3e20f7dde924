package redisqueue

import (
	"context"

	"github.com/go-workqueue/workqueue"
)

// maxPriority bounds the priorities AddWithOpts stores: Redis keeps them
// as float64 scores, exact up to 2^53.
const maxPriority = 1 << 53

// AddWithOpts adds items as opts says, with the rules of the in-memory
// workqueue.TypedPriorityQueue, whichever handles make the adds: an item
// is held once, queued or waiting for its delay; a re-add keeps the
// highest priority and the earliest ready time asked for, and an item
// queued already is not delayed; an item whose priority rises goes behind
// the items queued at its new one; an item added while it is processed is
// queued again at its Done, at the highest priority asked for meanwhile.
// With opts.RateLimited each item's failure is counted, as AddRateLimited
// does, and the shorter of opts.After and the rate limit's delay wins.
// With opts.Reschedule the delay replaces the one the item waits for,
// even an earlier one: the latest such add wins; an item queued already
// stays queued. Priorities beyond ±2^53 count as ±2^53. After ShutDown it
// does nothing.
//
// One item is added at one instant, with the handle's concurrent adds;
// more are added as AddBatch adds them, each partition's group of up to
// 256 at one instant. It retries as Add does; an item that cannot be
// encoded or is too large is logged and dropped, and the others are
// added.
func (q *Queue[T]) AddWithOpts(opts workqueue.AddOpts, items ...T) {
	q.addItems("AddWithOpts", items, optsCall(opts))
}

// AddWithOptsContext is AddWithOpts without retries, with
// AddBatchContext's errors: it encodes every item first and adds none if
// one fails. On a traced handle it links the span ctx carries to each
// item's next hand-out, as AddContext does.
func (q *Queue[T]) AddWithOptsContext(ctx context.Context, opts workqueue.AddOpts, items ...T) error {
	c := optsCall(opts)
	c.link = q.linkOf(ctx)
	return q.addItemsContext(ctx, items, c)
}

// optsCall returns the add, without its key, that opts asks for.
func optsCall(opts workqueue.AddOpts) addCall {
	c := addCall{rule: ruleHeldOnce}
	if opts.After > 0 {
		c.delay = opts.After.Milliseconds()
	}
	if opts.RateLimited {
		c.rule |= ruleRateLimited
	}
	if opts.Reschedule {
		c.rule |= ruleRescheduled
	}
	if opts.Priority != nil {
		c.priority = int64(min(max(*opts.Priority, -maxPriority), maxPriority))
	}
	return c
}
