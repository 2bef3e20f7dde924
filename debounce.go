package workqueue

import (
	"fmt"
	"time"
)

// Debounce holds back an item that is added again and again until its adds
// go quiet: under it, an add with no delay makes the item ready Quiet after
// that add, but never later than MaxDelay after the first add of the burst,
// however often it is added meanwhile. The zero value debounces nothing.
//
// A burst begins at an add of an item that is not waiting for a debounce,
// and ends when the item becomes ready. An add of an item that is ready
// already (queued, or to be queued again at Done) changes nothing: the
// processing to come covers it. An item being processed when a burst begins
// is queued again at Done, or once its burst ends if that is later. A delay
// asked for during a burst (AddAfter, AddRateLimited) ends it no later than
// that delay: the earliest ready time wins; a Reschedule ends the burst and
// sets the item's ready time, whichever way it moves.
type Debounce struct {
	// Quiet is how long after its last add an item becomes ready. It must
	// be positive if MaxDelay is set.
	Quiet time.Duration
	// MaxDelay bounds how long after the first add of its burst an item
	// becomes ready. Zero means Quiet: a burst then lasts Quiet from its
	// first add. Otherwise it must be at least Quiet.
	MaxDelay time.Duration
}

// enabled reports whether d debounces anything.
func (d Debounce) enabled() bool { return d.Quiet > 0 }

// checked returns d with MaxDelay set, panicking for fn, the constructor,
// if d is not valid.
func (d Debounce) checked(fn string) Debounce {
	switch {
	case d.Quiet < 0 || d.MaxDelay < 0:
		panic(fmt.Sprintf("workqueue: %s: Debounce must not be negative, got %+v", fn, d))
	case d.Quiet == 0 && d.MaxDelay > 0:
		panic(fmt.Sprintf("workqueue: %s: Debounce.MaxDelay set without a Quiet period, got %+v", fn, d))
	case d.MaxDelay == 0:
		d.MaxDelay = d.Quiet
	case d.MaxDelay < d.Quiet:
		panic(fmt.Sprintf("workqueue: %s: Debounce.MaxDelay must be at least Quiet, got %+v", fn, d))
	}
	return d
}

// readyHolder is implemented by Typed: whether it holds an item ready, so
// that the delaying layer above it lets a debounced add of such an item
// change nothing.
type readyHolder[T comparable] interface {
	holdsReady(item T) bool
}

// rescheduler is implemented by the delaying queue, which the rate-limiting
// layer looks for below it.
type rescheduler[T comparable] interface {
	Reschedule(item T, duration time.Duration)
}

// retryAdder is implemented by the delaying queue: an AddAfter that is
// never debounced, for AddRateLimited.
type retryAdder[T comparable] interface {
	addRetry(item T, duration time.Duration)
}

var (
	_ readyHolder[int] = (*Typed[int])(nil)
	_ rescheduler[int] = (*TypedDelayingQueue[int])(nil)
	_ rescheduler[int] = (*TypedRateLimitingQueue[int])(nil)
	_ rescheduler[int] = (*TypedPriorityQueue[int])(nil)
	_ retryAdder[int]  = (*TypedDelayingQueue[int])(nil)
)

// holdsReady reports whether item is queued, or is being processed and will
// be queued again at Done.
func (q *Typed[T]) holdsReady(item T) bool {
	hash := q.core.items.Hash(item)
	q.core.mu.Lock()
	defer q.core.mu.Unlock()
	entry, _ := q.core.items.Lookup(item, hash)
	return entry != nil && entry.Val.pending == pendingReady
}

// debounce delays item for one more add of its burst: ready quiet after
// now, but no later than the burst's deadline, which is fixed when the
// burst begins at maxDelay after it, or at the ready time of a delay the
// item waits for already if that is earlier. It reports whether item is now
// the first to be ready. The caller holds the owner's lock.
func (d *delayer[T]) debounce(item T, db Debounce) (isFirst bool) {
	now := d.now()
	deadline, inBurst := d.bursts[item]
	if !inBurst {
		deadline = readyAfter(now, db.MaxDelay)
		if at, waiting := d.heap.ReadyAt(item); waiting {
			deadline = min(deadline, at)
		}
		if d.bursts == nil {
			d.bursts = make(map[T]int64)
		}
		d.bursts[item] = deadline
	}
	isFirst = d.heap.Set(item, min(readyAfter(now, db.Quiet), deadline))
	d.setGauge()
	return isFirst
}

// reschedule sets item's ready time to delay from now, whichever way that
// moves it, ending its burst if it is in one, and reports whether it is now
// the first to be ready. The caller holds the owner's lock.
func (d *delayer[T]) reschedule(item T, delay time.Duration) (isFirst bool) {
	d.endBurst(item)
	isFirst = d.heap.Set(item, readyAfter(d.now(), delay))
	d.setGauge()
	return isFirst
}

// endBurst forgets item's burst, if it is in one: it is ready, removed, or
// rescheduled. The caller holds the owner's lock.
func (d *delayer[T]) endBurst(item T) {
	if len(d.bursts) > 0 {
		delete(d.bursts, item)
	}
}
