package workqueue

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"k8s.io/utils/clock"
)

// TypedInterface is a work queue of items of type T: the methods of [Typed].
// Every implementation in this package is safe for concurrent use and makes
// the guarantees listed in the package documentation.
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
// Len is positive, and never stores an item twice. Pop must return an item
// that Typed pushed and has not popped yet; Get panics otherwise.
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

// DefaultQueue returns first-in, first-out storage: a ring buffer that
// grows and shrinks with its contents. Pop on an empty DefaultQueue returns
// the zero value. The result is not safe for concurrent use on its own. A
// DefaultQueue passed in the config is used as given; leaving the config's
// Queue nil gives the same order with a faster Get.
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

	// Queue stores the queued items. Nil means first-in, first-out order.
	// Items it holds already are taken in at construction, as if added in
	// the order its Pop returns them: duplicates among them are collapsed.
	Queue Queue[T]
}

// itemState is what the queue knows of an item it holds.
type itemState uint8

const (
	// stateQueued: in storage, waiting for Get.
	stateQueued itemState = iota
	// stateProcessing: handed out by Get, not yet marked done.
	stateProcessing
	// stateDirty: processing, and added again meanwhile; Done queues it.
	stateDirty
	// stateRemoved: still in the storage, but removed by Remove; Get
	// skips it. With the default storage its record is detached from the
	// table's index, so that an add of the item files a new one and goes
	// to the back; custom storage, which must never hold an item twice,
	// keeps it indexed, and an add takes it back where it is.
	stateRemoved
)

// Typed is a work queue; see the package documentation for its guarantees.
// Create one with [NewTyped] or [NewTypedWithConfig]; the zero value is not
// usable. On a zero Typed, a Get that has to wait for an item and
// ShutDownWithDrain panic with a "workqueue:" message; the other methods
// may seem to work until then. All methods are safe for concurrent use, and each takes effect at
// one instant between its call and its return, so that any concurrent
// history of calls is one that the calls made one at a time could produce
// (Get and ShutDownWithDrain may block before that instant).
type Typed[T comparable] struct {
	mu yieldingMutex
	// drained wakes ShutDownWithDrain callers: the queue became idle, or a
	// ShutDown released them.
	drained sync.Cond

	// items holds a record of every item that is queued or processing.
	// Invariant (verifyQueue checks it): an item is in the storage if and
	// only if its state is stateQueued or stateRemoved; the others are
	// being processed.
	items itemTable[T, itemState]
	// removed counts the records in the storage in stateRemoved.
	removed int
	// order is the default storage: the ids of the queued items in items,
	// oldest first. custom, if set, is the storage instead.
	order  ring[int32]
	custom Queue[T]

	// sleepers are the Get callers asleep and not yet woken, and
	// wakeupsPending counts those woken and not yet running. A push wakes
	// a sleeper only when more items are queued than wakeups are pending,
	// so a burst does not wake more workers than it has items for.
	sleepers       waiterLine
	wakeupsPending int
	drainWaiters   int
	// drainReleased is set by ShutDown: no ShutDownWithDrain waits after it.
	drainReleased bool
	// shuttingDown is written under mu; ShuttingDown reads it without.
	shuttingDown atomic.Bool

	// metrics is nil when the queue records no metrics; mu guards it.
	metrics *queueMetrics[T]

	// For Snapshot: the queue's clock, the adds so far, and the items
	// being processed in the order they were handed out.
	clock  clock.PassiveClock
	adds   uint64
	flight flightList
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
	q := &Typed[T]{items: newItemTable[T, itemState](), custom: config.Queue, clock: config.Clock, flight: newFlightList()}
	q.drained.L = &q.mu
	q.metrics = newQueueMetrics[T](config.MetricsProvider, config.Name, config.Clock, &q.mu)
	if q.custom != nil && q.custom.Len() > 0 {
		prefilled := make([]T, 0, q.custom.Len())
		for q.custom.Len() > 0 {
			prefilled = append(prefilled, q.custom.Pop())
		}
		for _, item := range prefilled {
			q.Add(item)
		}
	}
	return q
}

// Add marks item as needing processing. An item that is already queued is
// not queued again (custom storage is told through Touch); an item that is
// being processed is queued again when it is marked done. After a shutdown
// has begun, Add does nothing.
func (q *Typed[T]) Add(item T) { q.tryAdd(item) }

// tryAdd is Add; it reports whether the add was accepted, that is whether
// no shutdown had begun, so that the delaying layer counts only accepted
// retries.
func (q *Typed[T]) tryAdd(item T) (accepted bool) {
	hash := q.items.hash(item)
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.addLocked(item, hash)
}

