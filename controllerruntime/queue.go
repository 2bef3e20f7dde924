package crqueue

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/go-workqueue/workqueue"
	"github.com/prometheus/client_golang/prometheus"
	ctrlworkqueue "k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Compile-time proof that the queue fits where controller-runtime wants a
// priority queue, and that NewQueue fits controller.Options.NewQueue.
var (
	_ priorityqueue.PriorityQueue[reconcile.Request]                                                                              = (*Queue[reconcile.Request])(nil)
	_ func(string, ctrlworkqueue.TypedRateLimiter[reconcile.Request]) ctrlworkqueue.TypedRateLimitingInterface[reconcile.Request] = NewQueue[reconcile.Request]()
)

// options collects what the Option values set.
type options[T comparable] struct {
	fairness   []func(T) string
	maxWait    time.Duration
	registerer prometheus.Registerer
	noMetrics  bool
	drain      bool
	groups     *workqueue.GroupLimits[T]
}

// Option configures the queues [NewQueue] makes.
type Option[T comparable] func(*options[T])

// WithFairness shares each priority level fairly among the keys the
// functions give the items, as [workqueue.TypedPriorityQueueConfig.Fairness]
// describes; the functions must be fast, return the same key for the same
// item every time, and neither panic nor call the queue. Without it, each
// level is first-in, first-out.
func WithFairness[T comparable](keys ...func(item T) string) Option[T] {
	return func(o *options[T]) { o.fairness = append(o.fairness, keys...) }
}

// WithMaxWait bounds how long a ready item waits behind higher priorities,
// as [workqueue.TypedPriorityQueueConfig.MaxWait] describes. Zero, the
// default, means no bound, as in controller-runtime's queue; a negative d
// makes the constructor panic.
func WithMaxWait[T comparable](d time.Duration) Option[T] {
	return func(o *options[T]) { o.maxWait = d }
}

// WithGroupLimits limits how many items of a group are reconciled at once,
// as [workqueue.GroupLimits] describes: with a Group function that returns
// a request's namespace and a Default of 2, at most two reconciles of a
// namespace run at once, and the controller's other workers reconcile
// requests of other namespaces meanwhile. [Queue.SetGroupLimit] changes a
// limit at run time. The constructor panics on a nil Group.
//
// A Get asleep when ShutDown is called while the queued items all wait for a
// slot does not return at once: it returns at the Done that frees a slot,
// or once nothing is queued.
func WithGroupLimits[T comparable](limits workqueue.GroupLimits[T]) Option[T] {
	return func(o *options[T]) { o.groups = &limits }
}

// WithRegisterer records the queue's metrics in reg instead of
// controller-runtime's metrics.Registry, under the same names and labels.
// A nil reg means metrics.Registry.
func WithRegisterer[T comparable](reg prometheus.Registerer) Option[T] {
	return func(o *options[T]) { o.registerer = reg }
}

// WithoutMetrics makes the queue record no metrics at all.
func WithoutMetrics[T comparable]() Option[T] {
	return func(o *options[T]) { o.noMetrics = true }
}

// WithDrainOnShutDown makes Get and GetWithPriority keep handing out the
// items already queued after ShutDown, as client-go's queues and the root
// package's do, instead of returning shutdown at once, as
// controller-runtime's queue does. A controller then reconciles its backlog
// before it stops, which makes a cancelled manager stop later.
func WithDrainOnShutDown[T comparable]() Option[T] {
	return func(o *options[T]) { o.drain = true }
}

// NewQueue returns a constructor that fits controller.Options.NewQueue: it
// makes a [Queue] named after the controller, with the rate limiter the
// controller passes. The constructor is safe for concurrent use and may
// be called any number of times; it panics as
// [workqueue.NewTypedPriorityQueue] does on bad options (a nil fairness
// function, a negative MaxWait, a nil Group in the group limits), and
// never on metrics registration.
func NewQueue[T comparable](opts ...Option[T]) func(controllerName string, rateLimiter ctrlworkqueue.TypedRateLimiter[T]) ctrlworkqueue.TypedRateLimitingInterface[T] {
	var o options[T]
	for _, opt := range opts {
		opt(&o)
	}
	return func(name string, rateLimiter ctrlworkqueue.TypedRateLimiter[T]) ctrlworkqueue.TypedRateLimitingInterface[T] {
		return newQueue(name, rateLimiter, o)
	}
}

