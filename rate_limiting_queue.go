package workqueue

import (
	"context"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// TypedRateLimitingInterface is a delaying work queue that also adds items
// after a delay chosen by a [TypedRateLimiter], typically to retry failures
// with backoff. The implementation in this package is safe for concurrent
// use.
type TypedRateLimitingInterface[T comparable] interface {
	TypedDelayingInterface[T]
	// AddRateLimited adds item after the delay the rate limiter gives it.
	AddRateLimited(item T)
	// Forget tells the rate limiter that item is finished with, successfully
	// or for good, so its failure history is cleared. The queue itself is
	// unchanged: Done must still be called.
	Forget(item T)
	// NumRequeues returns how many times item has been rate limited since it
	// was last forgotten.
	NumRequeues(item T) int
}

// TypedRateLimitingQueue is the rate-limiting queue this package makes: a
// [TypedRateLimitingInterface] with this package's additions: GetContext,
// Remove and Snapshot. Its methods are safe for concurrent use. The constructors keep
// client-go's signatures, so every queue they return holds this interface
// behind the client-go one:
//
//	q := workqueue.NewTypedRateLimitingQueue(limiter).(workqueue.TypedRateLimitingQueue[string])
type TypedRateLimitingQueue[T comparable] interface {
	TypedRateLimitingInterface[T]
	// GetContext is Get that also returns when ctx ends; see
	// [Typed.GetContext].
	GetContext(ctx context.Context) (item T, err error)
	// Remove takes item back from the queue and from the items waiting for
	// their delay, and forgets its failures; see [Typed.Remove].
	Remove(item T) bool
	// Snapshot returns a view of the queue at one instant, listing at
	// most n items of each kind; see [Typed.Snapshot].
	Snapshot(n int) Snapshot[T]
	// Park parks item, being processed, until one of events, and records
	// a failure for it; see [TypedPriorityQueue.Park].
	Park(item T, events ...string)
	// Wake ends the parks that wait for event; see [Typed.Wake].
	Wake(event string) int
	// WakeFunc ends the parks that wait for event and that accept
	// accepts; see [Typed.WakeFunc].
	WakeFunc(event string, accept func(item T) bool) int
	// WakeItem ends item's park; see [Typed.WakeItem].
	WakeItem(item T) bool
}

// TypedRateLimitingQueueConfig configures a queue made by
// [NewTypedRateLimitingQueueWithConfig]. The zero value is valid.
type TypedRateLimitingQueueConfig[T comparable] struct {
	// Name identifies the queue in metrics. A queue without a name records
	// no metrics.
	Name string

	// MetricsProvider creates the queue's metrics. A nil provider records
	// nothing and costs nothing.
	MetricsProvider MetricsProvider

	// Clock decides when delays end. Nil means the real clock.
	Clock clock.WithTicker

	// MaxParkTime bounds how long an item stays parked without an event;
	// see [TypedQueueConfig.MaxParkTime]. Zero means [DefaultMaxParkTime].
	// Over a DelayingQueue from outside this package, which cannot park,
	// Park adds the item after MaxParkTime or its backoff, whichever is
	// longer, as if no event came.
	MaxParkTime time.Duration

	// DelayingQueue is the queue below this layer. Nil means a new delaying
	// queue with this config's name, provider and clock. A delaying queue
	// from outside this package begins its shutdown only in its own
	// ShutDown or ShutDownWithDrain, so a shutdown of this layer refuses
	// AddRateLimited a moment before that queue refuses Add.
	DelayingQueue TypedDelayingInterface[T]
}

// NewTypedRateLimitingQueue returns a new rate-limiting queue with no name
// and no metrics that takes its delays from rateLimiter. It is shorthand for
// NewTypedRateLimitingQueueWithConfig(rateLimiter,
// TypedRateLimitingQueueConfig[T]{}). It panics if rateLimiter is nil.
func NewTypedRateLimitingQueue[T comparable](rateLimiter TypedRateLimiter[T]) TypedRateLimitingInterface[T] {
	return NewTypedRateLimitingQueueWithConfig(rateLimiter, TypedRateLimitingQueueConfig[T]{})
}

// NewTypedRateLimitingQueueWithConfig returns a new rate-limiting queue
// configured by config that takes its delays from rateLimiter. All methods
// of the result are safe for concurrent use. It panics if rateLimiter is
// nil or MaxParkTime is negative.
func NewTypedRateLimitingQueueWithConfig[T comparable](rateLimiter TypedRateLimiter[T], config TypedRateLimitingQueueConfig[T]) TypedRateLimitingInterface[T] {
	if rateLimiter == nil {
		panic("workqueue: NewTypedRateLimitingQueue needs a rate limiter, got nil")
	}
	maxPark := maxParkTime("NewTypedRateLimitingQueueWithConfig", config.MaxParkTime)
	if config.DelayingQueue == nil {
		config.DelayingQueue = NewTypedDelayingQueueWithConfig(TypedDelayingQueueConfig[T]{
			Name:            config.Name,
			MetricsProvider: config.MetricsProvider,
			Clock:           config.Clock,
			MaxParkTime:     maxPark,
		})
	}
	if config.Clock == nil {
		config.Clock = clock.RealClock{}
	}
	return &rateLimitingQueue[T]{
		TypedDelayingInterface: config.DelayingQueue,
		rateLimiter:            rateLimiter,
		clock:                  config.Clock,
		maxPark:                maxPark,
	}
}

// rateLimitingQueue starts no goroutine of its own: its shutdowns begin the
// delaying queue's under its lock, then leave the rest to it.
type rateLimitingQueue[T comparable] struct {
	TypedDelayingInterface[T]
	rateLimiter TypedRateLimiter[T]
	clock       clock.PassiveClock // for a Snapshot over a queue without one
	maxPark     time.Duration      // for Park over a queue that cannot park

	// mu makes AddRateLimited one step: its check of the shutdown flag, its
	// call of the rate limiter and its add. Forget and NumRequeues take it
	// too, so that none of them sees a failure recorded for an item not yet
	// added, and a shutdown holds it while the flag changes, so that no
	// failure is recorded for an item that the shutdown then drops. The
	// limiters of this package serialize these calls on a lock of their
	// own already; a slow custom limiter serializes them here too.
	mu sync.Mutex
	// stopped is set, under mu, when a shutdown begins below a delaying
	// queue that is not this package's, which begins its own shutdown only
	// once its drain is called.
	stopped bool
}

// AddRateLimited adds item after rateLimiter.When(item). After a shutdown
// has begun it does nothing, and does not consult the rate limiter, so no
// failure is recorded for an item that will never be retried.
func (q *rateLimitingQueue[T]) AddRateLimited(item T) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.stopped || q.ShuttingDown() {
		return
	}
	q.AddAfter(item, q.rateLimiter.When(item))
}

