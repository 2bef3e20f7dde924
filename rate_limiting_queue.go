package workqueue

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// TypedRateLimitingQueue's row of the capabilities table (capabilities.go).
var (
	_ rescheduler[int] = (*TypedRateLimitingQueue[int])(nil)
	_ additions[int]   = (*TypedRateLimitingQueue[int])(nil)
)

// TypedRateLimitingInterface is client-go's rate-limiting queue interface.
type TypedRateLimitingInterface[T comparable] interface {
	TypedDelayingInterface[T]
	AddRateLimited(item T)
	Forget(item T)
	NumRequeues(item T) int
}

// TypedRateLimitingQueueConfig configures
// [NewTypedRateLimitingQueueWithConfig]. The zero value is valid.
type TypedRateLimitingQueueConfig[T comparable] struct {
	// Name, Logger, MetricsProvider, Clock and MaxParkTime are as in
	// [TypedQueueConfig]. With a DelayingQueue, Name, Logger and
	// MetricsProvider are ignored: that queue has its own.
	Name            string
	Logger          *slog.Logger
	MetricsProvider MetricsProvider
	Clock           clock.WithTicker
	MaxParkTime     time.Duration
	// ParkBackoff gives, at each Park that takes effect, how long from the
	// Park a wake waits before it queues the item (WakeItem does not
	// wait); Forget and Remove reset it for the next park. It is called
	// with the queue locked and must not call the queue. Nil means a
	// backoff per item from 5 ms, doubling up to 10 s.
	ParkBackoff TypedRateLimiter[T]
	// AddCancelsDelay is [TypedDelayingQueueConfig.AddCancelsDelay] for
	// the delaying queue this layer makes: an Add then also cancels a
	// pending AddAfter or AddRateLimited of the item. It cannot be set
	// with a DelayingQueue.
	AddCancelsDelay bool
	// GroupLimits is [TypedQueueConfig.GroupLimits] for the queue this
	// layer makes; it cannot be set with a DelayingQueue.
	GroupLimits *GroupLimits[T]
	// DelayingQueue is the queue below; nil means a new delaying queue.
	DelayingQueue TypedDelayingInterface[T]
	// Debounce is [TypedDelayingQueueConfig.Debounce] for the delaying
	// queue this layer makes; AddRateLimited is never debounced. It cannot
	// be set with a DelayingQueue.
	Debounce Debounce
}

// NewTypedRateLimitingQueue is shorthand for
// NewTypedRateLimitingQueueWithConfig with a zero config.
func NewTypedRateLimitingQueue[T comparable](rateLimiter TypedRateLimiter[T]) *TypedRateLimitingQueue[T] {
	return NewTypedRateLimitingQueueWithConfig(rateLimiter, TypedRateLimitingQueueConfig[T]{})
}

