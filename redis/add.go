package redisqueue

import (
	"context"
	"fmt"
	"iter"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/go-workqueue/workqueue"
)

// Add queues item at priority 0 unless it is already queued (one queued
// at a lower priority is raised to 0); if it is being processed, by any
// handle, it is queued again after its Done. After ShutDown it does
// nothing. It retries until it succeeds or the handle is shut down; an
// item that cannot be encoded, is too large or that Redis refuses for
// good is logged and dropped.
func (q *Queue[T]) Add(item T) {
	q.addRetrying("Add", item, func(ctx context.Context, key string) error {
		return q.addKey(ctx, key, 0)
	})
}

// AddContext is Add without retries: it returns Redis's error, the codec's,
// ErrKeyTooLarge, or workqueue.ErrShutDown after ShutDown. If the handle's
// MetricsProvider is a reconcile.TracingProvider, the add links the span
// ctx carries to the item's next hand-out, in any handle (see
// GetWithInfoContext); so does AddAfterContext's. ctx can end the
// call only before the add is sent; once sent, the call waits for Redis's
// answer (go-redis's timeouts bound it), so that nil means the item is in
// Redis.
func (q *Queue[T]) AddContext(ctx context.Context, item T) error {
	return q.AddAfterContext(ctx, item, 0)
}

// AddAfter adds item once duration has passed; zero or less adds it at
// once. If item is already waiting, the earlier ready time wins. As in
// client-go, the wait is independent of the queue: an item queued or
// processed also waits, and is added when its time comes; AddWithOpts
// holds an item once instead. It retries as Add does.
func (q *Queue[T]) AddAfter(item T, duration time.Duration) {
	q.addRetrying("AddAfter", item, func(ctx context.Context, key string) error {
		return q.addKey(ctx, key, duration)
	})
}

// AddAfterContext is AddAfter without retries, with AddContext's errors.
func (q *Queue[T]) AddAfterContext(ctx context.Context, item T, duration time.Duration) error {
	if q.ShuttingDown() {
		return workqueue.ErrShutDown
	}
	key, err := q.encode(item)
	if err != nil {
		return err
	}
	return q.addCall(ctx, addCall{key: key, delay: duration.Milliseconds(), link: q.linkOf(ctx)})
}

// AddRateLimited counts a failure of item in Redis and adds it after the
// larger of its backoff and the shared bucket's wait (see RateLimit).
// After ShutDown it does nothing and counts nothing. It retries as Add
// does.
func (q *Queue[T]) AddRateLimited(item T) {
	q.addRetrying("AddRateLimited", item, q.addRateLimited)
}

func (q *Queue[T]) addRateLimited(ctx context.Context, key string) error {
	return q.addCall(ctx, addCall{key: key, rule: ruleAdd | ruleRateLimited})
}

// AddRateLimitedContext is AddRateLimited without retries, with
// AddContext's errors.
func (q *Queue[T]) AddRateLimitedContext(ctx context.Context, item T) error {
	if q.ShuttingDown() {
		return workqueue.ErrShutDown
	}
	key, err := q.encode(item)
	if err != nil {
		return err
	}
	return q.addRateLimited(ctx, key)
}

func (q *Queue[T]) addRetrying(op string, item T, add func(ctx context.Context, key string) error) {
	if q.ShuttingDown() {
		return
	}
	key, err := q.encode(item)
	if err != nil {
		q.logger.Error("workqueue: item dropped", "op", op, "err", err)
		return
	}
	err = q.retry(op, q.stopCh, func(ctx context.Context) error { return add(ctx, key) })
	if err != nil {
		q.logger.Error("workqueue: item dropped", "op", op, "key", key, "err", err)
	}
}

// AddBatch adds items as Add does, in their order within each partition,
// 256 items of a partition at a time: each such group is added at one
// instant, in one round trip (two if one of its keys is parked).
// After ShutDown it does nothing. It retries each group as Add does; an
// item that cannot be encoded or is too large is logged and dropped, and
// the others are added.
func (q *Queue[T]) AddBatch(items []T) {
	q.addItems("AddBatch", items, addCall{})
}

// addItems is AddBatch with each item added as c, whose key it sets,
// says.
func (q *Queue[T]) addItems(op string, items []T, c addCall) {
	if q.ShuttingDown() {
		return
	}
	keys := make([]string, 0, len(items))
	for _, item := range items {
		key, err := q.encode(item)
		if err != nil {
			q.logger.Error("workqueue: item dropped", "op", op, "err", err)
			continue
		}
		keys = append(keys, key)
	}
	for p, part := range q.batches(keys) {
		err := q.retry(op, q.stopCh, func(ctx context.Context) error { return q.addKeys(ctx, p, part, c) })
		if err != nil {
			q.logger.Error("workqueue: items dropped", "op", op, "count", len(part), "first", part[0], "err", err)
		}
	}
}