// Park parks item, which the caller got from Get and has not yet marked
// done, until one of events, as [Typed.Park] does, and records a failure
// for it with the rate limiter, as AddRateLimited does: a wake before the
// backoff rateLimiter.When(item) has passed queues the item when it
// passes, so that events that come often but do not help it cannot make
// it loop. The failure is recorded whenever no shutdown has begun, even
// if the park itself does nothing (for an item not being processed, or
// added again since its Get), as AddRateLimited records it for an item
// already queued. Forget it when it succeeds, as after any retry. After a
// shutdown has begun it does nothing, and does not consult the rate
// limiter. Over a delaying queue from outside this package, which cannot
// park, it adds the item after MaxParkTime or its backoff, whichever is
// longer, as if no event came.
func (q *rateLimitingQueue[T]) Park(item T, events ...string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.stopped || q.ShuttingDown() {
		return
	}
	backoff := q.rateLimiter.When(item)
	if p, ok := q.TypedDelayingInterface.(parkingQueue[T]); ok {
		p.park(item, backoff, events)
		return
	}
	q.AddAfter(item, max(backoff, q.maxPark))
}

// Wake ends the parks that wait for event; see [Typed.Wake]. Over a
// delaying queue from outside this package it does nothing.
func (q *rateLimitingQueue[T]) Wake(event string) int { return q.WakeFunc(event, nil) }

