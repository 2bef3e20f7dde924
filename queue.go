package workqueue

import (
	"sync"

	"k8s.io/utils/clock"
)

// TypedInterface is a work queue of items of type T: the methods of [Typed].
// See the package documentation for the guarantees every implementation in
// this package makes.
type TypedInterface[T comparable] interface {
	// Add marks item as needing processing.
	Add(item T)
	// Len returns the number of items waiting to be handed out.
	Len() int
	// Get blocks until it can hand out an item, then returns it, or until the
	// queue is shut down and empty, then returns shutdown true.
	Get() (item T, shutdown bool)
	// Done marks item as done processing.
	Done(item T)
	// ShutDown stops the queue from accepting new items.
	ShutDown()
	// ShutDownWithDrain stops the queue from accepting new items and waits
	// until every queued and in-flight item has been marked done.
	ShutDownWithDrain()
	// ShuttingDown reports whether a shutdown has begun.
	ShuttingDown() bool
}

// Queue is the storage that decides the order in which [Typed] hands out
// items. Typed guards it with its own lock, so implementations need not be
// safe for concurrent use.
//
// Typed calls Push for an item that is not stored, Touch for an item that is
// stored and is added again (a priority queue may reorder it), Pop only when
// Len is positive, and never stores an item twice.
type Queue[T comparable] interface {
	// Touch tells the storage that a stored item was added again.
	Touch(item T)
	// Push stores an item.
	Push(item T)
	// Len returns the number of stored items.
	Len() int
	// Pop removes and returns the next item to hand out.
	Pop() (item T)
}

// DefaultQueue returns the first-in, first-out storage that [Typed] uses when
// its config names none: a ring buffer that grows and shrinks with its
// contents. Pop on an empty DefaultQueue returns the zero value. The result
// is not safe for concurrent use on its own.
func DefaultQueue[T comparable]() Queue[T] {
	return new(ring[T])
}

// TypedQueueConfig configures a queue made by [NewTypedWithConfig]. The zero
// value is valid: no name, no metrics, the real clock and FIFO storage.
type TypedQueueConfig[T comparable] struct {
	// Name identifies the queue in metrics. A queue without a name records
	// no metrics.
	Name string

	// MetricsProvider creates the queue's metrics. A nil provider records
	// nothing and costs nothing.
	MetricsProvider MetricsProvider

	// Clock is used for metrics timestamps. Nil means the real clock.
	Clock clock.WithTicker

	// Queue stores the queued items. Nil means DefaultQueue.
	Queue Queue[T]
}

// itemState is what the queue knows about one item. An item the queue does
// not know is absent from Typed.items.
type itemState uint8

const (
	// stateQueued: in storage, waiting for Get.
	stateQueued itemState = iota + 1
	// stateProcessing: handed out by Get, Done not yet called.
	stateProcessing
	// stateProcessingDirty: handed out and added again since; Done queues it.
	stateProcessingDirty
)

// Typed is a work queue; see the package documentation for its guarantees.
// Create one with [NewTyped] or [NewTypedWithConfig]; the zero value is not
// usable. All methods are safe for concurrent use.
type Typed[T comparable] struct {
	mu sync.Mutex
	// itemReady wakes Get callers: storage gained an item or shutdown began.
	itemReady sync.Cond
	// drained wakes ShutDownWithDrain callers: the queue may have become
	// idle, or ShutDown released them.
	drained sync.Cond

	// items holds the state of every item the queue knows. Invariant: an item
	// is in storage if and only if its state is stateQueued, and the number of
	// items in a processing state equals processing.
	items      map[T]itemState
	storage    Queue[T]
	processing int

	shuttingDown bool
	// drainReleased is set by ShutDown: no ShutDownWithDrain waits after it.
	drainReleased bool

	// metrics is nil when the queue records no metrics.
	metrics *queueMetrics[T]
}

// NewTyped returns a new FIFO work queue with no name and no metrics. It is
// shorthand for NewTypedWithConfig(TypedQueueConfig[T]{}).
func NewTyped[T comparable]() *Typed[T] {
	return NewTypedWithConfig(TypedQueueConfig[T]{})
}