// addLocked is tryAdd with mu held and item's hash computed.
func (q *Typed[T]) addLocked(item T, hash uint32) (accepted bool) {
	if q.shuttingDown.Load() {
		return false
	}
	record, _ := q.items.lookup(item, hash)
	switch {
	case record == nil:
		if q.custom != nil {
			// Stored before the record is filed: a Push that panics
			// leaves the queue as it was.
			q.custom.Push(item)
			q.items.insert(item, hash, stateQueued)
		} else {
			_, id := q.items.insert(item, hash, stateQueued)
			q.order.Push(id)
		}
		q.wakeOne()
	case record.val == stateQueued:
		if q.custom != nil {
			q.custom.Touch(item)
		}
		return true
	case record.val == stateProcessing:
		record.val = stateDirty
	case record.val == stateRemoved: // only with custom storage
		q.custom.Touch(item)
		record.val = stateQueued
		q.removed--
		q.wakeOne()
	default: // dirty already
		return true
	}
	q.adds++
	if q.metrics != nil {
		q.metrics.add(item)
	}
	return true
}

// wakeOne wakes a sleeping Get caller if one should take a newly queued
// item: if more items are queued than wakeups are pending. The caller holds
// mu.
func (q *Typed[T]) wakeOne() {
	if q.sleepers.n > 0 && q.queued() > q.wakeupsPending {
		q.wakeupsPending++
		q.sleepers.wakeFirst()
	}
}

// queued returns the number of items in the storage. The caller holds mu.
func (q *Typed[T]) queued() int {
	if q.custom != nil {
		return q.custom.Len() - q.removed
	}
	return q.order.Len() - q.removed
}

// Len returns the number of items waiting to be handed out by Get. Items
// added again while being processed are not counted until they are marked
// done.
func (q *Typed[T]) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.queued()
}

// Get blocks until an item is queued, marks it as being processed and
// returns it. The caller must call Done with the item when it has finished
// with it. After a shutdown has begun, Get keeps handing out queued items;
// once none is left it returns the zero value and shutdown true at once.
// It panics if custom storage pops an item the queue did not push, and if
// it has to wait on a zero Typed.
func (q *Typed[T]) Get() (item T, shutdown bool) {
	item, err := q.get(context.Background())
	return item, err != nil
}

// ErrShutDown is the error GetContext returns once a shutdown has begun and
// no item is left to hand out.
var ErrShutDown = errors.New("workqueue: queue is shut down")

// GetContext is Get with a context: it returns an item and a nil error, or,
// if ctx ends before an item can be handed out, ctx.Err() and no item, or
// ErrShutDown once a shutdown has begun and no item is left. A caller whose
// context ends takes no item with it: an item queued meanwhile stays queued
// for the next caller. If ctx has ended already, GetContext returns
// ctx.Err() without taking an item. The caller must call Done with each
// item it gets.
func (q *Typed[T]) GetContext(ctx context.Context) (item T, err error) {
	if err := ctx.Err(); err != nil {
		return item, err
	}
	return q.get(ctx)
}

// get hands out the next item, sleeping until there is one. It returns
// ErrShutDown once a shutdown has begun and none is left, and ctx's error
// when it ends first.
func (q *Typed[T]) get(ctx context.Context) (item T, err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for q.queued() == 0 {
		if q.shuttingDown.Load() {
			return item, ErrShutDown
		}
		if q.drained.L == nil {
			panic(zeroTyped("Get"))
		}
		if err := q.sleep(ctx); err != nil {
			return item, err
		}
	}
	record, id := q.popQueued()
	item = record.item
	record.val = stateProcessing
	if q.flight.tracking {
		q.flight.link(id, q.clock.Now())
	}
	if q.metrics != nil {
		q.metrics.get(item)
	}
	return item, nil
}

// popQueued takes the next queued item out of the storage, skipping removed
// ones, and returns its record and id. The caller holds mu, and at least
// one item is queued.
func (q *Typed[T]) popQueued() (*tableEntry[T, itemState], int32) {
	for {
		if q.custom == nil {
			id := q.order.Pop()
			if record := q.items.at(id); record.val != stateRemoved {
				return record, id
			}
			q.items.release(id)
			q.removed--
			continue
		}
		item := q.custom.Pop()
		record, id := q.items.lookup(item, q.items.hash(item))
		switch {
		case record == nil || record.val != stateQueued && record.val != stateRemoved:
			panic("workqueue: the queue's storage popped an item that was not queued in it")
		case record.val == stateQueued:
			return record, id
		}
		q.items.remove(id)
		q.removed--
	}
}

// sleep waits, with mu released, until a push or a shutdown wakes the
// caller, or ctx ends; then it returns ctx's error. The caller
// holds mu, and holds it again when sleep returns.
func (q *Typed[T]) sleep(ctx context.Context) error {
	return sleepInLine(ctx, &q.mu, &q.sleepers, &q.wakeupsPending, q.wakeOne)
}