// WakeFunc ends the parks that wait for event and that accept accepts;
// see [Typed.WakeFunc]. Over a delaying queue from outside this package it
// does nothing.
func (q *rateLimitingQueue[T]) WakeFunc(event string, accept func(item T) bool) int {
	if p, ok := q.TypedDelayingInterface.(parkingQueue[T]); ok {
		return p.WakeFunc(event, accept)
	}
	return 0
}

// WakeItem ends item's park and queues it at once; see [Typed.WakeItem].
// Over a delaying queue from outside this package it does nothing.
func (q *rateLimitingQueue[T]) WakeItem(item T) bool {
	if p, ok := q.TypedDelayingInterface.(parkingQueue[T]); ok {
		return p.WakeItem(item)
	}
	return false
}

// NumRequeues returns rateLimiter.NumRequeues(item).
func (q *rateLimitingQueue[T]) NumRequeues(item T) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.rateLimiter.NumRequeues(item)
}

// Forget calls rateLimiter.Forget(item).
func (q *rateLimitingQueue[T]) Forget(item T) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.rateLimiter.Forget(item)
}

// GetContext hands out the next ready item or returns when ctx ends; see
// [Typed.GetContext]. A delaying queue from outside this package needs a
// GetContext method of the same shape; without one, GetContext returns an
// error that wraps [errors.ErrUnsupported].
func (q *rateLimitingQueue[T]) GetContext(ctx context.Context) (T, error) {
	return getContext(ctx, q.TypedDelayingInterface)
}

// Remove takes item back from the delaying queue, with its Remove, and
// forgets its failures, as one step; it reports whether the delaying queue
// took anything back. A delaying queue from outside this package without a
// Remove method keeps the item; its failures are forgotten all the same.
func (q *rateLimitingQueue[T]) Remove(item T) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.rateLimiter.Forget(item)
	r, ok := q.TypedDelayingInterface.(remover[T])
	return ok && r.Remove(item)
}

// ShutDown begins the delaying queue's shutdown under mu, then shuts it
// down without holding mu, so that workers calling Forget are not held up
// while its goroutines are joined.
func (q *rateLimitingQueue[T]) ShutDown() {
	q.beginShutDown()
	q.TypedDelayingInterface.ShutDown()
}

// ShutDownWithDrain begins the delaying queue's shutdown, then drains it
// with its ShutDownWithDrain without holding mu, so that workers can still
// call AddRateLimited (which does nothing) and Forget while the drain waits
// for them.
func (q *rateLimitingQueue[T]) ShutDownWithDrain() {
	q.beginShutDown()
	q.TypedDelayingInterface.ShutDownWithDrain()
}

// beginShutDown is the instant at which the shutdown begins. A delaying
// queue from outside this package begins its own only when it is shut
// down; until then this layer refuses AddRateLimited while its Add and
// AddAfter still add.
func (q *rateLimitingQueue[T]) beginShutDown() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.stopped = true
	if s, ok := q.TypedDelayingInterface.(addStopper); ok {
		s.stopAdds()
	}
}

// Snapshot returns a view of the queue at one instant, with the failure
// counts of the items it lists; see [delayingQueue.Snapshot].
func (q *rateLimitingQueue[T]) Snapshot(n int) Snapshot[T] {
	q.mu.Lock()
	defer q.mu.Unlock()
	var s Snapshot[T]
	if inner, ok := q.TypedDelayingInterface.(snapshotter[T]); ok {
		s = inner.Snapshot(n)
	} else {
		s = Snapshot[T]{Taken: q.clock.Now(), ShuttingDown: q.ShuttingDown(), Depth: q.Len()}
	}
	s.Failures = listedFailures(q.rateLimiter, &s)
	return s
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