// batches yields keys split by partition, in order within each, in
// chunks of at most maxBatch.
func (q *Queue[T]) batches(keys []string) iter.Seq2[*partition, []string] {
	return func(yield func(*partition, []string) bool) {
		byPart := make([][]string, len(q.parts))
		for _, key := range keys {
			i := q.part(key).index
			byPart[i] = append(byPart[i], key)
		}
		for i, keys := range byPart {
			for chunk := range slices.Chunk(keys, maxBatch) {
				if !yield(q.parts[i], chunk) {
					return
				}
			}
		}
	}
}

// AddBatchContext is AddBatch without retries: it encodes every item
// first and returns the codec's error or ErrKeyTooLarge without adding
// any; else it adds the groups in order and returns Redis's first error,
// after which the groups before were added and the rest may or may not
// be. It returns workqueue.ErrShutDown after ShutDown.
func (q *Queue[T]) AddBatchContext(ctx context.Context, items []T) error {
	return q.addItemsContext(ctx, items, addCall{})
}

// addItemsContext is AddBatchContext with each item added as c, whose key
// it sets, says.
func (q *Queue[T]) addItemsContext(ctx context.Context, items []T, c addCall) error {
	if q.ShuttingDown() {
		return workqueue.ErrShutDown
	}
	keys := make([]string, len(items))
	for i, item := range items {
		key, err := q.encode(item)
		if err != nil {
			return err
		}
		keys[i] = key
	}
	for p, part := range q.batches(keys) {
		if err := q.addKeys(ctx, p, part, c); err != nil {
			return err
		}
	}
	return nil
}

// addCall is one add for the add function: a key, its delay in ms (added at
// once when not positive), its priority and its rule.
type addCall struct {
	key      string
	delay    int64
	priority int64
	rule     int64
	link     string // on a traced handle, the add's link (see linkOf)
}

// The rules of the addopts function: ruleAdd is Add's and AddAfter's, ruleHeldOnce
// AddWithOpts's; ruleRateLimited, added to either, counts a failure and
// delays by the rate limit; ruleRescheduled, added to ruleHeldOnce, makes
// the delay replace the one the key waits for.
const (
	ruleAdd         = 0
	ruleHeldOnce    = 1
	ruleRateLimited = 2
	ruleRescheduled = 4
)

// addKey adds key after delay with the next batch of this handle's
// concurrent adds (see addCall).
func (q *Queue[T]) addKey(ctx context.Context, key string, delay time.Duration) error {
	return q.addCall(ctx, addCall{key: key, delay: delay.Milliseconds()})
}

// addCall runs c with the next batch of this handle's concurrent adds.
// ctx bounds only the wait for a batch to start: a call in a batch that
// runs is waited for (go-redis's timeouts bound it), so that an add that
// returns nil is in Redis.
func (q *Queue[T]) addCall(ctx context.Context, c addCall) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	_, err := q.part(c.key).adds.do(c)
	return err
}

// addKeys adds keys of partition p, at most maxBatch, in one call, each
// as c, whose key it sets, says; one key goes with the handle's concurrent
// adds.
func (q *Queue[T]) addKeys(ctx context.Context, p *partition, keys []string, c addCall) error {
	if len(keys) == 1 {
		c.key = keys[0]
		return q.addCall(ctx, c)
	}
	calls := make([]addCall, len(keys))
	for i, key := range keys {
		calls[i] = c
		calls[i].key = key
	}
	_, err := q.runAdds(ctx, p, calls)
	return err
}

// runAdds runs one add function in partition p with calls and returns
// each one's outcome: add when every call is an Add or AddAfter at
// priority 0 on a queue that is not sorted, else addopts, which takes
// every rule and the flows but runs more commands. The adds that add
// leaves as they are, of parked keys (every add of its call if it has
// more than one, so that an AddBatch takes effect at one instant), are
// run again with addopts.
func (q *Queue[T]) runAdds(ctx context.Context, p *partition, calls []addCall) ([]int64, error) {
	plain := !q.sorted() && !slices.ContainsFunc(calls, func(c addCall) bool { return c.rule != ruleAdd || c.priority != 0 })
	outcomes, err := q.runAddScript(ctx, p, calls, plain)
	if err != nil || !plain {
		return outcomes, err
	}
	var parked []int // the indexes of the calls to run again
	for i, outcome := range outcomes {
		if outcome == addParked {
			parked = append(parked, i)
		}
	}
	if len(parked) == 0 {
		return outcomes, nil
	}
	again := make([]addCall, len(parked))
	for j, i := range parked {
		again[j] = calls[i]
	}
	added, err := q.runAddScript(ctx, p, again, false)
	if err != nil {
		return nil, err
	}
	for j, i := range parked {
		outcomes[i] = added[j]
	}
	return outcomes, nil
}

