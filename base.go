package workqueue

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-workqueue/workqueue/metrics"
	"k8s.io/utils/clock"
)

// Base holds the methods the queues share, safe for concurrent use; they
// panic on a zero value. Over a config's Queue or DelayingQueue from outside
// the package they do what it supports: GetContext's error wraps
// [errors.ErrUnsupported] if it has none,
// Park adds the item after MaxParkTime (or ParkBackoff, if longer) if it
// cannot park, others cover delayed items or do nothing.
type Base[T comparable] struct {
	// c is the core of this package's queue under the layer; below is,
	// when c is nil, the queue the layer wraps: one from outside this
	// package, or the delaying layer over one (ownDelays).
	c     *core[T]
	below TypedInterface[T]
	// lim is the rate-limiting layer's, nil on Typed and the delaying
	// queue: Remove forgets, Park backs off, Snapshot counts failures, and
	// a shutdown begins under its lock.
	lim *limiter[T]
	// delayedAdds is set on a delaying layer over c: Remove takes back its
	// delayed adds, which wait in c's delays.
	delayedAdds bool
	// prio and depth are the priority queue's: Get and Remove read the
	// item's priority and take it off the depth by priority.
	prio  *priorityOrder[T]
	depth metrics.PriorityGauge
	// provider and name are returned by MetricsConfig, unless source is
	// set: the rate-limiting layer over a queue from outside returns that
	// queue's.
	provider MetricsProvider
	name     string
	source   metricsSource
	// clock and maxPark serve a layer over a queue from outside: the time
	// of a Snapshot of a queue without one, and the wait of a Park over a
	// queue that cannot park.
	clock   clock.PassiveClock
	maxPark time.Duration
	// top is the queue that embeds this Base.
	top contextAdder[T]
}

// limiter is the state of the rate-limiting layer. mu makes
// AddRateLimited one step: its check of the shutdown flag, its calls of
// the rate limiter and its add. Forget, NumRequeues, Remove, Park and
// Snapshot take it too, so that none of them sees a failure recorded for
// an item not yet added, and a shutdown begins under it, so that no
// failure is recorded for an item that the shutdown then drops. It is
// taken before the core's lock, and the rate limiter, user code, is called
// with it alone held: a slow limiter holds up other callers of the
// limiter, not Get and Done.
type limiter[T comparable] struct {
	mu          sync.Mutex
	rateLimiter TypedRateLimiter[T]
	parkBackoff TypedRateLimiter[T]
	// stopped is set when a shutdown begins, for a queue below from
	// outside this package, which begins its own only once it is shut
	// down.
	stopped bool
}

// forget clears item's failures and park backoff; the caller holds mu.
func (l *limiter[T]) forget(item T) {
	l.rateLimiter.Forget(item)
	l.parkBackoff.Forget(item)
}

// outside returns the queue below a layer without a core, and panics on a
// zero value.
func (b *Base[T]) outside(method string) TypedInterface[T] {
	if b.below == nil {
		panic("workqueue: " + method + " on a zero queue; make one with its constructor")
	}
	return b.below
}

// parkingBelow returns q as a parkingQueue if it parks with the backoff a
// layer above gives: a queue of this package other than the rate-limiting
// queue, which parks with its own.
func parkingBelow[T comparable](q TypedInterface[T]) (parkingQueue[T], bool) {
	if _, ok := q.(ownParkBackoff); ok {
		return nil, false
	}
	p, ok := q.(parkingQueue[T])
	return p, ok
}

// Len returns the number of items waiting to be handed out.
func (b *Base[T]) Len() int {
	if b.c == nil {
		return b.outside("Len").Len()
	}
	return b.c.length()
}

// Get blocks until an item is queued, then returns it as being processed; call
// Done with it. Once a shutdown has left no item, it returns shutdown true.
func (b *Base[T]) Get() (item T, shutdown bool) {
	if b.c == nil {
		return b.outside("Get").Get()
	}
	item, _, err := b.get(context.Background(), nil)
	return item, err != nil
}

// GetContext is Get that returns ctx.Err(), taking no item, if ctx ends first,
// and [ErrShutDown] where Get returns shutdown true.
func (b *Base[T]) GetContext(ctx context.Context) (item T, err error) {
	if b.c == nil {
		return getContext(ctx, b.outside("GetContext"))
	}
	if err := ctx.Err(); err != nil {
		return item, err
	}
	item, _, err = b.get(ctx, nil)
	return item, err
}

// get hands out the next item of c with its priority, 0 without one, and
// fills info, if not nil.
func (b *Base[T]) get(ctx context.Context, info *ItemInfo) (item T, priority int, err error) {
	c := b.c
	if !c.mu.TryLock() { // Lock written out: the call would not be inlined
		c.mu.LockSlow()
	}
	if c.unguarded && info == nil { // a FIFO, so no priority
		item, _, err = c.get(ctx)
		c.mu.Unlock()
		return item, 0, err
	}
	defer c.mu.Unlock()
	item, id, err := c.get(ctx)
	if err != nil {
		return item, 0, err
	}
	if info != nil {
		*info = c.info(id)
	}
	if b.prio == nil {
		return item, 0, nil
	}
	priority = b.prio.priority(id)
	if info != nil {
		info.Priority = priority
	}
	if b.depth != nil {
		b.depth.Dec(priority)
	}
	return item, priority, nil
}

