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

// TypedDelayingQueue is the delaying queue this package makes: a
// [TypedDelayingInterface] with this package's additions: GetContext,
// Remove and Snapshot. Its methods are safe for concurrent use. The constructors keep
// client-go's signatures, so every queue they return holds this interface
// behind the client-go one:
//
//	q := workqueue.NewTypedDelayingQueue[string]().(workqueue.TypedDelayingQueue[string])
type TypedDelayingQueue[T comparable] interface {
	TypedDelayingInterface[T]
	// GetContext is Get that also returns when ctx ends; see
	// [Typed.GetContext].
	GetContext(ctx context.Context) (item T, err error)
	// Remove takes item back from the items waiting for their delay and
	// from the queue; see [Typed.Remove].
	Remove(item T) bool
	// Snapshot returns a view of the queue at one instant, listing at
	// most n items of each kind; see [Typed.Snapshot].
	Snapshot(n int) Snapshot[T]
}

// TypedDelayingQueueConfig configures a queue made by
// [NewTypedDelayingQueueWithConfig]. The zero value is valid.
type TypedDelayingQueueConfig[T comparable] struct {
	// Name identifies the queue in metrics. A queue without a name records
	// no metrics.
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

	// Queue receives the items whose delay has ended. Nil means a new [Typed]
	// queue with this config's name, provider and clock. A queue from
	// outside this package begins its shutdown only in its own ShutDown or
	// ShutDownWithDrain, so a drain of this layer refuses AddAfter with a
	// delay a moment before it refuses Add.
	Queue TypedInterface[T]
}

// heartbeatPeriod bounds how long the waiting goroutine sleeps without
// looking at the heap. Every change that matters wakes it explicitly; the
// heartbeat is a backstop only.
const heartbeatPeriod = 10 * time.Second

// waitingBatch bounds how many ready items the waiting goroutine moves from
// the heap to the underlying queue per lock hold, so AddAfter callers never
// wait behind a large batch.
const waitingBatch = 256

// NewTypedDelayingQueue returns a new delaying queue with no name and no
// metrics. It is shorthand for
// NewTypedDelayingQueueWithConfig(TypedDelayingQueueConfig[T]{}).
func NewTypedDelayingQueue[T comparable]() TypedDelayingInterface[T] {
	return NewTypedDelayingQueueWithConfig(TypedDelayingQueueConfig[T]{})
}

// TypedNewDelayingQueue is NewTypedDelayingQueue under the name client-go
// also exports, so that code using it compiles after switching.
//
// Deprecated: use NewTypedDelayingQueue, as in client-go.
func TypedNewDelayingQueue[T comparable]() TypedDelayingInterface[T] {
	return NewTypedDelayingQueue[T]()
}

// NewTypedDelayingQueueWithConfig returns a new delaying queue configured by
// config. It starts one goroutine, which moves items to the underlying queue
// when their delay ends; ShutDown and ShutDownWithDrain stop it and wait for
// it to exit. Items still waiting for their delay at shutdown are dropped.
// All methods of the result are safe for concurrent use.
func NewTypedDelayingQueueWithConfig[T comparable](config TypedDelayingQueueConfig[T]) TypedDelayingInterface[T] {
	if config.Clock == nil {
		config.Clock = clock.RealClock{}
	}
	if config.Logger == nil {
		config.Logger = slog.Default()
	}
	if config.Queue == nil {
		config.Queue = NewTypedWithConfig(TypedQueueConfig[T]{
			Name:            config.Name,
			MetricsProvider: config.MetricsProvider,
			Clock:           config.Clock,
		})
	}
	q := &delayingQueue[T]{
		queue:    config.Queue,
		clock:    config.Clock,
		epoch:    config.Clock.Now(),
		logger:   config.Logger,
		waiting:  newDelayHeap[T](),
		wake:     make(chan struct{}, 1),
		stopCh:   make(chan struct{}),
		loopDone: make(chan struct{}),
	}
	q.retries, q.delayed = delayingMetrics(config.MetricsProvider, config.Name)
	go q.waitingLoop()
	return q
}

