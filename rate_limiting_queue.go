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
	_ ownParkBackoff   = (*TypedRateLimitingQueue[int])(nil)
)

// TypedRateLimitingQueueConfig configures NewTypedRateLimitingQueueWithConfig
// (zero is valid; shared fields as in [TypedDelayingQueueConfig]); a given
// DelayingQueue keeps its settings (Clock, MaxParkTime: for an outside one).
type TypedRateLimitingQueueConfig[T comparable] struct {
	Name            string
	Logger          *slog.Logger
	MetricsProvider MetricsProvider
	Clock           clock.WithTicker
	MaxParkTime     time.Duration
	ParkBackoff     TypedRateLimiter[T] // at each Park that takes effect, how long after it a wake may queue the item; under the lock, no queue calls; nil: 5 ms doubling to 10 s
	AddCancelsDelay bool
	GroupLimits     *GroupLimits[T]
	DelayingQueue   TypedDelayingInterface[T] // the queue below; nil means a new delaying queue
	Debounce        Debounce                  // AddRateLimited is never debounced
}

// NewTypedRateLimitingQueue uses a zero TypedRateLimitingQueueConfig.
func NewTypedRateLimitingQueue[T comparable](rateLimiter TypedRateLimiter[T]) *TypedRateLimitingQueue[T] {
	return NewTypedRateLimitingQueueWithConfig(rateLimiter, TypedRateLimitingQueueConfig[T]{})
}

// NewTypedRateLimitingQueueWithConfig returns a new rate-limiting queue. It
// panics on a nil rateLimiter or Group, a negative MaxParkTime, an invalid
// Debounce, or AddCancelsDelay, Debounce or GroupLimits with a DelayingQueue.
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
		q.Base.source, _ = config.DelayingQueue.(metricsSource)
	}
	q.Base.top, q.Base.lim, q.Base.clock, q.Base.maxPark = q, &q.lim, config.Clock, maxPark
	return q
}

// TypedRateLimitingQueue is a [TypedRateLimitingInterface] with [Base]'s
// methods and Reschedule, safe for concurrent use.
type TypedRateLimitingQueue[T comparable] struct {
	Base[T]
	// It starts no goroutine of its own: its shutdowns begin the delaying
	// queue's under lim.mu, then leave the rest to it.
	delaying TypedDelayingInterface[T]
	lim      limiter[T]
}

func (q *TypedRateLimitingQueue[T]) parksWithOwnBackoff() {}

// Add is its DelayingQueue's Add, [TypedDelayingQueue.Add] by default.
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

// AddRateLimited adds item after a rate-limited delay, recording a failure.
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
