package workqueue

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/go-workqueue/workqueue/internal/list"
	"github.com/go-workqueue/workqueue/internal/table"
	"k8s.io/utils/clock"
)

// TypedPriorityQueue's row of the capabilities table (capabilities.go).
var (
	_ parkingQueue[int] = (*TypedPriorityQueue[int])(nil)
	_ Prioritized[int]  = (*TypedPriorityQueue[int])(nil)
	_ rescheduler[int]  = (*TypedPriorityQueue[int])(nil)
	_ additions[int]    = (*TypedPriorityQueue[int])(nil)
)

// TypedPriorityQueueConfig configures [NewTypedPriorityQueue]. The zero value
// is valid.
type TypedPriorityQueueConfig[T comparable] struct {
	// Name, MetricsProvider, Clock, Logger, MaxParkTime and ParkBackoff
	// are as in [TypedQueueConfig] and [TypedRateLimitingQueueConfig].
	Name            string
	MetricsProvider MetricsProvider
	Clock           clock.WithTicker
	Logger          *slog.Logger
	MaxParkTime     time.Duration
	ParkBackoff     TypedRateLimiter[T]
	// Fairness, if not empty, makes the keys these functions give the
	// items take turns within a priority, one item each: the first
	// function's keys, then within each the second's, and so on (cluster,
	// then namespace, say). An item whose key has nothing queued waits
	// for at most one item of each other key. The functions are called
	// with the queue locked; they must return the same key for an item
	// every time, and must neither panic nor call the queue.
	Fairness []func(item T) string
	// FairnessWeights, if not empty, gives keys of Fairness more turns:
	// FairnessWeights[d](key) is the weight of a key of Fairness[d] (a nil
	// function, a missing one or a weight below 1 means 1). A key of weight
	// k hands out up to k items in a row before the next key's turn, so an
	// item whose key has nothing queued waits for at most the sum of the
	// other keys' weights, at each dimension. A weight is read when its
	// key joins the rotation and after each of its rounds, so a changed
	// weight takes effect from its key's next round; Snapshot reads the
	// weights too. The functions are called as Fairness's are. It cannot
	// be longer than Fairness.
	FairnessWeights []func(key string) int
	// MaxWait, if positive, hands out an item ready for that long before
	// any other, whatever its priority; its keys keep their turns.
	MaxWait time.Duration
	// GroupLimits, if not nil, limits the items of each group in flight
	// at once. Get hands out the first item in the order above whose
	// group has a free slot; a fairness key whose queued items all wait
	// for a slot leaves its rotation, and joins at the back when one
	// frees. MaxWait hands out the longest ready of the items whose
	// group has a free slot. The Get that takes a group's last slot and
	// the Done that frees one take a step for each fairness key and
	// priority that holds queued items of the group.
	GroupLimits *GroupLimits[T]
	// Debounce, if set, makes an add with no delay, neither rate-limited
	// nor a Reschedule, of an item not ready already wait for the end of
	// its burst of adds, as [Debounce] says, at the highest priority its
	// adds asked for.
	Debounce Debounce
}

// TypedPriorityQueue is a rate-limiting queue, with the additions of
// [TypedRateLimitingQueue], that hands out higher priorities first: within a
// priority first in, first out, or in turns of Fairness keys. It adds
// AddWithOpts and GetWithPriority, as controller-runtime's priority queue
// does. A re-add keeps the highest priority and earliest ready time asked for;
// an item whose priority rises goes behind those queued at its new one. Its
// methods are safe for concurrent use. The zero value is not usable: make one
// with [NewTypedPriorityQueue].
type TypedPriorityQueue[T comparable] struct {
	core  core[T]
	order *priorityOrder[T]

	// limiterMu makes a rate-limited add one step (its check of the
	// shutdown flag, its calls of the rate limiter and its add), and
	// serializes Forget, NumRequeues, Remove and the start of a shutdown
	// with it, so that no failure is recorded for an item the shutdown
	// drops. It is taken before the core's lock, and the rate limiter,
	// user code, is called with it alone held: a slow limiter holds up
	// other callers of the limiter, not Get and Done.
	limiterMu   sync.Mutex
	rateLimiter TypedRateLimiter[T]
	parkBackoff TypedRateLimiter[T]

	depthByPriority PriorityGaugeMetric
	debounce        Debounce // the config's
}

