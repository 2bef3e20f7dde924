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

// TypedRateLimitingQueueConfig configures a queue made by
// [NewTypedRateLimitingQueueWithConfig]. The zero value is valid.
type TypedRateLimitingQueueConfig[T comparable] struct {
	// Name identifies the queue in metrics. A queue without a name records
	// no metrics; a named queue without a MetricsProvider records none
	// either, and the first one made in a process logs a warning saying
	// so.
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

	// ParkBackoff gives the least time an item waits after a wake ends its
	// park; see [TypedRateLimitingQueue.Park]. It counts parks apart from
	// failures: Forget and Remove reset it, NumRequeues does not read it.
	// It is called with the queue's lock held and must not call the
	// queue. Nil means an exponential backoff per item from 5 ms up to
	// 10 s.
	ParkBackoff TypedRateLimiter[T]

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
func NewTypedRateLimitingQueue[T comparable](rateLimiter TypedRateLimiter[T]) *TypedRateLimitingQueue[T] {
	return NewTypedRateLimitingQueueWithConfig(rateLimiter, TypedRateLimitingQueueConfig[T]{})
}

// NewTypedRateLimitingQueueWithConfig returns a new rate-limiting queue
// configured by config that takes its delays from rateLimiter. All methods
// of the result are safe for concurrent use. It panics if rateLimiter is
// nil or MaxParkTime is negative.
func NewTypedRateLimitingQueueWithConfig[T comparable](rateLimiter TypedRateLimiter[T], config TypedRateLimitingQueueConfig[T]) *TypedRateLimitingQueue[T] {
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
	if config.ParkBackoff == nil {
		config.ParkBackoff = defaultParkBackoff[T]()
	}
	return &TypedRateLimitingQueue[T]{
		delaying:    config.DelayingQueue,
		rateLimiter: rateLimiter,
		parkBackoff: config.ParkBackoff,
		clock:       config.Clock,
		maxPark:     maxPark,
	}
}

// TypedRateLimitingQueue is the rate-limiting queue this package makes: a
// [TypedRateLimitingInterface] that also has GetContext, Remove, Snapshot
// and parking. Its methods are safe for concurrent use. The zero value is
// not usable: make one with [NewTypedRateLimitingQueue] or
// [NewTypedRateLimitingQueueWithConfig].
type TypedRateLimitingQueue[T comparable] struct {
	// It starts no goroutine of its own: its shutdowns begin the delaying
	// queue's under mu, then leave the rest to it.
	delaying    TypedDelayingInterface[T]
	rateLimiter TypedRateLimiter[T]
	parkBackoff TypedRateLimiter[T]
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

// Add adds item at once; see [Typed.Add].
func (q *TypedRateLimitingQueue[T]) Add(item T) { q.delaying.Add(item) }

// AddAfter adds item once duration has passed; see
// [TypedDelayingQueue.AddAfter].
func (q *TypedRateLimitingQueue[T]) AddAfter(item T, duration time.Duration) {
	q.delaying.AddAfter(item, duration)
}

// Len returns the number of items ready to be handed out.
func (q *TypedRateLimitingQueue[T]) Len() int { return q.delaying.Len() }

// Get hands out the next ready item; see [Typed.Get].
func (q *TypedRateLimitingQueue[T]) Get() (item T, shutdown bool) { return q.delaying.Get() }

// Done marks item as done processing; see [Typed.Done].
func (q *TypedRateLimitingQueue[T]) Done(item T) { q.delaying.Done(item) }

// ShuttingDown reports whether a shutdown has begun.
func (q *TypedRateLimitingQueue[T]) ShuttingDown() bool { return q.delaying.ShuttingDown() }

// AddRateLimited adds item after rateLimiter.When(item). After a shutdown
// has begun it does nothing, and does not consult the rate limiter, so no
// failure is recorded for an item that will never be retried.
func (q *TypedRateLimitingQueue[T]) AddRateLimited(item T) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.stopped || q.ShuttingDown() {
		return
	}
	q.AddAfter(item, q.rateLimiter.When(item))
}

// Park parks item, which the caller got from Get and has not yet marked
// done, until one of events, as [Typed.Park] does. A wake queues it once
// its park backoff has passed (see ParkBackoff in
// [TypedRateLimitingQueueConfig]), so that events that come often but do
// not help it cannot make it loop. A park is not a failure: it does not
// consult the rate limiter and NumRequeues does not count it. Park does
// nothing after a shutdown has begun, for an item not being processed, or
// for one added again since its Get. Over a delaying queue from outside
// this package, which cannot park, it adds the item after MaxParkTime or
// its park backoff, whichever is longer, as if no event came.
func (q *TypedRateLimitingQueue[T]) Park(item T, events ...string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.stopped || q.ShuttingDown() {
		return
	}
	backoff := func() time.Duration { return q.parkBackoff.When(item) }
	if p, ok := q.delaying.(parkingQueue[T]); ok {
		p.park(item, backoff, events)
		return
	}
	q.delaying.AddAfter(item, max(backoff(), q.maxPark))
}

// Wake ends the parks that wait for event; see [Typed.Wake]. Over a
// delaying queue from outside this package it does nothing.
func (q *TypedRateLimitingQueue[T]) Wake(event string) int { return q.WakeFunc(event, nil) }

// WakeFunc ends the parks that wait for event and that accept accepts;
// see [Typed.WakeFunc]. Over a delaying queue from outside this package it
// does nothing.
func (q *TypedRateLimitingQueue[T]) WakeFunc(event string, accept func(item T) bool) int {
	if p, ok := q.delaying.(parkingQueue[T]); ok {
		return p.WakeFunc(event, accept)
	}
	return 0
}

// WakeItem ends item's park and queues it at once; see [Typed.WakeItem].
// Over a delaying queue from outside this package it does nothing.
func (q *TypedRateLimitingQueue[T]) WakeItem(item T) bool {
	if p, ok := q.delaying.(parkingQueue[T]); ok {
		return p.WakeItem(item)
	}
	return false
}

// NumRequeues returns rateLimiter.NumRequeues(item).
func (q *TypedRateLimitingQueue[T]) NumRequeues(item T) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.rateLimiter.NumRequeues(item)
}

