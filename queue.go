package workqueue

import (
	"context"
	"log/slog"
	"time"

	"github.com/go-workqueue/workqueue/internal/list"
	"github.com/go-workqueue/workqueue/internal/ring"
	"github.com/go-workqueue/workqueue/internal/table"
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

// DefaultQueue returns first-in, first-out storage. Pop on an empty
// DefaultQueue returns the zero value. The result is not safe for
// concurrent use on its own. A DefaultQueue passed in the config is used as
// given; leaving the config's Queue nil gives the same order, faster.
func DefaultQueue[T comparable]() Queue[T] {
	return new(ring.Ring[T])
}

// TypedQueueConfig configures a queue made by [NewTypedWithConfig]. The zero
// value is valid: no name, no metrics, the real clock and FIFO storage.
type TypedQueueConfig[T comparable] struct {
	// Name identifies the queue in metrics. A queue without a name records
	// no metrics; a named queue without a MetricsProvider records none
	// either, and the first one made in a process logs a warning saying
	// so.
	Name string

	// MetricsProvider creates the queue's metrics. A nil provider records
	// nothing and costs nothing.
	MetricsProvider MetricsProvider

	// Clock is used for metrics timestamps and decides when parks end.
	// Nil means the real clock.
	Clock clock.WithTicker

	// Logger receives the queue's rare log lines: parked items dropped at
	// shutdown (info level). Nil means slog.Default().
	Logger *slog.Logger

	// MaxParkTime bounds how long an item stays parked (see [Typed.Park])
	// without an event: after it, the item is queued again as if woken.
	// Zero means [DefaultMaxParkTime]; there is no unbounded park.
	MaxParkTime time.Duration

	// Queue stores the queued items. Nil means first-in, first-out order.
	// Items it holds already are taken in at construction, as if added in
	// the order its Pop returns them: duplicates among them are collapsed.
	Queue Queue[T]
}

// Typed is a work queue; see the package documentation for its guarantees.
// Create one with [NewTyped] or [NewTypedWithConfig]; the zero value is not
// usable: a Get that has to wait for an item and ShutDownWithDrain panic
// on it with a "workqueue:" message. All methods are safe for concurrent
// use, and each takes effect at one instant between its call and its
// return, so that any concurrent history of calls is one that the calls
// made one at a time could produce (Get and ShutDownWithDrain may block
// before that instant).
type Typed[T comparable] struct {
	core core[T]
	// storage is the order of custom storage, nil for FIFO: it is told of
	// adds of queued items, and its Push may panic.
	storage *storageOrder[T]
}

// NewTyped returns a new FIFO work queue with no name and no metrics. It is
// shorthand for NewTypedWithConfig(TypedQueueConfig[T]{}).
func NewTyped[T comparable]() *Typed[T] {
	return NewTypedWithConfig(TypedQueueConfig[T]{})
}

// NewTypedWithConfig returns a new work queue configured by config. If
// config has both a name and a metrics provider, the queue starts one
// goroutine that refreshes the unfinished-work metrics; ShutDown and
// ShutDownWithDrain stop it, as they stop the one that the first Park
// starts. It panics if MaxParkTime is negative.
func NewTypedWithConfig[T comparable](config TypedQueueConfig[T]) *Typed[T] {
	if config.Clock == nil {
		config.Clock = clock.RealClock{}
	}
	maxPark := maxParkTime("NewTypedWithConfig", config.MaxParkTime)
	if config.Logger == nil {
		config.Logger = slog.Default()
	}
	q := &Typed[T]{}
	var order handOutOrder
	var prefilled []T
	if config.Queue == nil {
		order = &fifoOrder{list: list.New()}
	} else {
		for config.Queue.Len() > 0 {
			prefilled = append(prefilled, config.Queue.Pop())
		}
		q.storage = &storageOrder[T]{storage: config.Queue, items: &q.core.items}
		order = q.storage
	}
	q.core.init(order, config.MetricsProvider, config.Name, config.Clock, config.Logger, maxPark)
	for _, item := range prefilled {
		q.Add(item)
	}
	q.core.start()
	return q
}

// Add marks item as needing processing. An item that is already queued is
// not queued again (custom storage is told through Touch); an item that is
// being processed is queued again when it is marked done; a parked item is
// queued at once. After a shutdown has begun, Add does nothing.
func (q *Typed[T]) Add(item T) { q.tryAdd(item) }

// tryAdd is Add; it reports whether the add was accepted, that is whether
// no shutdown had begun, so that the delaying layer counts only accepted
// retries.
func (q *Typed[T]) tryAdd(item T) (accepted bool) {
	hash := q.core.items.Hash(item)
	q.core.mu.Lock()
	defer q.core.mu.Unlock()
	return q.addLocked(item, hash)
}

// addLocked is tryAdd with mu held and item's hash computed.
func (q *Typed[T]) addLocked(item T, hash uint32) (accepted bool) {
	if q.core.shuttingDown.Load() {
		return false
	}
	entry, id := q.core.items.Lookup(item, hash)
	switch {
	case entry == nil && q.storage != nil:
		q.insertStored(item, hash)
	case entry == nil:
		q.core.insertQueued(item, hash)
	case entry.Val.pending == pendingReady: // queued, or to be by Done
		if !entry.Val.processing && q.storage != nil {
			q.storage.touch(id)
		}
		return true
	default: // processing, parked, or waiting for a park's backoff
		if !entry.Val.processing {
			q.core.queueHeld(id) // first: if custom storage's Push panics, nothing changed
		}
		q.core.cancelWait(id)
		entry.Val.pending = pendingReady
	}
	q.core.countAdd(item)
	return true
}

// insertStored is insertQueued into custom storage, whose Push may panic:
// then the add has not happened, and the record filed for it must go.
func (q *Typed[T]) insertStored(item T, hash uint32) {
	stored := false
	defer func() {
		if !stored {
			_, id := q.core.items.Lookup(item, hash)
			q.core.items.Remove(id)
		}
	}()
	q.core.insertQueued(item, hash)
	stored = true
}

// Len returns the number of items waiting to be handed out by Get. Items
// added again while being processed are not counted until they are marked
// done.
func (q *Typed[T]) Len() int {
	q.core.mu.Lock()
	defer q.core.mu.Unlock()
	return q.core.queued
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

func (q *Typed[T]) get(ctx context.Context) (item T, err error) {
	q.core.mu.Lock()
	defer q.core.mu.Unlock()
	item, _, err = q.core.get(ctx, "Typed; make one with NewTyped or NewTypedWithConfig")
	return item, err
}

// Done marks item as done processing. If it was added while being processed,
// it is queued again, even after a shutdown has begun. Done for an item that
// is not being processed does nothing; client-go would queue such an item a
// second time.
func (q *Typed[T]) Done(item T) {
	hash := q.core.items.Hash(item)
	q.core.mu.Lock()
	defer q.core.mu.Unlock()
	q.core.done(item, hash)
}

// Remove takes item back: a queued or parked item leaves the queue, and
// an item being processed that was added again or parked meanwhile is not
// queued again or parked by Done. It reports whether it took anything
// back; an item being processed keeps being processed. It takes O(1) time
// for a queued item, O(log n) for one waiting for the backoff of its park.
// With custom storage, an item added again before Get reaches its old
// place is handed out from there, as if it had never been removed.
func (q *Typed[T]) Remove(item T) bool {
	hash := q.core.items.Hash(item)
	q.core.mu.Lock()
	defer q.core.mu.Unlock()
	entry, id := q.core.items.Lookup(item, hash)
	if entry == nil {
		return false
	}
	switch entry.Val.pending {
	case pendingReady:
		q.core.removeReady(id)
	case pendingNone:
		return false
	default:
		q.core.removeWaiting(id)
	}
	return true
}

// Park parks item, which the caller got from Get and has not yet marked
// done, until one of events happens: from its Done on, the queue holds it
// without handing it out or counting it in Len, until [Typed.Wake] with
// one of events, [Typed.WakeItem], an add of the item, or MaxParkTime
// (see [TypedQueueConfig]) ends the park; then the item is queued again.
// With no events, only the last three do. An event that was woken after
// the item's Get is not waited for, since it may have changed what the
// worker saw: the item is queued again at Done. An add of the item since
// its Get wins over the park, as does a wake of an earlier Park of it;
// otherwise a second Park replaces the first.
//
// Park does nothing for an item not being processed and after a shutdown
// has begun; the shutdown drops parked items, as it drops delayed ones,
// and logs how many at info level. The first Park starts the goroutine
// that ends parks after MaxParkTime; ShutDown and ShutDownWithDrain stop
// it. Event names should come from a small fixed set: the queue keeps the
// last wake of each.
func (q *Typed[T]) Park(item T, events ...string) { q.park(item, nil, events) }

// park is Park with a backoff: a wake before it has passed queues the
// item when it passes.
func (q *Typed[T]) park(item T, backoff func() time.Duration, events []string) {
	hash := q.core.items.Hash(item)
	q.core.mu.Lock()
	defer q.core.mu.Unlock()
	q.core.parkLocked(item, hash, backoff, events)
}

// Wake ends the park of every item parked until event, and queues them in
// the order they were parked, each once the backoff of its park has
// passed (on a rate-limiting queue); a park whose item is still being
// processed ends too, so its Done queues it again. It returns how many
// parks it ended, and does nothing after a shutdown has begun.
func (q *Typed[T]) Wake(event string) int { return q.WakeFunc(event, nil) }

// WakeFunc is Wake for the items parked until event for which accept
// returns true, as kube-scheduler's queueing hints decide which pods an
// event may help; the others stay parked. A nil accept accepts every item.
// accept is called with the queue's lock held, so that the wake takes
// effect at one instant: it must be quick, and must not call the queue,
// not even a rate-limiting queue's Forget or NumRequeues, or it may
// deadlock. If it panics, the parks it accepted before stay ended and the
// others stay parked.
func (q *Typed[T]) WakeFunc(event string, accept func(item T) bool) int {
	q.core.mu.Lock()
	defer q.core.mu.Unlock()
	return q.core.wakeLocked(event, accept)
}

// WakeItem ends item's park, if it is parked, and queues it at once
// without waiting for the backoff of its park, as kube-scheduler's
// Activate does. It reports whether item was parked: an item whose park a
// wake ended already, and which waits for that backoff, is not, and keeps
// waiting; an Add queues it at once.
func (q *Typed[T]) WakeItem(item T) bool {
	hash := q.core.items.Hash(item)
	q.core.mu.Lock()
	defer q.core.mu.Unlock()
	return q.core.wakeItemLocked(item, hash)
}

// ShutDown makes the queue ignore further adds, wakes every Get caller
// (which then drain what is queued and return shutdown true), releases every
// ShutDownWithDrain caller, drops parked items, and stops the metrics
// goroutine and the one that the first Park started, returning when they
// have exited. Calling it again does nothing.
func (q *Typed[T]) ShutDown() {
	q.core.mu.Lock()
	q.core.releaseDrains()
	q.core.mu.Unlock()
	q.core.stopDelays()
	q.core.stopMetrics()
}

// ShutDownWithDrain makes the queue ignore further adds and waits until no
// item is queued or being processed, including items that were added while
// being processed and are queued again by Done. Workers must keep calling
// Get and Done meanwhile, or it waits forever. A concurrent ShutDown releases
// it at once; after ShutDown it returns at once. It drops parked items
// rather than wait for them, and stops the metrics goroutine and the one
// that the first Park started before it returns. It panics on a zero
// Typed.
func (q *Typed[T]) ShutDownWithDrain() {
	q.core.mu.Lock()
	q.core.stopAddsLocked()
	q.core.drain("Typed; make one with NewTyped or NewTypedWithConfig")
	q.core.mu.Unlock()
	q.core.stopDelays()
	q.core.stopMetrics()
}

// stopAdds is the instant at which a shutdown begins: from then on every
// add is ignored. The layers above call it before they shut down
// themselves, so that one flag decides for all their adds.
func (q *Typed[T]) stopAdds() {
	q.core.mu.Lock()
	q.core.stopAddsLocked()
	q.core.mu.Unlock()
}

// ShuttingDown reports whether a shutdown has begun: ShutDown or
// ShutDownWithDrain of this queue or of a layer above it has been called.
func (q *Typed[T]) ShuttingDown() bool {
	return q.core.shuttingDown.Load()
}

// Snapshot returns a view of the queue at one instant, listing at most n
// items of each kind (n <= 0 lists none; the counts are always there). It
// takes O(n log n) steps, so it is cheap enough to call on a busy queue every
// second. Queued is empty with custom storage, which cannot be read without
// popping.
//
// InFlight lists the items handed out since the queue's first Snapshot,
// or since it was made if it records metrics. It is safe for concurrent
// use.
func (q *Typed[T]) Snapshot(n int) Snapshot[T] {
	q.core.mu.Lock()
	defer q.core.mu.Unlock()
	return q.core.snapshotLocked(n)
}

// fifoOrder hands out items first in, first out.
type fifoOrder struct {
	list  list.IDs
	links list.Links
}

func (o *fifoOrder) queue(id int32)   { o.list.PushBack(&o.links, id) }
func (o *fifoOrder) next() int32      { return o.list.PopFront(&o.links) }
func (o *fifoOrder) unqueue(id int32) { o.list.Remove(&o.links, id) }
func (o *fifoOrder) empty()           { o.links.Shrink() }

func (o *fifoOrder) first(n int) []int32 {
	var ids []int32
	for id := o.list.Head(); id >= 0 && len(ids) < n; id = o.links.Next(id) {
		ids = append(ids, id)
	}
	return ids
}

// storageOrder hands out items in the order of the user's storage. The
// storage cannot take an item out of its middle, so an item the core
// unqueues stays stored, in removed, until Pop returns it and it is
// skipped, or until it is queued again and keeps its place.
type storageOrder[T comparable] struct {
	storage Queue[T]
	items   *table.Table[T, record]
	removed map[T]struct{}
}

func (o *storageOrder[T]) queue(id int32) { o.store(o.items.At(id).Item) }

// store puts item in the storage, or, if it is still there, removed,
// takes it back where it is.
func (o *storageOrder[T]) store(item T) {
	if _, ok := o.removed[item]; ok {
		o.storage.Touch(item)
		delete(o.removed, item)
		return
	}
	o.storage.Push(item)
}

func (o *storageOrder[T]) next() int32 {
	for {
		item := o.storage.Pop()
		if _, ok := o.removed[item]; ok {
			delete(o.removed, item)
			continue
		}
		entry, id := o.items.Lookup(item, o.items.Hash(item))
		if entry == nil || entry.Val.processing || entry.Val.pending != pendingReady {
			panic("workqueue: the queue's storage popped an item that was not queued in it")
		}
		return id
	}
}

func (o *storageOrder[T]) unqueue(id int32) {
	if o.removed == nil {
		o.removed = make(map[T]struct{})
	}
	o.removed[o.items.At(id).Item] = struct{}{}
}

// touch tells the storage that the queued id was added again.
func (o *storageOrder[T]) touch(id int32) { o.storage.Touch(o.items.At(id).Item) }

func (o *storageOrder[T]) first(int) []int32 { return nil }
func (o *storageOrder[T]) empty()            {}