// NewTypedRateLimitingQueueWithConfig returns a new rate-limiting queue. It
// panics if rateLimiter is nil, MaxParkTime is negative, Debounce is not
// valid (see [Debounce]), AddCancelsDelay, Debounce or GroupLimits is set
// with a DelayingQueue, or GroupLimits has a nil Group.
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
			Logger:          config.Logger,
			MaxParkTime:     maxPark,
			AddCancelsDelay: config.AddCancelsDelay,
			GroupLimits:     config.GroupLimits,
			Debounce:        config.Debounce.checked("NewTypedRateLimitingQueueWithConfig"),
		})
	} else if config.GroupLimits != nil {
		panic("workqueue: NewTypedRateLimitingQueueWithConfig: GroupLimits with a DelayingQueue; set it in the DelayingQueue's own config")
	} else if config.AddCancelsDelay {
		panic("workqueue: NewTypedRateLimitingQueueWithConfig: AddCancelsDelay with a DelayingQueue; set it in the DelayingQueue's own config")
	} else if config.Debounce != (Debounce{}) {
		panic("workqueue: NewTypedRateLimitingQueueWithConfig: Debounce with a DelayingQueue; set it in the DelayingQueue's own config")
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

// TypedRateLimitingQueue is a [TypedRateLimitingInterface] that adds
// Reschedule, GetContext, Remove, Snapshot, Park, Wake, WakeFunc and
// WakeItem, and in its config Debounce; its methods
// are safe for concurrent use. The zero value is not usable: make one with
// [NewTypedRateLimitingQueue]. Over a config DelayingQueue from outside this
// package, the additions do what that queue supports.
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

// AddAfter is [TypedDelayingQueue.AddAfter].
func (q *TypedRateLimitingQueue[T]) AddAfter(item T, duration time.Duration) {
	q.delaying.AddAfter(item, duration)
}

// Reschedule is [TypedDelayingQueue.Reschedule]. Over a DelayingQueue from
// outside this package that has no Reschedule method, it is AddAfter.
func (q *TypedRateLimitingQueue[T]) Reschedule(item T, duration time.Duration) {
	if r, ok := q.delaying.(rescheduler[T]); ok {
		r.Reschedule(item, duration)
		return
	}
	q.delaying.AddAfter(item, duration)
}

// Len returns the number of ready items; see [Typed.Len].
func (q *TypedRateLimitingQueue[T]) Len() int { return q.delaying.Len() }

// SetGroupLimit sets a group's limit in the queue below; see
// [Typed.SetGroupLimit]. Over a config DelayingQueue from outside this
// package it calls that queue's SetGroupLimit(string, int) if it has one,
// and otherwise does nothing.
func (q *TypedRateLimitingQueue[T]) SetGroupLimit(group string, limit int) {
	if g, ok := q.delaying.(groupLimiter); ok {
		g.SetGroupLimit(group, limit)
	}
}

// Get hands out the next ready item; see [Typed.Get].
func (q *TypedRateLimitingQueue[T]) Get() (item T, shutdown bool) { return q.delaying.Get() }

// Done marks item as done processing; see [Typed.Done].
func (q *TypedRateLimitingQueue[T]) Done(item T) { q.delaying.Done(item) }

// ShuttingDown reports whether a shutdown has begun.
func (q *TypedRateLimitingQueue[T]) ShuttingDown() bool { return q.delaying.ShuttingDown() }

// AddRateLimited adds item after a rate-limited delay, recording a failure;
// it is never debounced.
func (q *TypedRateLimitingQueue[T]) AddRateLimited(item T) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.stopped || q.ShuttingDown() {
		return
	}
	delay := q.rateLimiter.When(item)
	if r, ok := q.delaying.(retryAdder[T]); ok {
		r.addRetry(item, delay)
		return
	}
	q.delaying.AddAfter(item, delay)
}

// Park is [Typed.Park], except that a wake does not queue the item before
// its ParkBackoff has passed since the Park.
// A park is not a failure: NumRequeues does not count it.
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

// Wake ends the parks that wait for event; see [Typed.Wake].
func (q *TypedRateLimitingQueue[T]) Wake(event string) int { return q.WakeFunc(event, nil) }

// WakeFunc ends the parks that accept accepts; see [Typed.WakeFunc].
func (q *TypedRateLimitingQueue[T]) WakeFunc(event string, accept func(item T) bool) int {
	if p, ok := q.delaying.(parkingQueue[T]); ok {
		return p.WakeFunc(event, accept)
	}
	return 0
}

// WakeItem ends item's park; see [Typed.WakeItem].
func (q *TypedRateLimitingQueue[T]) WakeItem(item T) bool {
	if p, ok := q.delaying.(parkingQueue[T]); ok {
		return p.WakeItem(item)
	}
	return false
}

// NumRequeues returns the rate limiter's failure count for item.
func (q *TypedRateLimitingQueue[T]) NumRequeues(item T) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.rateLimiter.NumRequeues(item)
}

// Forget clears item's failures and park backoff; Done must still be called.
func (q *TypedRateLimitingQueue[T]) Forget(item T) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.rateLimiter.Forget(item)
	q.parkBackoff.Forget(item)
}

// GetContext is Get with a context; see [Typed.GetContext].
func (q *TypedRateLimitingQueue[T]) GetContext(ctx context.Context) (T, error) {
	return getContext(ctx, q.delaying)
}

// Remove also forgets item, as Forget does; see [Typed.Remove].
func (q *TypedRateLimitingQueue[T]) Remove(item T) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.rateLimiter.Forget(item)
	q.parkBackoff.Forget(item)
	r, ok := q.delaying.(remover[T])
	return ok && r.Remove(item)
}

// ShutDown begins a shutdown; see [Typed.ShutDown].
func (q *TypedRateLimitingQueue[T]) ShutDown() {
	// mu is not held while the delaying queue's goroutines are joined, so
	// that workers calling Forget are not held up.
	q.beginShutDown()
	q.delaying.ShutDown()
}

// ShutDownWithDrain drains the queue; see [Typed.ShutDownWithDrain].
func (q *TypedRateLimitingQueue[T]) ShutDownWithDrain() {
	// mu is not held while the drain waits: workers still call
	// AddRateLimited (which does nothing) and Forget.
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

// Snapshot adds the listed items' failure counts; see [Typed.Snapshot].
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