// delayingQueue adds a heap of waiting items, and one goroutine that moves
// them to the underlying queue when they are ready, to a TypedInterface.
type delayingQueue[T comparable] struct {
	queue   TypedInterface[T]
	clock   clock.WithTicker
	epoch   time.Time // ready times are kept as offsets from it
	logger  *slog.Logger
	retries CounterMetric       // nil when the queue records no metrics
	delayed SettableGaugeMetric // nil unless the provider offers it

	// mu guards the heap. The waiting goroutine holds it while it moves
	// ready items to the underlying queue, so that an item is always in
	// one of the two for Remove.
	mu      sync.Mutex
	waiting *delayHeap[T]
	// stopped is set when the waiting goroutine is told to stop: nothing
	// more goes into the heap.
	stopped bool

	// wake tells the waiting goroutine that the first ready time moved
	// earlier. Its buffer of one makes the send non-blocking: a pending wake
	// already covers any later one.
	wake     chan struct{}
	stopOnce sync.Once
	stopCh   chan struct{}
	loopDone chan struct{}
}

// Add adds item at once; see [Typed.Add].
func (q *delayingQueue[T]) Add(item T) { q.queue.Add(item) }

// Len returns the number of items ready to be handed out; items waiting for
// their delay are not counted.
func (q *delayingQueue[T]) Len() int { return q.queue.Len() }

// Get hands out the next ready item; see [Typed.Get].
func (q *delayingQueue[T]) Get() (T, bool) { return q.queue.Get() }

// Done marks item as done processing; see [Typed.Done].
func (q *delayingQueue[T]) Done(item T) { q.queue.Done(item) }

// ShuttingDown reports whether a shutdown has begun.
func (q *delayingQueue[T]) ShuttingDown() bool { return q.queue.ShuttingDown() }

// GetContext hands out the next ready item or returns when ctx ends; see
// [Typed.GetContext]. An underlying queue from outside this package needs a
// GetContext method of the same shape; without one, GetContext returns an
// error that wraps [errors.ErrUnsupported].
func (q *delayingQueue[T]) GetContext(ctx context.Context) (T, error) {
	return getContext(ctx, q.queue)
}

// Remove takes item out of the items waiting for their delay and, with the
// underlying queue's Remove, out of the queue, in O(log n), and reports
// whether it took anything back; see [Typed.Remove]. An underlying queue
// from outside this package without a Remove method keeps the item.
func (q *delayingQueue[T]) Remove(item T) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	removed := q.waiting.remove(item)
	if removed {
		q.setDelayedGauge()
	}
	if r, ok := q.queue.(remover[T]); ok && r.Remove(item) {
		removed = true
	}
	return removed
}

// contextGetter and remover are the additions of this package's queues,
// which the layers look for in the queue below them.
type contextGetter[T comparable] interface {
	GetContext(ctx context.Context) (T, error)
}