// Done marks item as done processing. If it was added while being processed,
// it is queued again, even after a shutdown has begun. Done for an item that
// is not being processed does nothing; client-go would queue such an item a
// second time.
func (q *Typed[T]) Done(item T) {
	hash := q.items.hash(item)
	q.mu.Lock()
	defer q.mu.Unlock()
	record, id := q.items.lookup(item, hash)
	if record == nil || record.val == stateQueued || record.val == stateRemoved {
		return
	}
	if q.flight.tracking {
		q.flight.unlink(id)
	}
	// The state changes before the metrics, which are user code, are
	// told, and a custom Push runs before anything changes: a panic in
	// either leaves the queue consistent.
	if record.val == stateDirty {
		if q.custom != nil {
			q.custom.Push(item)
		} else {
			q.order.Push(id)
		}
		record.val = stateQueued
		q.wakeOne()
	} else {
		q.items.remove(id)
		if q.flight.tracking && q.items.len() == 0 {
			q.flight.links.reset() // nothing is linked: let go of a burst's links
		}
		if q.drainWaiters > 0 && q.idle() {
			q.drained.Broadcast()
		}
	}
	if q.metrics != nil {
		q.metrics.done(item)
	}
}

// idle reports whether no item is queued or being processed. The caller
// holds mu.
func (q *Typed[T]) idle() bool {
	if q.custom != nil {
		return q.items.len() == q.removed // removed records stay indexed
	}
	return q.items.len() == 0
}

// Remove takes item back: a queued item leaves the queue, and an item
// being processed that was added again meanwhile is not queued again by
// Done. It reports whether it took anything back; an item being processed
// keeps being processed. It takes O(1) time; a removed item's place in the
// storage is freed when Get reaches it. With custom storage, an item added
// again before Get reaches its old place is handed out from there, as if
// it had never been removed.
func (q *Typed[T]) Remove(item T) bool {
	hash := q.items.hash(item)
	q.mu.Lock()
	defer q.mu.Unlock()
	record, id := q.items.lookup(item, hash)
	if record == nil {
		return false
	}
	switch record.val {
	case stateQueued:
		record.val = stateRemoved
		q.removed++
		if q.custom == nil {
			q.items.detach(id)
		}
	case stateDirty:
		record.val = stateProcessing
	default:
		return false
	}
	if q.metrics != nil {
		q.metrics.remove(item)
	}
	if q.drainWaiters > 0 && q.idle() {
		q.drained.Broadcast()
	}
	return true
}

// ShutDown makes the queue ignore further adds, wakes every Get caller
// (which then drain what is queued and return shutdown true), releases every
// ShutDownWithDrain caller, and stops the metrics goroutine. It returns when
// that goroutine has exited. Calling it again does nothing.
func (q *Typed[T]) ShutDown() {
	q.mu.Lock()
	q.stopAddsLocked()
	q.drainReleased = true
	q.drained.Broadcast()
	q.mu.Unlock()
	q.stopMetrics()
}

// ShutDownWithDrain makes the queue ignore further adds and waits until no
// item is queued or being processed, including items that were added while
// being processed and are queued again by Done. Workers must keep calling
// Get and Done meanwhile, or it waits forever. A concurrent ShutDown releases
// it at once; after ShutDown it returns at once. It stops the metrics
// goroutine before it returns. It panics on a zero Typed.
func (q *Typed[T]) ShutDownWithDrain() {
	// Read without the lock: only construction sets it.
	if q.drained.L == nil {
		panic(zeroTyped("ShutDownWithDrain"))
	}
	q.mu.Lock()
	q.stopAddsLocked()
	q.drainWaiters++
	for !q.drainReleased && !q.idle() {
		q.drained.Wait()
	}
	q.drainWaiters--
	q.mu.Unlock()
	q.stopMetrics()
}

// zeroTyped is the panic message of method called on a zero Typed, which
// lacks what its constructor sets up: a Get there would wait for ever, a
// drain would dereference nil.
func zeroTyped(method string) string {
	return "workqueue: " + method + " on a zero Typed; make one with NewTyped or NewTypedWithConfig"
}

// stopAdds is the instant at which a shutdown begins: from then on every
// add is ignored. The layers above call it before they shut down
// themselves, so that one flag decides for all their adds.
func (q *Typed[T]) stopAdds() {
	q.mu.Lock()
	q.stopAddsLocked()
	q.mu.Unlock()
}

func (q *Typed[T]) stopAddsLocked() {
	q.shuttingDown.Store(true)
	for q.sleepers.n > 0 {
		q.wakeupsPending++
		q.sleepers.wakeFirst()
	}
}

// ShuttingDown reports whether a shutdown has begun: ShutDown or
// ShutDownWithDrain of this queue or of a layer above it has been called.
func (q *Typed[T]) ShuttingDown() bool {
	return q.shuttingDown.Load()
}

func (q *Typed[T]) stopMetrics() {
	if q.metrics != nil {
		q.metrics.stop()
	}
}

// addStopper is implemented by the queues of this package whose shutdown can
// begin (stopAdds) apart from waiting for a drain, so that a layer above
// makes its own check-and-act atomic with that one instant.
type addStopper interface {
	stopAdds()
}

// tryAdder is implemented by Typed: an Add that reports whether it was
// accepted.
type tryAdder[T comparable] interface {
	tryAdd(item T) bool
}