// getContext calls q's GetContext, if it has one.
func getContext[T comparable](ctx context.Context, q TypedInterface[T]) (item T, err error) {
	if g, ok := q.(contextGetter[T]); ok {
		return g.GetContext(ctx)
	}
	return item, fmt.Errorf("workqueue: GetContext needs an underlying queue with a GetContext method, %T has none: %w", q, errors.ErrUnsupported)
}

// Done marks item done and queues it again, even after a shutdown has begun,
// if it was added meanwhile; it does nothing for an item not being processed.
func (b *Base[T]) Done(item T) {
	if b.c == nil {
		b.outside("Done").Done(item)
		return
	}
	b.c.doneItem(item)
}

// Remove takes item back and reports whether it took anything: a queued,
// delayed or parked item leaves the queue; one being processed is not queued
// again or parked at Done. A rate-limiting or priority queue also forgets it.
func (b *Base[T]) Remove(item T) bool {
	c := b.c
	var hash uint32
	if c != nil {
		hash = c.items.Hash(item)
	}
	if l := b.lim; l != nil {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.forget(item)
	}
	if c == nil {
		r, ok := b.outside("Remove").(remover[T])
		return ok && r.Remove(item)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	removed := b.delayedAdds && c.removeDelayedAdd(item)
	entry, id := c.items.Lookup(item, hash)
	if entry == nil {
		return removed
	}
	switch entry.Val.pending {
	case pendingReady:
		if b.depth != nil {
			b.depth.Dec(b.prio.priority(id))
		}
		c.removeReady(id)
	case pendingNone:
		return removed
	default:
		c.removeWaiting(id)
	}
	return true
}

// Park holds item, got from Get and not yet done: from its Done on, it is not
// handed out or in Len until a Wake of one of events, WakeItem, an add of it
// or MaxParkTime queues it; a wake of one of events since the Get ends the
// park at Done. An add since the Get, or a wake of an earlier Park, wins;
// otherwise a later Park replaces an earlier one. It does nothing for an item
// not being processed or once a shutdown has begun. The queue keeps each
// event's last wake: use a small fixed set. A park is not a failure.
func (b *Base[T]) Park(item T, events ...string) {
	c, l := b.c, b.lim
	var hash uint32
	if c != nil {
		hash = c.items.Hash(item)
	}
	if l != nil {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.stopped || b.ShuttingDown() {
			return
		}
	}
	// Each branch makes its own backoff: the core's does not keep it, so
	// it stays off the heap.
	if c == nil {
		var backoff func() time.Duration
		if l != nil {
			backoff = func() time.Duration { return l.parkBackoff.When(item) }
		}
		b.parkBelow(item, backoff, events)
		return
	}
	var backoff func() time.Duration
	if l != nil {
		backoff = func() time.Duration { return l.parkBackoff.When(item) }
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.parkLocked(item, hash, backoff, events)
}

// park is Park with the backoff a layer above took from its own rate
// limiter, nil for none: a wake before it has passed queues the item when
// it passes.
func (b *Base[T]) park(item T, backoff func() time.Duration, events []string) {
	c := b.c
	if c == nil {
		b.parkBelow(item, backoff, events)
		return
	}
	hash := c.items.Hash(item)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.parkLocked(item, hash, backoff, events)
}

// parkBelow is park over a queue from outside this package: there if it
// can park, and otherwise added after MaxParkTime, or backoff if longer.
func (b *Base[T]) parkBelow(item T, backoff func() time.Duration, events []string) {
	below := b.outside("Park")
	if p, ok := parkingBelow(below); ok {
		p.park(item, backoff, events)
		return
	}
	wait := b.maxPark
	if backoff != nil {
		wait = max(backoff(), wait)
	}
	if d, ok := below.(TypedDelayingInterface[T]); ok {
		d.AddAfter(item, wait)
	}
}

// Wake ends event's parks, returning how many, unless a shutdown has begun;
// their items queue in park order, after their Done and ParkBackoff.
func (b *Base[T]) Wake(event string) int { return b.WakeFunc(event, nil) }

// WakeFunc is Wake for the items accept returns true for (nil: all); accept
// runs under the queue's lock, must not call it, and if it panics the parks it
// accepted stay ended.
func (b *Base[T]) WakeFunc(event string, accept func(item T) bool) int {
	if b.c == nil {
		if p, ok := parkingBelow(b.outside("WakeFunc")); ok {
			return p.WakeFunc(event, accept)
		}
		return 0
	}
	return b.c.wakeFunc(event, accept)
}

// WakeItem ends item's park, queuing it without backoff; false if not parked.
func (b *Base[T]) WakeItem(item T) bool {
	if b.c == nil {
		if p, ok := parkingBelow(b.outside("WakeItem")); ok {
			return p.WakeItem(item)
		}
		return false
	}
	return b.c.wakeItem(item)
}

// SetGroupLimit sets the limit of group over the config's GroupLimits; 0 or
// less means none. Get hands out the group's items while fewer than the new
// limit are in flight. It does nothing without GroupLimits, or for group "".
func (b *Base[T]) SetGroupLimit(group string, limit int) {
	if b.c == nil {
		if g, ok := b.outside("SetGroupLimit").(groupLimiter); ok {
			g.SetGroupLimit(group, limit)
		}
		return
	}
	b.c.setGroupLimit(group, limit)
}

// Snapshot returns a view of the queue, listing at most n items of each kind;
// a rate-limiting or priority queue adds the listed items' failure counts.
func (b *Base[T]) Snapshot(n int) Snapshot[T] {
	l := b.lim
	if l != nil {
		// Held from the view to the failure counts, so that they are those
		// of the view's instant, without calling the rate limiter under the
		// core's lock.
		l.mu.Lock()
		defer l.mu.Unlock()
	}
	var s Snapshot[T]
	if c := b.c; c != nil {
		c.mu.Lock()
		s = c.snapshotLocked(n)
		c.mu.Unlock()
	} else if inner, ok := b.outside("Snapshot").(snapshotter[T]); ok {
		s = inner.Snapshot(n)
	} else {
		s = Snapshot[T]{Taken: b.clock.Now(), ShuttingDown: b.below.ShuttingDown(), Depth: b.below.Len()}
	}
	if l != nil {
		s.Failures = listedFailures(l.rateLimiter, &s)
	}
	return s
}

// ShutDown begins a shutdown, which drops delayed and parked items, and
// returns once the queue's goroutines have exited; a second call does nothing.
func (b *Base[T]) ShutDown() {
	c := b.c
	if !b.stopLimiter("ShutDown", (*core[T]).releaseDrains) && c != nil {
		c.mu.Lock()
		c.releaseDrains()
		c.mu.Unlock()
	}
	if c == nil {
		b.outside("ShutDown").ShutDown()
		return
	}
	c.stopDelays()
	c.stopMetrics()
}

// ShutDownWithDrain begins a shutdown, then waits until no item is queued or
// being processed (keep calling Get and Done) or ShutDown is called.
func (b *Base[T]) ShutDownWithDrain() {
	b.stopLimiter("ShutDownWithDrain", (*core[T]).stopAddsLocked)
	c := b.c
	if c == nil {
		b.outside("ShutDownWithDrain").ShutDownWithDrain()
		return
	}
	c.mu.Lock()
	c.stopAddsLocked()
	c.drain()
	c.mu.Unlock()
	c.stopDelays()
	c.stopMetrics()
}

// stopLimiter begins the shutdown of a rate-limiting layer, if b has one,
// and reports whether it has: under the layer's lock, so that no failure is
// recorded for an item the shutdown then drops, it marks the layer stopped
// and calls begin on the core, or stopAdds on a queue from outside. The
// lock is not held while the caller joins the goroutines or waits for the
// drain, so that workers calling Forget or AddRateLimited are not held up.
func (b *Base[T]) stopLimiter(method string, begin func(*core[T])) bool {
	l := b.lim
	if l == nil {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stopped = true
	if c := b.c; c != nil {
		c.mu.Lock()
		begin(c)
		c.mu.Unlock()
	} else if s, ok := b.outside(method).(addStopper); ok {
		s.stopAdds()
	}
	return true
}

// ShuttingDown reports whether a shutdown has begun, here or in a layer above.
func (b *Base[T]) ShuttingDown() bool {
	if b.c == nil {
		return b.outside("ShuttingDown").ShuttingDown()
	}
	return b.c.shuttingDown.Load()
}

// MetricsConfig returns the queue's provider (its config's, else
// SetProvider's at construction; nil if neither) and its config's Name; a
// rate-limiting queue, its DelayingQueue's (nil, "" if it has no such method).
func (b *Base[T]) MetricsConfig() (MetricsProvider, string) {
	if b.source != nil {
		return b.source.MetricsConfig()
	}
	if b.c == nil {
		b.outside("MetricsConfig")
	}
	return b.provider, b.name
}

// listedFailures returns the failure counts limiter keeps for the items s
// lists, nil if none has any.
func listedFailures[T comparable](limiter TypedRateLimiter[T], s *Snapshot[T]) map[T]int {
	var failures map[T]int
	count := func(item T) {
		if n := limiter.NumRequeues(item); n > 0 {
			if failures == nil {
				failures = map[T]int{}
			}
			failures[item] = n
		}
	}
	for _, item := range s.Queued {
		count(item)
	}
	for _, f := range s.InFlight {
		count(f.Item)
	}
	for _, d := range s.Delayed {
		count(d.Item)
	}
	for _, p := range s.ParkedItems {
		count(p.Item)
	}
	return failures
}
