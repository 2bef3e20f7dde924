package workqueue

import (
	"log/slog"
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
	q := &TypedRateLimitingQueue[T]{
		delaying: config.DelayingQueue,
		lim:      limiter[T]{rateLimiter: rateLimiter, parkBackoff: config.ParkBackoff},
	}
	if d, ok := config.DelayingQueue.(*TypedDelayingQueue[T]); ok {
		q.Base = d.Base
	} else {
		q.Base = Base[T]{below: config.DelayingQueue}
		q.Base.source, _ = config.DelayingQueue.(MetricsSource)
	}
	q.Base.lim, q.Base.clock, q.Base.maxPark = &q.lim, config.Clock, maxPark
	return q
}

// TypedRateLimitingQueue is a [TypedRateLimitingInterface] with the methods
// of [Base]; it adds Reschedule, and in its config ParkBackoff,
// AddCancelsDelay and Debounce. Its methods are safe for concurrent use.
// The zero value is not usable: make one with [NewTypedRateLimitingQueue].
type TypedRateLimitingQueue[T comparable] struct {
	Base[T]
	// It starts no goroutine of its own: its shutdowns begin the delaying
	// queue's under lim.mu, then leave the rest to it.
	delaying TypedDelayingInterface[T]
	lim      limiter[T]
}

// Add adds item at once; see [TypedDelayingQueue.Add].
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

// AddRateLimited adds item after a rate-limited delay, recording a failure;
// it is never debounced.
func (q *TypedRateLimitingQueue[T]) AddRateLimited(item T) {
	q.lim.mu.Lock()
	defer q.lim.mu.Unlock()
	if q.lim.stopped || q.ShuttingDown() {
		return
	}
	delay := q.lim.rateLimiter.When(item)
	if r, ok := q.delaying.(retryAdder[T]); ok {
		r.addRetry(item, delay)
		return
	}
	q.delaying.AddAfter(item, delay)
}

// NumRequeues returns the rate limiter's failure count for item.
func (q *TypedRateLimitingQueue[T]) NumRequeues(item T) int {
	q.lim.mu.Lock()
	defer q.lim.mu.Unlock()
	return q.lim.rateLimiter.NumRequeues(item)
}

// Forget clears item's failures and park backoff; Done must still be called.
func (q *TypedRateLimitingQueue[T]) Forget(item T) {
	q.lim.mu.Lock()
	defer q.lim.mu.Unlock()
	q.lim.forget(item)
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