// NewTypedPriorityQueue returns a new priority queue. It panics if rateLimiter,
// a Fairness function or GroupLimits' Group is nil, if FairnessWeights is
// longer than Fairness, if MaxWait or MaxParkTime is negative, or if
// Debounce is not valid (see [Debounce]).
func NewTypedPriorityQueue[T comparable](rateLimiter TypedRateLimiter[T], config TypedPriorityQueueConfig[T]) *TypedPriorityQueue[T] {
	if rateLimiter == nil {
		panic("workqueue: NewTypedPriorityQueue needs a rate limiter, got nil")
	}
	config.MetricsProvider = withDefaultProvider(config.MetricsProvider)
	if config.MaxWait < 0 {
		panic(fmt.Sprintf("workqueue: NewTypedPriorityQueue: MaxWait must not be negative, got %v", config.MaxWait))
	}
	for i, f := range config.Fairness {
		if f == nil {
			panic(fmt.Sprintf("workqueue: NewTypedPriorityQueue: Fairness[%d] is nil", i))
		}
	}
	if len(config.FairnessWeights) > len(config.Fairness) {
		panic(fmt.Sprintf("workqueue: NewTypedPriorityQueue: %d FairnessWeights for %d Fairness functions", len(config.FairnessWeights), len(config.Fairness)))
	}
	if config.Clock == nil {
		config.Clock = clock.RealClock{}
	}
	if config.Logger == nil {
		config.Logger = slog.Default()
	}
	maxPark := maxParkTime("NewTypedPriorityQueue", config.MaxParkTime)
	debounce := config.Debounce.checked("NewTypedPriorityQueue")
	if config.ParkBackoff == nil {
		config.ParkBackoff = defaultParkBackoff[T]()
	}
	q := &TypedPriorityQueue[T]{
		rateLimiter:     rateLimiter,
		parkBackoff:     config.ParkBackoff,
		depthByPriority: priorityDepthMetric(config.MetricsProvider, config.Name),
		debounce:        debounce,
	}
	q.order = &priorityOrder[T]{
		items:    &q.core.items,
		fairness: slices.Clone(config.Fairness),
		weights:  slices.Clone(config.FairnessWeights),
		maxWait:  int64(config.MaxWait),
		ages:     list.New(),
		groups:   newGroupSet("NewTypedPriorityQueue", config.GroupLimits),
	}
	if q.order.groups != nil {
		q.core.groups, q.core.grouped = q.order.groups, q.order
		q.order.groupedAges = newGroupedList(&q.order.ageLinks, &q.order.ageSeqs, nil)
	}
	q.core.init(q.order, config.MetricsProvider, config.Name, config.Clock, config.Logger, maxPark)
	q.core.onReady = func(item T, id int32) { q.countReady(item, q.order.priority(id)) }
	q.core.makeDelays(config.MetricsProvider, config.Name)
	q.order.now = q.core.delays.now
	q.core.start()
	return q
}

// Add is AddWithOpts(AddOpts{}, item): at once, or debounced, at priority 0.
func (q *TypedPriorityQueue[T]) Add(item T) {
	if q.debounce.enabled() {
		q.AddWithOpts(AddOpts{}, item)
		return
	}
	hash := q.core.items.Hash(item) // before the lock: the hot path's one hash
	q.core.mu.Lock()
	defer q.core.mu.Unlock()
	if !q.core.shuttingDown.Load() {
		q.addLocked(item, hash, 0, 0, addEarliest) // no delay: the delay goroutine need not look
	}
}

// AddAfter is AddWithOpts(AddOpts{After: duration}, item).
func (q *TypedPriorityQueue[T]) AddAfter(item T, duration time.Duration) {
	q.AddWithOpts(AddOpts{After: duration}, item)
}

// Reschedule is AddWithOpts(AddOpts{After: duration, Reschedule: true},
// item): it makes item ready duration from now, replacing the delay it
// waits for, even an earlier one, or the rest of its Debounce burst: the
// latest call wins, where AddAfter keeps the earliest. With a duration of
// zero or less it makes item ready at once, never debounced. An item ready
// already stays ready, and keeps the highest priority asked for.
func (q *TypedPriorityQueue[T]) Reschedule(item T, duration time.Duration) {
	q.AddWithOpts(AddOpts{After: duration, Reschedule: true}, item)
}