type remover[T comparable] interface {
	Remove(item T) bool
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
func (q *delayingQueue[T]) AddAfter(item T, duration time.Duration) {
	if duration <= 0 {
		q.addNow(item)
		return
	}
	if q.waitFor(item, duration) {
		select {
		case q.wake <- struct{}{}:
		default:
		}
	}
}

// addNow adds item to the underlying queue and counts the retry if the add
// was accepted. An underlying queue from outside this package does not
// report that, so its flag is read before the add.
func (q *delayingQueue[T]) addNow(item T) {
	if adder, ok := q.queue.(tryAdder[T]); ok {
		if adder.tryAdd(item) && q.retries != nil {
			q.retries.Inc()
		}
		return
	}
	if q.retries != nil && !q.queue.ShuttingDown() {
		q.retries.Inc()
	}
	q.queue.Add(item)
}

// waitFor puts item in the heap, to be added after delay, and reports
// whether it is now the first to be ready. An item put in the heap before
// the shutdown began is dropped by it: the same outcome as an AddAfter that
// came after.
func (q *delayingQueue[T]) waitFor(item T, delay time.Duration) (isFirst bool) {
	q.mu.Lock()
	defer q.mu.Unlock() // a panic (an item that cannot be hashed) leaves it unlocked
	if q.stopped || q.queue.ShuttingDown() {
		return false
	}
	isFirst = q.waiting.add(item, q.readyAt(delay))
	if q.retries != nil {
		q.retries.Inc()
	}
	q.setDelayedGauge()
	return isFirst
}

// ShutDown shuts the underlying queue down, which ignores adds from then
// on, then drops the items waiting for their delay and stops the waiting
// goroutine, waiting for it to exit.
func (q *delayingQueue[T]) ShutDown() {
	q.queue.ShutDown()
	q.stopWaiting()
}

// ShutDownWithDrain makes the underlying queue ignore adds, drops the items
// waiting for their delay, stops the waiting goroutine and waits for it to
// exit, then drains the underlying queue with its ShutDownWithDrain.
func (q *delayingQueue[T]) ShutDownWithDrain() {
	q.stopAdds()
	q.stopWaiting()
	q.queue.ShutDownWithDrain()
}

// stopAdds begins the underlying queue's shutdown, when it is one of this
// package's, without waiting for a drain. Another queue begins its shutdown
// only in its ShutDownWithDrain; until then Add and AddAfter(item, 0) go on
// adding.
func (q *delayingQueue[T]) stopAdds() {
	if s, ok := q.queue.(addStopper); ok {
		s.stopAdds()
	}
}

func (q *delayingQueue[T]) stopWaiting() {
	dropped := q.dropWaiting()
	q.stopOnce.Do(func() { close(q.stopCh) })
	<-q.loopDone
	if dropped > 0 {
		q.logger.Debug("workqueue: dropped items still waiting for their delay at shutdown", "count", dropped)
	}
}

// sinceEpoch returns the clock's current time as an offset from the epoch.
func (q *delayingQueue[T]) sinceEpoch() int64 {
	return int64(q.clock.Since(q.epoch))
}

// readyAt returns the offset from the epoch at which a delay that starts now
// ends, clamped so that huge delays do not overflow.
func (q *delayingQueue[T]) readyAt(delay time.Duration) int64 {
	return readyAfter(q.sinceEpoch(), delay)
}

func (q *delayingQueue[T]) waitingLoop() {
	defer close(q.loopDone)
	defer func() {
		if r := recover(); r != nil {
			q.logger.Error("workqueue: panic in the delaying queue's waiting goroutine", "panic", fmt.Sprint(r))
			panic(r)
		}
	}()
	runDelayLoop(q.clock, q.sinceEpoch, q.moveReady, func() bool {
		if q.queue.ShuttingDown() {
			// The underlying queue was shut down on its own: nothing we
			// add would be accepted any more.
			q.dropWaiting()
			return true
		}
		return false
	}, q.wake, q.stopCh)
}

// moveReady moves up to waitingBatch ready items from the heap to the
// underlying queue. It returns when the goroutine should next look (at most
// a heartbeat from now) and whether the batch was full, so that more may be
// ready.
func (q *delayingQueue[T]) moveReady() (next int64, more bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.sinceEpoch()
	moved := 0
	for ; moved < waitingBatch && q.waiting.len() > 0 && q.waiting.firstReadyAt() <= now; moved++ {
		q.queue.Add(q.waiting.popFirst())
	}
	if moved > 0 {
		q.setDelayedGauge()
	}
	return nextLook(q.waiting, now, moved)
}

// dropWaiting stops the heap, so later AddAfter calls with a delay do
// nothing, and drops the waiting items; it returns how many there were.
func (q *delayingQueue[T]) dropWaiting() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.stopped = true
	dropped := q.waiting.removeAll()
	q.setDelayedGauge()
	return dropped
}

// setDelayedGauge publishes the number of items waiting; the caller holds
// q.mu, so updates reach the gauge in the order the heap changed.
func (q *delayingQueue[T]) setDelayedGauge() {
	if q.delayed != nil {
		q.delayed.Set(float64(q.waiting.len()))
	}
}