// Forget clears item's failures (rateLimiter.Forget) and its park backoff.
func (q *TypedRateLimitingQueue[T]) Forget(item T) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.rateLimiter.Forget(item)
	q.parkBackoff.Forget(item)
}

// GetContext hands out the next ready item or returns when ctx ends; see
// [Typed.GetContext]. A delaying queue from outside this package needs a
// GetContext method of the same shape; without one, GetContext returns an
// error that wraps [errors.ErrUnsupported].
func (q *TypedRateLimitingQueue[T]) GetContext(ctx context.Context) (T, error) {
	return getContext(ctx, q.delaying)
}

// Remove takes item back from the delaying queue, with its Remove, and
// forgets it as Forget does, as one step; it reports whether the delaying
// queue took anything back. A delaying queue from outside this package
// without a Remove method keeps the item; it is forgotten all the same.
func (q *TypedRateLimitingQueue[T]) Remove(item T) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.rateLimiter.Forget(item)
	q.parkBackoff.Forget(item)
	r, ok := q.delaying.(remover[T])
	return ok && r.Remove(item)
}

// ShutDown begins the delaying queue's shutdown under mu, then shuts it
// down without holding mu, so that workers calling Forget are not held up
// while its goroutines are joined.
func (q *TypedRateLimitingQueue[T]) ShutDown() {
	q.beginShutDown()
	q.delaying.ShutDown()
}

// ShutDownWithDrain begins the delaying queue's shutdown, then drains it
// with its ShutDownWithDrain without holding mu, so that workers can still
// call AddRateLimited (which does nothing) and Forget while the drain waits
// for them.
func (q *TypedRateLimitingQueue[T]) ShutDownWithDrain() {
	q.beginShutDown()
	q.delaying.ShutDownWithDrain()
}

// beginShutDown is the instant at which the shutdown begins. A delaying
// queue from outside this package begins its own only when it is shut
// down; until then this layer refuses AddRateLimited while its Add and
// AddAfter still add.
func (q *TypedRateLimitingQueue[T]) beginShutDown() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.stopped = true
	if s, ok := q.delaying.(addStopper); ok {
		s.stopAdds()
	}
}

// Snapshot returns a view of the queue at one instant, with the failure
// counts of the items it lists; see [TypedDelayingQueue.Snapshot].
func (q *TypedRateLimitingQueue[T]) Snapshot(n int) Snapshot[T] {
	q.mu.Lock()
	defer q.mu.Unlock()
	var s Snapshot[T]
	if inner, ok := q.delaying.(snapshotter[T]); ok {
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
