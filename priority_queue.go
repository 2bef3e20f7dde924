package workqueue

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/go-workqueue/workqueue/internal/list"
	"github.com/go-workqueue/workqueue/internal/table"
	"github.com/go-workqueue/workqueue/metrics"
	"k8s.io/utils/clock"
)

// TypedPriorityQueue's row of the capabilities table (capabilities.go).
var (
	_ parkingQueue[int] = (*TypedPriorityQueue[int])(nil)
	_ rescheduler[int]  = (*TypedPriorityQueue[int])(nil)
	_ additions[int]    = (*TypedPriorityQueue[int])(nil)
)

// TypedPriorityQueueConfig configures [NewTypedPriorityQueue] (zero is valid;
// shared fields as in [TypedRateLimitingQueueConfig]). Fairness and
// FairnessWeights functions run under the queue's lock: same answer for an
// argument, no panic, no queue call.
type TypedPriorityQueueConfig[T comparable] struct {
	Name            string
	MetricsProvider MetricsProvider
	Clock           clock.WithTicker
	Logger          *slog.Logger
	MaxParkTime     time.Duration
	ParkBackoff     TypedRateLimiter[T]
	Fairness        []func(item T) string // keys that take turns within a priority: the first function's, then within each the second's, ...
	// FairnessWeights[d](key): items a key of Fairness[d] hands out in a row (nil, missing, below 1: 1), read as it joins the rotation,
	// after each round and by Snapshot; an item of a key with nothing queued waits for at most the other keys' weights' sum per level.
	FairnessWeights []func(key string) int
	MaxWait         time.Duration   // if positive, an item ready that long goes before any other, whatever its priority; its keys keep their turns
	GroupLimits     *GroupLimits[T] // a key whose items all wait for a slot rejoins at the back when one frees; MaxWait: the longest ready with one
	Debounce        Debounce        // at the highest priority the burst's adds asked for
}

// TypedPriorityQueue is a [TypedRateLimitingInterface] with [Base]'s methods,
// AddWithOpts, GetWithPriority and Reschedule, safe for concurrent use: higher
// priorities first, each FIFO or in turns of Fairness keys. A re-add keeps the
// highest priority and earliest ready time asked for, a woken item its priority; a
// raised item goes behind those queued at its new priority.
type TypedPriorityQueue[T comparable] struct {
	Base[T]
	core  core[T]
	order *priorityOrder[T]
	lim   limiter[T]

	depthByPriority metrics.PriorityGauge
	debounce        Debounce // the config's
}

// NewTypedPriorityQueue returns a priority queue. It panics if rateLimiter, a
// Fairness function or GroupLimits' Group is nil, FairnessWeights is longer
// than Fairness, MaxWait or MaxParkTime is negative, or Debounce is not valid.
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
		lim:             limiter[T]{rateLimiter: rateLimiter, parkBackoff: config.ParkBackoff},
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
	q.Base = Base[T]{top: q, c: &q.core, lim: &q.lim, prio: q.order, depth: q.depthByPriority, provider: config.MetricsProvider, name: config.Name}
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
// item): [TypedDelayingQueue.Reschedule], at the highest priority asked for.
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
		q.lim.mu.Lock()
		defer q.lim.mu.Unlock()
		if q.core.shuttingDown.Load() {
			return
		}
		for _, item := range items {
			after := opts.After
			if d := q.lim.rateLimiter.When(item); after <= 0 || d < after {
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
	var kept *itemTrace // the links of a park an add ends, which the add keeps
	if entry != nil && entry.Val.pending == pendingParked {
		q.core.cancelWait(id) // an add ends a park: from here on, as if none
		if !entry.Val.processing {
			if t, ok := q.core.trace.itemsOf(id); ok {
				kept = &t
			}
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
			if kept != nil {
				q.core.keepLinks(id, *kept)
			}
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
		if kept != nil {
			q.core.keepLinks(id, *kept)
		}
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

// GetWithPriority is Get that also returns the item's priority.
func (q *TypedPriorityQueue[T]) GetWithPriority() (item T, priority int, shutdown bool) {
	if q.c == nil {
		q.outside("GetWithPriority")
	}
	item, priority, err := q.get(context.Background(), nil)
	return item, priority, err != nil
}

// GetWithPriorityContext is GetContext that also returns the item's
// priority.
func (q *TypedPriorityQueue[T]) GetWithPriorityContext(ctx context.Context) (item T, priority int, err error) {
	if q.c == nil {
		q.outside("GetWithPriorityContext")
	}
	if err := ctx.Err(); err != nil {
		return item, 0, err
	}
	return q.get(ctx, nil)
}

// Forget clears item's failures and park backoff; Done must still be called.
func (q *TypedPriorityQueue[T]) Forget(item T) {
	q.lim.mu.Lock()
	defer q.lim.mu.Unlock()
	q.lim.forget(item)
}

// NumRequeues returns the rate limiter's failure count for item.
func (q *TypedPriorityQueue[T]) NumRequeues(item T) int {
	q.lim.mu.Lock()
	defer q.lim.mu.Unlock()
	return q.lim.rateLimiter.NumRequeues(item)
}