// AddRateLimited is AddWithOpts(AddOpts{RateLimited: true}, item).
func (q *TypedPriorityQueue[T]) AddRateLimited(item T) {
	q.AddWithOpts(AddOpts{RateLimited: true}, item)
}

// AddWithOpts adds items as opts says, at one instant, merging each with what
// the queue holds of it; after a shutdown has begun it does nothing. With
// Debounce, an add with no After, RateLimited or Reschedule is debounced.
func (q *TypedPriorityQueue[T]) AddWithOpts(opts AddOpts, items ...T) {
	priority := 0
	if opts.Priority != nil {
		priority = *opts.Priority
	}
	var delaysBuf [4]time.Duration
	afters := delaysBuf[:0]
	if opts.RateLimited {
		q.limiterMu.Lock()
		defer q.limiterMu.Unlock()
		if q.core.shuttingDown.Load() {
			return
		}
		for _, item := range items {
			after := opts.After
			if d := q.rateLimiter.When(item); after <= 0 || d < after {
				after = d
			}
			afters = append(afters, after)
		}
	}
	q.core.mu.Lock()
	defer q.core.mu.Unlock()
	if q.core.shuttingDown.Load() {
		return
	}
	how := addEarliest
	switch {
	case opts.Reschedule:
		how = addRescheduled
	case q.debounce.enabled() && !opts.RateLimited && opts.After <= 0:
		how = addDebounced
	}
	wakeLoop := false
	for i, item := range items {
		after := opts.After
		if opts.RateLimited {
			after = afters[i]
		}
		if q.addLocked(item, q.core.items.Hash(item), priority, after, how) {
			wakeLoop = true
		}
		if opts.RateLimited || opts.After > 0 {
			q.core.carryServed(item, false) // a retry links the adds its failed reconcile served
		}
	}
	if wakeLoop {
		q.core.delays.poke()
	}
}

// addKind says how an add with a delay sets the item's ready time.
type addKind uint8

const (
	// addEarliest: after the delay, or at once; the earliest ready time wins.
	addEarliest addKind = iota
	// addDebounced: at the end of the item's Debounce burst.
	addDebounced
	// addRescheduled: after the delay, replacing the item's ready time.
	addRescheduled
)

// addLocked merges one add into item's record and reports whether the
// delay goroutine must look at the heap again. The caller holds mu.
func (q *TypedPriorityQueue[T]) addLocked(item T, hash uint32, priority int, after time.Duration, how addKind) (wakeLoop bool) {
	entry, id := q.core.items.Lookup(item, hash)
	var kept itemTrace // the links of a park an add ends, which the add keeps
	if entry != nil && entry.Val.pending == pendingParked {
		q.core.cancelWait(id) // an add ends a park: from here on, as if none
		if !entry.Val.processing {
			kept, _ = q.core.trace.itemsOf(id)
			q.core.release(id)
			entry = nil
		}
	}
	if after > 0 || how == addDebounced {
		if how != addDebounced {
			q.core.delays.countRetry()
		}
		switch {
		case entry == nil:
			_, id = q.core.items.Insert(item, hash, record{pending: pendingDelay})
			q.order.setPriority(id, priority)
			q.core.keepLinks(id, kept)
		case entry.Val.pending == pendingReady: // ready already: the earliest wins
			q.raise(entry, id, priority)
			return false
		case entry.Val.pending == pendingDelay:
			q.order.setPriority(id, max(q.order.priority(id), priority))
		default: // processing, with nothing pending
			entry.Val.pending = pendingDelay
			q.order.setPriority(id, priority)
		}
		switch how {
		case addDebounced:
			return q.core.delays.debounce(ownDelay(item), q.debounce)
		case addRescheduled:
			return q.core.delays.reschedule(ownDelay(item), after)
		}
		return q.core.delays.add(ownDelay(item), after)
	}
	switch {
	case entry == nil:
		_, id = q.core.items.Insert(item, hash, record{pending: pendingReady})
		q.order.setPriority(id, priority)
		q.core.queueHeld(id)
		q.core.keepLinks(id, kept)
	case entry.Val.pending == pendingReady:
		q.raise(entry, id, priority)
		return false
	case entry.Val.pending == pendingDelay:
		q.core.delays.remove(ownDelay(item))
		entry.Val.pending = pendingReady
		q.order.setPriority(id, max(q.order.priority(id), priority))
		if !entry.Val.processing {
			q.core.queueHeld(id)
		}
	default: // processing, with nothing pending
		entry.Val.pending = pendingReady
		q.order.setPriority(id, priority)
	}
	q.countReady(item, q.order.priority(id))
	return false
}

