package redisqueue

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-workqueue/workqueue"
)

// Park parks item, which this handle handed out and has not yet marked
// done, until one of events, with the rules of the in-memory
// workqueue.Typed's Park across every handle: from its Done on, no handle
// hands it out and Len does not count it, until a Wake of one of events
// or a WakeItem by any handle, an add of the item by any handle, or
// Options.MaxParkTime ends the park and queues it again. The parked item
// belongs to the queue in Redis, not to this handle: it outlives the
// handle's ShutDown and its process.
//
// If one of events was woken, by any handle, since the item's Get (which
// may have changed what the worker read), the park ends at Done: the item
// is queued again. An add since the Get, or a wake of an earlier Park,
// wins over the park; otherwise a later Park replaces an earlier one. A
// park is not a failure: NumRequeues does not count it. Events should
// come from a small fixed set: Redis keeps the last wake of each. As on
// the in-memory rate-limiting queue, a Wake or WakeFunc queues the item
// no sooner than its Options.ParkBackoff after the Park (until then it
// waits as after an AddAfter), and so does a park that ends at Done or at
// MaxParkTime; WakeItem and an add queue it at once.
//
// Park does nothing for an item this handle does not hold. It works after
// ShutDown, as Done does. It retries while Redis is unreachable, and logs
// a failure it gives up on; the item is then processed once, not parked.
func (q *Queue[T]) Park(item T, events ...string) {
	backoff := time.Duration(-1) // read from ParkBackoff at the first try
	_, err := retryValue(q, "Park", func(ctx context.Context) (struct{}, error) {
		return struct{}{}, q.park(ctx, item, &backoff, events)
	})
	switch {
	case err == nil || errors.Is(err, ErrNotHeld):
	case errors.Is(err, ErrLeaseLost):
		q.logger.Warn("workqueue: Park after the lease was lost; it changed nothing", "item", fmt.Sprint(item))
	default:
		q.logger.Error("workqueue: Park failed", "item", fmt.Sprint(item), "err", err)
	}
}

// ParkContext is Park without retries. It returns ErrNotHeld for an item
// this handle does not hold (or cannot encode), ErrLeaseLost if the
// item's lease was granted again (nothing changed), or Redis's error,
// after which ParkContext may be called again: the park may or may not
// have been recorded, and a second one replaces it.
func (q *Queue[T]) ParkContext(ctx context.Context, item T, events ...string) error {
	backoff := time.Duration(-1)
	return q.park(ctx, item, &backoff, events)
}

// park is ParkContext with the park's backoff: *backoff if not negative,
// else ParkBackoff's, which park stores in *backoff for a retry.
func (q *Queue[T]) park(ctx context.Context, item T, backoff *time.Duration, events []string) error {
	key, err := q.encode(item)
	if err != nil {
		return ErrNotHeld
	}
	q.mu.Lock()
	h := q.held[key]
	if h == nil {
		q.mu.Unlock()
		return ErrNotHeld
	}
	if h.lost {
		q.mu.Unlock()
		return ErrLeaseLost
	}
	// Set before the call runs: its reply may be lost after it recorded
	// the park, which then must take effect at Done.
	h.parked = true
	token := h.token
	q.mu.Unlock()
	if *backoff < 0 {
		*backoff = max(q.parkBackoff.When(item), 0)
	}
	events = slices.Compact(slices.Sorted(slices.Values(events)))
	args := make([]any, 0, 4+len(events))
	args = append(args, key, token, q.now(), millis(*backoff))
	for _, e := range events {
		args = append(args, e)
	}
	res, err := q.runWrite(ctx, q.part(key), opPark, args...)
	if err != nil {
		return err
	}
	r := replyReader{script: "park"}
	if outcome := r.int(res, "the outcome"); r.err != nil {
		return r.err
	} else if outcome < 0 {
		return ErrLeaseLost
	}
	return nil
}

// parkDone runs the done function of a key this handle parked, with its
// lease's token, and returns the done function's outcome for it (3: parked).
func (q *Queue[T]) parkDone(ctx context.Context, key, token string) (int64, error) {
	p := q.part(key)
	outcomes, err := q.runParkCalls(ctx, p, opParkDone, 1, q.now(), q.maxPark.Milliseconds(), key, token)
	if err != nil {
		return 0, err
	}
	return outcomes[0], nil
}

// runParkCalls runs s in partition p with args, whose reply is the
// partition's parked count and then one integer for each of n calls. It
// returns those integers.
func (q *Queue[T]) runParkCalls(ctx context.Context, p *partition, o op, n int, args ...any) ([]int64, error) {
	parked, outcomes, err := q.runInts(ctx, p, o, n, args)
	if err != nil {
		return nil, err
	}
	p.parked.Store(parked)
	var sum int64
	for _, p := range q.parts {
		sum += p.parked.Load()
	}
	q.metrics.parked.Set(float64(sum))
	return outcomes, nil
}

// Wake ends the parks that wait for event, made by any handle, queues
// their items in park order at the priority each was handed out at (one
// still being processed at its Done), and returns how many it ended. It
// also records the wake, for the Parks of items handed out before it. On
// a partitioned queue it runs in each partition at an instant of its own.
// After ShutDown it does nothing and returns 0. It retries each partition
// while Redis is unreachable, and logs a failure it gives up on.
func (q *Queue[T]) Wake(event string) int {
	return q.WakeFunc(event, nil)
}