// addParked is the add function's outcome for a parked key, which it
// leaves to addopts.
const addParked = 4

// runAddScript runs the add function in partition p with calls if
// plain, which they must allow (see runAdds), else addopts, and returns
// each call's outcome.
func (q *Queue[T]) runAddScript(ctx context.Context, p *partition, calls []addCall, plain bool) ([]int64, error) {
	fair, traced := q.sorted(), q.tracer != nil
	o, args := opAdd, make([]any, 0, 1+len(p.limit)+8*len(calls))
	args = append(args, q.now())
	if !plain {
		o = opAddOpts
		args = append(args, p.limit...)
	}
	for _, c := range calls {
		switch {
		case plain:
			args = append(args, c.key, c.delay)
		case fair:
			args = append(append(args, c.key, c.delay, c.priority, c.rule), q.sortedArgs(c.key)...)
		default:
			args = append(args, c.key, c.delay, c.priority, c.rule)
		}
		if traced {
			args = append(args, c.link)
		}
	}
	outcomes, err := q.runCalls(ctx, p, o, len(calls), args)
	for i, outcome := range outcomes {
		if calls[i].rule&ruleRateLimited != 0 {
			q.metrics.retries.Inc()
		}
		q.metrics.added(outcome)
	}
	return outcomes, err
}

// runCalls runs o in partition p with args, whose reply is the
// partition's depth (-1: none) and then one integer for each of n calls.
// It returns those integers.
func (q *Queue[T]) runCalls(ctx context.Context, p *partition, o op, n int, args []any) ([]int64, error) {
	depth, outcomes, err := q.runInts(ctx, p, o, n, args)
	if err != nil {
		return nil, err
	}
	if depth >= 0 { // the done function reports none
		q.setDepth(p, depth)
	}
	return outcomes, nil
}

// runInts runs o in partition p with args, whose reply is an integer and
// then one for each of n calls, and returns them.
func (q *Queue[T]) runInts(ctx context.Context, p *partition, o op, n int, args []any) (int64, []int64, error) {
	res, err := q.runWrite(ctx, p, o, args...)
	if err != nil {
		return 0, nil, err
	}
	r := replyReader{script: opNames[o]}
	reply := r.ints(res, 1+n, "the reply")
	if r.err != nil {
		return 0, nil, r.err
	}
	return reply[0], reply[1:], nil
}

// runWrite runs o, an add or done function, in partition p, replicated
// as runReplicated does.
func (q *Queue[T]) runWrite(ctx context.Context, p *partition, o op, args ...any) (any, error) {
	if err := q.checkPartitions(ctx); err != nil {
		return nil, err
	}
	return q.runReplicated(ctx, p.keys.fcall, o, args...)
}

// runReplicated runs o on keys, all of one slot. With
// Options.WaitReplicas it sends WAIT after the function on the same
// connection, in one round trip, and returns ErrNotReplicated, with the
// function's reply, if too few replicas acknowledged in time.
func (q *Queue[T]) runReplicated(ctx context.Context, keys []string, o op, args ...any) (any, error) {
	if q.waitReplicas == 0 {
		return q.call(ctx, o, keys, args...).Result()
	}
	// WAIT counts the writes of its own connection, and a cluster client
	// would send a command without keys to any node: the pipeline goes to
	// the queue's primary itself.
	node, ok := q.client.(*redis.Client)
	if !ok {
		var err error
		if node, err = q.client.(*redis.ClusterClient).MasterForKey(ctx, keys[0]); err != nil {
			return nil, err
		}
	}
	for loaded := false; ; loaded = true {
		var run *redis.Cmd
		var wait *redis.Cmd
		_, err := node.Pipelined(ctx, func(pipe redis.Pipeliner) error {
			run = pipe.FCall(ctx, q.lib.fns[o], keys, append([]any{q.features()}, args...)...)
			wait = pipe.Do(ctx, "WAIT", q.waitReplicas, q.waitTimeout.Milliseconds())
			return nil
		})
		if !loaded && lacksLibrary(run.Err()) {
			if err := q.lib.loadOn(ctx, node); err != nil {
				return nil, err
			}
			continue
		}
		if err != nil { // the first error of the two commands
			return nil, err
		}
		acked, err := wait.Int64()
		if err != nil {
			return nil, err
		}
		if acked < int64(q.waitReplicas) {
			// The function's reply too: it ran on the primary.
			res, _ := run.Result()
			return res, fmt.Errorf("%w: %d of %d replicas in %v", ErrNotReplicated, acked, q.waitReplicas, q.waitTimeout)
		}
		return run.Result()
	}
}