// New makes a [Queue] named name that uses rateLimiter for AddRateLimited
// (nil means a per-item exponential backoff from 5ms to 1000s,
// controller-runtime's default for its priority queue). It is the
// constructor NewQueue returns, for use outside a controller; a queue
// with an empty name records no metrics. It panics as NewQueue's
// constructor does.
func New[T comparable](name string, rateLimiter ctrlworkqueue.TypedRateLimiter[T], opts ...Option[T]) *Queue[T] {
	var o options[T]
	for _, opt := range opts {
		opt(&o)
	}
	return newQueue(name, rateLimiter, o)
}

func newQueue[T comparable](name string, rateLimiter ctrlworkqueue.TypedRateLimiter[T], o options[T]) *Queue[T] {
	if rateLimiter == nil {
		rateLimiter = ctrlworkqueue.NewTypedItemExponentialFailureRateLimiter[T](5*time.Millisecond, 1000*time.Second)
	}
	config := workqueue.TypedPriorityQueueConfig[T]{
		Name:        name,
		Fairness:    o.fairness,
		MaxWait:     o.maxWait,
		GroupLimits: o.groups,
	}
	if !o.noMetrics && name != "" {
		reg := o.registerer
		if reg == nil {
			reg = crmetrics.Registry
		}
		config.MetricsProvider = byPriorityOnly{metricsFor(reg)}
	}
	// client-go's TypedRateLimiter and ours have the same methods, so the
	// controller's limiter is ours as it is.
	return &Queue[T]{
		q:     workqueue.NewTypedPriorityQueue[T](rateLimiter, config),
		drain: o.drain,
	}
}

// Queue is a [workqueue.TypedPriorityQueue] with controller-runtime's
// priorityqueue.PriorityQueue interface and, unless
// [WithDrainOnShutDown] is given, controller-runtime's shutdown: from
// ShutDown on, Get and GetWithPriority return shutdown at once, even with
// items queued. Items already handed out may still be marked done.
// ShutDownWithDrain keeps handing out items until none is queued or being
// processed, as the root package's queues do (controller-runtime's queue
// treats it as ShutDown).
//
// Make one with [NewQueue] or [New]; the zero value is not usable. All
// methods are safe for concurrent use.
type Queue[T comparable] struct {
	q *workqueue.TypedPriorityQueue[T]
	// drain keeps Get handing out queued items after ShutDown.
	drain bool
	// stopped is set by ShutDown (not by ShutDownWithDrain) when drain is
	// off: Get then hands out nothing more.
	stopped atomic.Bool
}

// Add adds item at priority 0, at once, as AddWithOpts with zero options.
func (q *Queue[T]) Add(item T) { q.q.Add(item) }

// AddAfter adds item at priority 0 once duration has passed.
func (q *Queue[T]) AddAfter(item T, duration time.Duration) { q.q.AddAfter(item, duration) }

// AddRateLimited adds item at priority 0 after the delay the rate limiter
// gives it, which records a failure for it.
func (q *Queue[T]) AddRateLimited(item T) { q.q.AddRateLimited(item) }

// AddWithOpts adds items with controller-runtime's options: After,
// RateLimited and Priority (nil means 0); with After and RateLimited both
// set, the shorter delay wins. A re-add keeps the highest priority and
// the earliest ready time, as in controller-runtime's queue.
func (q *Queue[T]) AddWithOpts(o priorityqueue.AddOpts, items ...T) {
	q.q.AddWithOpts(workqueue.AddOpts{After: o.After, RateLimited: o.RateLimited, Priority: o.Priority}, items...)
}