// WakeContext is Wake without retries: it returns the parks it ended and
// Redis's first error, after which the partitions before were woken and
// the rest may or may not be. It returns workqueue.ErrShutDown after
// ShutDown.
func (q *Queue[T]) WakeContext(ctx context.Context, event string) (int, error) {
	return q.WakeFuncContext(ctx, event, nil)
}

// WakeFunc is Wake for the items accept returns true for; nil accepts
// all. It is not one instant per partition, as Wake is: it reads the parks
// that wait for event and records the wake, calls accept for each in the
// calling goroutine with no lock held, then ends those accepted whose park
// is still the one read; a park ended or replaced meanwhile stays as it
// is. An item whose key the codec cannot decode is not accepted. If
// accept panics, WakeFunc panics with its value, and no park of the
// partition being read is ended.
func (q *Queue[T]) WakeFunc(event string, accept func(item T) bool) int {
	if q.ShuttingDown() {
		return 0
	}
	woken := 0
	for _, p := range q.parts {
		n, err := retryValue(q, "Wake", func(ctx context.Context) (int, error) {
			return q.wakePartition(ctx, p, event, accept)
		})
		if err != nil {
			q.logger.Error("workqueue: Wake failed", "event", event, "partition", p.index, "err", err)
		}
		woken += n
	}
	return woken
}

// WakeFuncContext is WakeFunc without retries, with WakeContext's
// errors.
func (q *Queue[T]) WakeFuncContext(ctx context.Context, event string, accept func(item T) bool) (int, error) {
	if q.ShuttingDown() {
		return 0, workqueue.ErrShutDown
	}
	woken := 0
	for _, p := range q.parts {
		n, err := q.wakePartition(ctx, p, event, accept)
		woken += n
		if err != nil {
			return woken, err
		}
	}
	return woken, nil
}

// wakePartition wakes event in partition p: in one call without accept,
// else in two, around the calls of accept.
func (q *Queue[T]) wakePartition(ctx context.Context, p *partition, event string, accept func(item T) bool) (int, error) {
	var woken []int64
	var err error
	if accept == nil {
		woken, err = q.runParkCalls(ctx, p, opWake, 1, q.now(), event)
	} else {
		woken, err = q.wakeAccepted(ctx, p, event, accept)
	}
	if err != nil || len(woken) == 0 {
		return 0, err
	}
	for range woken[0] {
		q.metrics.wakes.Inc(event)
	}
	return int(woken[0]), nil
}

// wakeAccepted is WakeFunc's wake in partition p: it returns {parks ended},
// or nothing if accept accepted none.
func (q *Queue[T]) wakeAccepted(ctx context.Context, p *partition, event string, accept func(item T) bool) ([]int64, error) {
	res, err := q.runWrite(ctx, p, opWakeList, event)
	if err != nil {
		return nil, err
	}
	r := replyReader{script: "wakelist"}
	parks := r.array(res, 0, "the parks")
	for _, v := range parks {
		r.str(v, "a park's number or key")
	}
	if r.err != nil {
		return nil, r.err
	}
	args := []any{q.now()}
	for i := 0; i+1 < len(parks); i += 2 {
		item, err := q.codec.Decode(parks[i+1].(string))
		if err == nil && accept(item) {
			args = append(args, parks[i], parks[i+1])
		}
	}
	if len(args) == 1 {
		return nil, nil
	}
	return q.runParkCalls(ctx, p, opWakeKeys, 1, args...)
}

// WakeItem ends item's park, whichever handle made it, and queues it at
// the priority it was handed out at (an item still being processed, at
// its Done); it returns false if item is not parked. After ShutDown it
// does nothing and returns false. It retries while Redis is unreachable,
// and logs a failure it gives up on and returns false.
func (q *Queue[T]) WakeItem(item T) bool {
	if q.ShuttingDown() {
		return false
	}
	woken, err := retryValue(q, "WakeItem", func(ctx context.Context) (bool, error) {
		return q.WakeItemContext(ctx, item)
	})
	if err != nil {
		q.logger.Error("workqueue: WakeItem failed", "item", fmt.Sprint(item), "err", err)
	}
	return woken
}

// WakeItemContext is WakeItem without retries: it returns Redis's error,
// the codec's, ErrKeyTooLarge, or workqueue.ErrShutDown after ShutDown.
func (q *Queue[T]) WakeItemContext(ctx context.Context, item T) (bool, error) {
	if q.ShuttingDown() {
		return false, workqueue.ErrShutDown
	}
	key, err := q.encode(item)
	if err != nil {
		return false, err
	}
	woken, err := q.runParkCalls(ctx, q.part(key), opWakeItem, 1, q.now(), key)
	if err != nil {
		return false, err
	}
	return woken[0] == 1, nil
}

// decodeEvents returns the events of a park, encoded in its state as
// LENGTH:EVENT one after another.
func decodeEvents(s string) []string {
	var events []string
	for s != "" {
		length, rest, ok := strings.Cut(s, ":")
		n, err := strconv.Atoi(length)
		if !ok || err != nil || n < 0 || n > len(rest) {
			break
		}
		events = append(events, rest[:n])
		s = rest[n:]
	}
	return events
}