// countReady records an add that made an item ready.
func (q *TypedPriorityQueue[T]) countReady(item T, priority int) {
	q.core.countAdd(item)
	if q.depthByPriority != nil {
		q.depthByPriority.Inc(priority)
	}
}

// raise sets the priority of the ready item with entry and id to priority
// if that is higher, moving a queued item to the back of its new level.
func (q *TypedPriorityQueue[T]) raise(entry *table.Entry[T, record], id int32, priority int) {
	old := q.order.priority(id)
	if priority <= old {
		return
	}
	if q.depthByPriority != nil {
		q.depthByPriority.Dec(old)
		q.depthByPriority.Inc(priority)
	}
	if entry.Val.processing {
		q.order.setPriority(id, priority)
		return
	}
	q.order.raise(id, priority)
}

// Len returns the number of ready items; see [Typed.Len].
func (q *TypedPriorityQueue[T]) Len() int { return q.core.length() }

// Get is GetWithPriority without the priority.
func (q *TypedPriorityQueue[T]) Get() (item T, shutdown bool) {
	item, _, err := q.get(context.Background())
	return item, err != nil
}

// GetWithPriority is Get that also returns the item's priority. An item ready
// for MaxWait goes first; otherwise the highest priority does.
func (q *TypedPriorityQueue[T]) GetWithPriority() (item T, priority int, shutdown bool) {
	item, priority, err := q.get(context.Background())
	return item, priority, err != nil
}

// GetWithPriorityContext is GetContext that also returns the item's
// priority.
func (q *TypedPriorityQueue[T]) GetWithPriorityContext(ctx context.Context) (item T, priority int, err error) {
	if err := ctx.Err(); err != nil {
		return item, 0, err
	}
	return q.get(ctx)
}

// GetContext is Get with a context; see [Typed.GetContext].
func (q *TypedPriorityQueue[T]) GetContext(ctx context.Context) (item T, err error) {
	if err := ctx.Err(); err != nil {
		return item, err
	}
	item, _, err = q.get(ctx)
	return item, err
}

func (q *TypedPriorityQueue[T]) get(ctx context.Context) (item T, priority int, err error) {
	q.core.mu.Lock()
	defer q.core.mu.Unlock()
	item, id, err := q.core.get(ctx, "TypedPriorityQueue; make one with NewTypedPriorityQueue")
	if err != nil {
		return item, 0, err
	}
	priority = q.order.priority(id)
	if q.depthByPriority != nil {
		q.depthByPriority.Dec(priority)
	}
	return item, priority, nil
}

// Done marks item as done processing; see [Typed.Done].
func (q *TypedPriorityQueue[T]) Done(item T) { q.core.doneItem(item) }

// Remove also forgets item, as Forget does; see [Typed.Remove].
func (q *TypedPriorityQueue[T]) Remove(item T) bool {
	hash := q.core.items.Hash(item)
	q.limiterMu.Lock()
	defer q.limiterMu.Unlock()
	q.rateLimiter.Forget(item)
	q.parkBackoff.Forget(item)
	q.core.mu.Lock()
	defer q.core.mu.Unlock()
	entry, id := q.core.items.Lookup(item, hash)
	if entry == nil {
		return false
	}
	switch entry.Val.pending {
	case pendingDelay, pendingParked:
		q.core.removeWaiting(id)
	case pendingReady:
		if q.depthByPriority != nil {
			q.depthByPriority.Dec(q.order.priority(id))
		}
		q.core.removeReady(id)
	default:
		return false
	}
	return true
}

