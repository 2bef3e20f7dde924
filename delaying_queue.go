package workqueue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// TypedDelayingInterface is a work queue that can also add an item after a
// delay. The implementation in this package is safe for concurrent use.
type TypedDelayingInterface[T comparable] interface {
	TypedInterface[T]
	// AddAfter adds item once duration has passed.
	AddAfter(item T, duration time.Duration)
}

// TypedDelayingQueueConfig configures a queue made by
// [NewTypedDelayingQueueWithConfig]. The zero value is valid.
type TypedDelayingQueueConfig[T comparable] struct {
	// Name identifies the queue in metrics. A queue without a name records
	// no metrics; a named queue without a MetricsProvider records none
	// either, and the first one made in a process logs a warning saying
	// so.
	Name string

	// Logger receives the queue's rare log lines: items dropped at shutdown
	// (debug level) and a panic in the waiting goroutine (error level). It
	// is a *slog.Logger, where client-go takes a *klog.Logger. Nil means
	// slog.Default().
	Logger *slog.Logger

	// MetricsProvider creates the queue's metrics. A nil provider records
	// nothing and costs nothing.
	MetricsProvider MetricsProvider

	// Clock decides when delays end. Nil means the real clock.
	Clock clock.WithTicker

	// MaxParkTime bounds how long an item stays parked without an event;
	// see [TypedQueueConfig.MaxParkTime]. Zero means [DefaultMaxParkTime].
	// Over a Queue from outside this package, which cannot park, Park adds
	// the item after MaxParkTime, as if no event came.
	MaxParkTime time.Duration

	// Queue receives the items whose delay has ended. Nil means a new [Typed]
	// queue with this config's name, provider and clock. A queue from
	// outside this package begins its shutdown only in its own ShutDown or
	// ShutDownWithDrain, so a drain of this layer refuses AddAfter with a
	// delay a moment before it refuses Add.
	Queue TypedInterface[T]
}

// NewTypedDelayingQueue returns a new delaying queue with no name and no
// metrics. It is shorthand for
// NewTypedDelayingQueueWithConfig(TypedDelayingQueueConfig[T]{}).
func NewTypedDelayingQueue[T comparable]() *TypedDelayingQueue[T] {
	return NewTypedDelayingQueueWithConfig(TypedDelayingQueueConfig[T]{})
}

// TypedNewDelayingQueue is NewTypedDelayingQueue under the name client-go
// also exports, so that code using it compiles after switching.
//
// Deprecated: use NewTypedDelayingQueue, as in client-go.
func TypedNewDelayingQueue[T comparable]() *TypedDelayingQueue[T] {
	return NewTypedDelayingQueue[T]()
}

// NewTypedDelayingQueueWithConfig returns a new delaying queue configured by
// config. It starts one goroutine, which moves items to the underlying queue
// when their delay ends; ShutDown and ShutDownWithDrain stop it and wait for
// it to exit. Items still waiting for their delay at shutdown are dropped.
// All methods of the result are safe for concurrent use. It panics if
// MaxParkTime is negative.
func NewTypedDelayingQueueWithConfig[T comparable](config TypedDelayingQueueConfig[T]) *TypedDelayingQueue[T] {
	if config.Clock == nil {
		config.Clock = clock.RealClock{}
	}
	maxPark := maxParkTime("NewTypedDelayingQueueWithConfig", config.MaxParkTime)
	if config.Logger == nil {
		config.Logger = slog.Default()
	}
	if config.Queue == nil {
		config.Queue = NewTypedWithConfig(TypedQueueConfig[T]{
			Name:            config.Name,
			MetricsProvider: config.MetricsProvider,
			Clock:           config.Clock,
			Logger:          config.Logger,
			MaxParkTime:     maxPark,
		})
	}
	q := &TypedDelayingQueue[T]{
		queue:   config.Queue,
		logger:  config.Logger,
		maxPark: maxPark,
		delays:  newDelayer[T](config.Clock, config.MetricsProvider, config.Name),
	}
	q.delays.start(&q.mu, q.queue.Add, q.finished, q.logger)
	return q
}