// NewTypedWithConfig returns a new work queue configured by config. If
// config has both a name and a metrics provider, the queue starts one
// goroutine that refreshes the unfinished-work metrics; ShutDown and
// ShutDownWithDrain stop it.
func NewTypedWithConfig[T comparable](config TypedQueueConfig[T]) *Typed[T] {
	if config.Clock == nil {
		config.Clock = clock.RealClock{}
	}
	if config.Queue == nil {
		config.Queue = DefaultQueue[T]()
	}
	q := &Typed[T]{
		items:   make(map[T]itemState),
		storage: config.Queue,
	}
	q.itemReady.L = &q.mu
	q.drained.L = &q.mu
	q.metrics = newQueueMetrics[T](config.MetricsProvider, config.Name, config.Clock, &q.mu)
	return q
}

// Add marks item as needing processing. An item that is already queued is
// not queued again (the storage is told through Touch); an item that is being
// processed is queued again when it is marked done. After a shutdown has
// begun, Add does nothing.
func (q *Typed[T]) Add(item T) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.shuttingDown {
		return
	}
	switch q.items[item] {
	case 0:
		q.items[item] = stateQueued
		q.storage.Push(item)
		q.itemReady.Signal()
	case stateQueued:
		q.storage.Touch(item)
		return
	case stateProcessing:
		q.items[item] = stateProcessingDirty
	case stateProcessingDirty:
		return
	}
	if q.metrics != nil {
		q.metrics.add(item)
	}
}

// Len returns the number of items waiting to be handed out by Get. Items
// added again while being processed are not counted until they are marked
// done.
func (q *Typed[T]) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.storage.Len()
}

// Get blocks until an item is queued, marks it as being processed and
// returns it. The caller must call Done with the item when it has finished
// with it. After a shutdown has begun, Get keeps handing out queued items;
// once none is left it returns the zero value and shutdown true at once.
func (q *Typed[T]) Get() (item T, shutdown bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for q.storage.Len() == 0 {
		if q.shuttingDown {
			return item, true
		}
		q.itemReady.Wait()
	}
	item = q.storage.Pop()
	q.items[item] = stateProcessing
	q.processing++
	if q.metrics != nil {
		q.metrics.get(item)
	}
	return item, false
}

// Done marks item as done processing. If it was added while being processed,
// it is queued again. Done for an item that is not being processed does
// nothing; client-go would queue such an item a second time.
func (q *Typed[T]) Done(item T) {
	q.mu.Lock()
	defer q.mu.Unlock()
	switch q.items[item] {
	case stateProcessing:
		delete(q.items, item)
	case stateProcessingDirty:
		q.items[item] = stateQueued
		q.storage.Push(item)
		q.itemReady.Signal()
	default:
		return
	}
	q.processing--
	if q.metrics != nil {
		q.metrics.done(item)
	}
	if q.processing == 0 && q.storage.Len() == 0 {
		q.drained.Broadcast()
	}
}

// ShutDown makes the queue ignore further adds, wakes every Get caller
// (which then drain what is queued and return shutdown true), releases every
// ShutDownWithDrain caller, and stops the metrics goroutine. It returns when
// that goroutine has exited. Calling it again does nothing.
func (q *Typed[T]) ShutDown() {
	q.mu.Lock()
	q.shuttingDown = true
	q.drainReleased = true
	q.itemReady.Broadcast()
	q.drained.Broadcast()
	q.mu.Unlock()
	q.stopMetrics()
}

// ShutDownWithDrain makes the queue ignore further adds and waits until no
// item is queued or being processed, including items that were added while
// being processed and are queued again by Done. Workers must keep calling
// Get and Done meanwhile, or it waits forever. A concurrent ShutDown releases
// it at once; after ShutDown it returns at once. It stops the metrics
// goroutine before it returns.
func (q *Typed[T]) ShutDownWithDrain() {
	q.mu.Lock()
	q.shuttingDown = true
	q.itemReady.Broadcast()
	for !q.drainReleased && (q.processing > 0 || q.storage.Len() > 0) {
		q.drained.Wait()
	}
	q.mu.Unlock()
	q.stopMetrics()
}

// ShuttingDown reports whether ShutDown or ShutDownWithDrain has been
// called.
func (q *Typed[T]) ShuttingDown() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.shuttingDown
}

func (q *Typed[T]) stopMetrics() {
	if q.metrics != nil {
		q.metrics.stop()
	}
}