// Park is [TypedRateLimitingQueue.Park]; a woken item keeps its priority.
func (q *TypedPriorityQueue[T]) Park(item T, events ...string) {
	hash := q.core.items.Hash(item)
	q.limiterMu.Lock()
	defer q.limiterMu.Unlock()
	if q.core.shuttingDown.Load() {
		return
	}
	q.core.mu.Lock()
	defer q.core.mu.Unlock()
	q.core.parkLocked(item, hash, func() time.Duration { return q.parkBackoff.When(item) }, events)
}

// park is Park with the backoff a layer above took from its own rate
// limiter.
func (q *TypedPriorityQueue[T]) park(item T, backoff func() time.Duration, events []string) {
	hash := q.core.items.Hash(item)
	q.core.mu.Lock()
	defer q.core.mu.Unlock()
	q.core.parkLocked(item, hash, backoff, events)
}

// Wake ends the parks that wait for event; see [Typed.Wake].
func (q *TypedPriorityQueue[T]) Wake(event string) int { return q.WakeFunc(event, nil) }

// WakeFunc ends the parks that accept accepts; see [Typed.WakeFunc].
func (q *TypedPriorityQueue[T]) WakeFunc(event string, accept func(item T) bool) int {
	return q.core.wakeFunc(event, accept)
}

// WakeItem ends item's park; see [Typed.WakeItem].
func (q *TypedPriorityQueue[T]) WakeItem(item T) bool { return q.core.wakeItem(item) }

// SetGroupLimit sets a group's limit; see [Typed.SetGroupLimit].
func (q *TypedPriorityQueue[T]) SetGroupLimit(group string, limit int) {
	q.core.setGroupLimit(group, limit)
}

// Forget clears item's failures and park backoff; Done must still be called.
func (q *TypedPriorityQueue[T]) Forget(item T) {
	q.limiterMu.Lock()
	defer q.limiterMu.Unlock()
	q.rateLimiter.Forget(item)
	q.parkBackoff.Forget(item)
}

// NumRequeues returns the rate limiter's failure count for item.
func (q *TypedPriorityQueue[T]) NumRequeues(item T) int {
	q.limiterMu.Lock()
	defer q.limiterMu.Unlock()
	return q.rateLimiter.NumRequeues(item)
}

// ShuttingDown reports whether a shutdown has begun.
func (q *TypedPriorityQueue[T]) ShuttingDown() bool { return q.core.shuttingDown.Load() }

// ShutDown also drops delayed items; see [Typed.ShutDown].
func (q *TypedPriorityQueue[T]) ShutDown() {
	q.limiterMu.Lock()
	q.core.mu.Lock()
	q.core.releaseDrains()
	q.core.mu.Unlock()
	q.limiterMu.Unlock()
	q.stopGoroutines()
}

// ShutDownWithDrain also drops delayed items; see [Typed.ShutDownWithDrain].
func (q *TypedPriorityQueue[T]) ShutDownWithDrain() {
	const zero = "TypedPriorityQueue; make one with NewTypedPriorityQueue"
	if q.core.drained.L == nil {
		panic("workqueue: ShutDownWithDrain on a zero " + zero)
	}
	q.limiterMu.Lock()
	q.core.mu.Lock()
	q.core.stopAddsLocked()
	q.core.mu.Unlock()
	// Not held while the drain waits: workers still call Forget.
	q.limiterMu.Unlock()
	q.core.mu.Lock()
	q.core.drain(zero)
	q.core.mu.Unlock()
	q.stopGoroutines()
}

func (q *TypedPriorityQueue[T]) stopGoroutines() {
	q.core.stopDelays()
	q.core.stopMetrics()
}

// Snapshot lists Queued in hand-out order; see
// [TypedRateLimitingQueue.Snapshot].
func (q *TypedPriorityQueue[T]) Snapshot(n int) Snapshot[T] {
	// limiterMu is held from the view to the failure counts, so that they
	// are those of the view's instant, without calling the rate limiter
	// under mu.
	q.limiterMu.Lock()
	defer q.limiterMu.Unlock()
	q.core.mu.Lock()
	s := q.core.snapshotLocked(n)
	q.core.mu.Unlock()
	s.Failures = listedFailures(q.rateLimiter, &s)
	return s
}