// TypedDelayingQueue is the delaying queue this package makes: a
// [TypedDelayingInterface] that also has GetContext, Remove, Snapshot and
// parking. Items wait for their delay in this layer and are then added to
// the queue below it. Its methods are safe for concurrent use. The zero
// value is not usable: make one with [NewTypedDelayingQueue] or
// [NewTypedDelayingQueueWithConfig].
type TypedDelayingQueue[T comparable] struct {
	queue   TypedInterface[T]
	logger  *slog.Logger
	maxPark time.Duration // for Park over a queue that cannot park

	// mu guards the delays. Their goroutine holds it while it moves ready
	// items to the underlying queue, so that an item is always in one of
	// the two for Remove and Snapshot.
	mu     sync.Mutex
	delays *delayer[T]
	// stopped is set when the goroutine is told to stop: nothing more
	// waits for a delay.
	stopped bool
}

// Add adds item at once; see [Typed.Add].
func (q *TypedDelayingQueue[T]) Add(item T) { q.queue.Add(item) }

// Len returns the number of items ready to be handed out; items waiting for
// their delay are not counted.
func (q *TypedDelayingQueue[T]) Len() int { return q.queue.Len() }

// Get hands out the next ready item; see [Typed.Get].
func (q *TypedDelayingQueue[T]) Get() (T, bool) { return q.queue.Get() }

// Done marks item as done processing; see [Typed.Done].
func (q *TypedDelayingQueue[T]) Done(item T) { q.queue.Done(item) }

// ShuttingDown reports whether a shutdown has begun.
func (q *TypedDelayingQueue[T]) ShuttingDown() bool { return q.queue.ShuttingDown() }

// GetContext hands out the next ready item or returns when ctx ends; see
// [Typed.GetContext]. An underlying queue from outside this package needs a
// GetContext method of the same shape; without one, GetContext returns an
// error that wraps [errors.ErrUnsupported].
func (q *TypedDelayingQueue[T]) GetContext(ctx context.Context) (T, error) {
	return getContext(ctx, q.queue)
}

// Remove takes item out of the items waiting for their delay and, with the
// underlying queue's Remove, out of the queue, in O(log n), and reports
// whether it took anything back; see [Typed.Remove]. An underlying queue
// from outside this package without a Remove method keeps the item.
func (q *TypedDelayingQueue[T]) Remove(item T) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	removed := q.delays.remove(item)
	if r, ok := q.queue.(remover[T]); ok && r.Remove(item) {
		removed = true
	}
	return removed
}

// getContext calls q's GetContext, if it has one.
func getContext[T comparable](ctx context.Context, q TypedInterface[T]) (item T, err error) {
	if g, ok := q.(contextGetter[T]); ok {
		return g.GetContext(ctx)
	}
	return item, fmt.Errorf("workqueue: GetContext needs an underlying queue with a GetContext method, %T has none: %w", q, errors.ErrUnsupported)
}

// AddAfter adds item once duration has passed on the queue's clock. A
// duration of zero or less adds it at once, as Add does. If item is already
// waiting, the earlier of the two ready times wins. AddAfter never blocks on
// the waiting goroutine and inserts in O(log n). After a shutdown has begun
// it does nothing: the underlying queue's flag decides, for AddAfter as for
// Add.
func (q *TypedDelayingQueue[T]) AddAfter(item T, duration time.Duration) {
	if duration <= 0 {
		q.addNow(item)
		return
	}
	if q.waitFor(item, duration) {
		q.delays.poke()
	}
}

// addNow adds item to the underlying queue and counts the retry if the add
// was accepted. An underlying queue from outside this package does not
// report that, so its flag is read before the add.
func (q *TypedDelayingQueue[T]) addNow(item T) {
	if adder, ok := q.queue.(tryAdder[T]); ok {
		if adder.tryAdd(item) {
			q.delays.countRetry()
		}
		return
	}
	if !q.queue.ShuttingDown() {
		q.delays.countRetry()
	}
	q.queue.Add(item)
}

// waitFor puts item in the heap, to be added after delay, and reports
// whether it is now the first to be ready. An item put in the heap before
// the shutdown began is dropped by it: the same outcome as an AddAfter that
// came after.
func (q *TypedDelayingQueue[T]) waitFor(item T, delay time.Duration) (isFirst bool) {
	q.mu.Lock()
	defer q.mu.Unlock() // a panic (an item that cannot be hashed) leaves it unlocked
	if q.stopped || q.queue.ShuttingDown() {
		return false
	}
	q.delays.countRetry()
	return q.delays.add(item, delay)
}

// Park parks item until one of events in the underlying queue; see
// [Typed.Park]. Over a queue from outside this package, which cannot park,
// it adds the item after MaxParkTime instead, as if no event came.
func (q *TypedDelayingQueue[T]) Park(item T, events ...string) { q.park(item, nil, events) }