// Get returns the next item, as GetWithPriority without the priority.
func (q *Queue[T]) Get() (item T, shutdown bool) {
	item, _, shutdown = q.GetWithPriority()
	return item, shutdown
}

// GetWithPriority blocks until an item is ready and returns it with its
// priority; the caller must call Done with it. After ShutDown it returns
// shutdown true at once, unless the queue drains on shutdown.
func (q *Queue[T]) GetWithPriority() (item T, priority int, shutdown bool) {
	if q.stopped.Load() {
		return item, 0, true
	}
	item, priority, shutdown = q.q.GetWithPriority()
	if !shutdown && q.stopped.Load() {
		// ShutDown came while we waited: give the item back, so that
		// the drain and the metrics count it as finished.
		q.q.Done(item)
		var zero T
		return zero, 0, true
	}
	return item, priority, shutdown
}

// GetContext is Get that gives up when ctx is done, returning ctx's error;
// after ShutDown it returns [workqueue.ErrShutDown] (with the queue's
// shutdown rule, as Get).
func (q *Queue[T]) GetContext(ctx context.Context) (item T, err error) {
	if q.stopped.Load() {
		return item, workqueue.ErrShutDown
	}
	item, err = q.q.GetContext(ctx)
	if err == nil && q.stopped.Load() {
		q.q.Done(item)
		var zero T
		return zero, workqueue.ErrShutDown
	}
	return item, err
}

// Done marks item as processed; if it was added meanwhile, it is queued
// again at the highest priority asked for.
func (q *Queue[T]) Done(item T) { q.q.Done(item) }

// Forget clears the rate limiter's failures for item.
func (q *Queue[T]) Forget(item T) { q.q.Forget(item) }

// NumRequeues returns the rate limiter's failure count for item.
func (q *Queue[T]) NumRequeues(item T) int { return q.q.NumRequeues(item) }

// Remove takes item back: an item queued or waiting for its delay leaves
// the queue, and an item being processed that was added again meanwhile
// is not queued again by Done. It reports whether it took anything back;
// an item being processed keeps being processed and must still be marked
// done. In every case it forgets item in the rate limiter, as Forget
// does, so NumRequeues starts again from zero.
func (q *Queue[T]) Remove(item T) bool { return q.q.Remove(item) }

// Len returns the number of items queued and ready; items waiting for
// their delay or being processed are not counted, items waiting for a slot
// of their group are.
func (q *Queue[T]) Len() int { return q.q.Len() }

// SetGroupLimit sets the limit of group; see
// [workqueue.Base.SetGroupLimit]. It does nothing on a queue
// made without [WithGroupLimits].
func (q *Queue[T]) SetGroupLimit(group string, limit int) { q.q.SetGroupLimit(group, limit) }

// ShuttingDown reports whether ShutDown or ShutDownWithDrain was called.
func (q *Queue[T]) ShuttingDown() bool { return q.q.ShuttingDown() }

// ShutDown makes the queue ignore further adds, drops the items waiting
// for their delay, releases ShutDownWithDrain callers and, unless it
// drains on shutdown, hands out nothing more: blocked and later Get calls
// return shutdown at once. It stops the queue's goroutines before it
// returns. Calling it again does nothing.
func (q *Queue[T]) ShutDown() {
	if !q.drain {
		q.stopped.Store(true)
	}
	q.q.ShutDown()
}

// ShutDownWithDrain makes the queue ignore further adds, drops the items
// waiting for their delay, and waits until no item is queued or being
// processed; workers must keep calling Get and Done meanwhile. A
// concurrent ShutDown releases it.
func (q *Queue[T]) ShutDownWithDrain() { q.q.ShutDownWithDrain() }

// Unwrap returns the root package's queue underneath, for its Snapshot and
// other methods. Getting items from it bypasses the shutdown rule above.
func (q *Queue[T]) Unwrap() *workqueue.TypedPriorityQueue[T] { return q.q }