// park is Park with a backoff, for the rate-limiting layer.
func (q *TypedDelayingQueue[T]) park(item T, backoff func() time.Duration, events []string) {
	if p, ok := q.queue.(parkingQueue[T]); ok {
		p.park(item, backoff, events)
		return
	}
	wait := q.maxPark
	if backoff != nil {
		wait = max(backoff(), wait)
	}
	q.AddAfter(item, wait)
}

// Wake ends the parks that wait for event in the underlying queue; see
// [Typed.Wake]. Over a queue from outside this package it does nothing.
func (q *TypedDelayingQueue[T]) Wake(event string) int { return q.WakeFunc(event, nil) }

// WakeFunc ends the parks that wait for event and that accept accepts in
// the underlying queue; see [Typed.WakeFunc]. Over a queue from outside
// this package it does nothing.
func (q *TypedDelayingQueue[T]) WakeFunc(event string, accept func(item T) bool) int {
	if p, ok := q.queue.(parkingQueue[T]); ok {
		return p.WakeFunc(event, accept)
	}
	return 0
}

// WakeItem ends item's park in the underlying queue; see [Typed.WakeItem].
// Over a queue from outside this package it does nothing.
func (q *TypedDelayingQueue[T]) WakeItem(item T) bool {
	if p, ok := q.queue.(parkingQueue[T]); ok {
		return p.WakeItem(item)
	}
	return false
}

// ShutDown shuts the underlying queue down, which ignores adds from then
// on, then drops the items waiting for their delay and stops the waiting
// goroutine, waiting for it to exit.
func (q *TypedDelayingQueue[T]) ShutDown() {
	q.queue.ShutDown()
	q.stopWaiting()
}

// ShutDownWithDrain makes the underlying queue ignore adds, drops the items
// waiting for their delay, stops the waiting goroutine and waits for it to
// exit, then drains the underlying queue with its ShutDownWithDrain.
func (q *TypedDelayingQueue[T]) ShutDownWithDrain() {
	q.stopAdds()
	q.stopWaiting()
	q.queue.ShutDownWithDrain()
}

// stopAdds begins the underlying queue's shutdown, when it is one of this
// package's, without waiting for a drain. Another queue begins its shutdown
// only in its ShutDownWithDrain; until then Add and AddAfter(item, 0) go on
// adding.
func (q *TypedDelayingQueue[T]) stopAdds() {
	if s, ok := q.queue.(addStopper); ok {
		s.stopAdds()
	}
}

func (q *TypedDelayingQueue[T]) stopWaiting() {
	dropped := q.dropWaiting()
	q.delays.stop()
	if dropped > 0 {
		q.logger.Debug("workqueue: dropped items still waiting for their delay at shutdown", "count", dropped)
	}
}

// finished ends the delay goroutine when the underlying queue was shut
// down on its own: nothing it would add would be accepted any more.
func (q *TypedDelayingQueue[T]) finished() bool {
	if q.queue.ShuttingDown() {
		q.dropWaiting()
		return true
	}
	return false
}

// dropWaiting stops the delays, so later AddAfter calls with a delay do
// nothing, and drops the waiting items; it returns how many there were.
func (q *TypedDelayingQueue[T]) dropWaiting() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.stopped = true
	return q.delays.dropAll(nil)
}

// Snapshot returns a view of the queue at one instant; see [Typed.Snapshot].
// It lists the items waiting for their delay too, the n that are ready
// first, which takes O(n log n) steps under the delays' lock. Over a queue
// from outside this package without a Snapshot method, only the waiting
// items are listed.
func (q *TypedDelayingQueue[T]) Snapshot(n int) Snapshot[T] {
	q.mu.Lock() // held while the queue below takes its part: one instant
	defer q.mu.Unlock()
	var s Snapshot[T]
	if inner, ok := q.queue.(snapshotter[T]); ok {
		s = inner.Snapshot(n)
	} else {
		s = Snapshot[T]{Taken: q.delays.clock.Now(), ShuttingDown: q.queue.ShuttingDown(), Depth: q.queue.Len()}
	}
	waiting, delayed := q.delays.snapshot(n)
	s.Waiting += waiting // the queue below may wait for parks' backoffs
	s.Delayed = soonestDelayed(append(s.Delayed, delayed...), n)
	return s
}
