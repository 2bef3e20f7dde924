package workqueue

import (
	"hash/maphash"
	"sync"

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

// itemRecord is what the queue knows about an item it holds. Bits 2 and up
// hold the ticket of the item's latest push into the default FIFO; an item
// whose ticket is below Typed.popped has been handed out, so Get needs no map
// operation to mark it. With custom storage there are no tickets and Get sets
// recordProcessing instead.
type itemRecord uint64

const (
	// recordDirty: added again while processing; Done queues it again.
	recordDirty itemRecord = 1 << iota
	// recordProcessing: handed out, with custom storage only.
	recordProcessing
	recordTicketShift = iota
)

// Typed is a work queue; see the package documentation for its guarantees.
// Create one with [NewTyped] or [NewTypedWithConfig]; the zero value is not
// usable. All methods are safe for concurrent use.
type Typed[T comparable] struct {
	mu sync.Mutex
	// itemReady wakes Get callers: storage gained an item or shutdown began.
	// sleepingGets counts the Get callers waiting on it, and wakeups the
	// signals sent to them that no woken caller has taken up yet. One
	// wakeup at a time is enough: a woken caller that takes an item passes
	// the signal on if more items wait, and callers already awake take
	// items without sleeping, so a burst does not wake every worker.
	itemReady             sync.Cond
	sleepingGets, wakeups int
	// drained wakes ShutDownWithDrain callers: the queue may have become
	// idle, or ShutDown released them.
	drained sync.Cond

	// slots hold a record for every item that is queued or being processed,
	// and index finds an item's slot by the item's hash: one hash per Add or
	// Done where a Go map would hash twice (lookup, then insert or delete).
	// Freed slots are cleared, so no item is kept alive, and reused.
	// Invariant: an item is in storage if and only if it has a record and
	// is not processing; the number of processing records equals processing.
	slots chunked[queueSlot[T]]
	free  chunked[int32]
	index slotIndex
	seed  maphash.Seed
	// fifo is the storage unless custom is set.
	fifo *ring[T]
	// custom is storage given in the config, or nil.
	custom Queue[T]
	// pushed and popped count the pushes into and pops from fifo: the next
	// ticket, and the first ticket not yet handed out.
	pushed, popped uint64
	processing     int

	shuttingDown bool
	// drainReleased is set by ShutDown: no ShutDownWithDrain waits after it.
	drainReleased bool
	drainWaiters  int

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
	q := &Typed[T]{seed: maphash.MakeSeed()}
	switch storage := config.Queue.(type) {
	case nil:
		q.fifo = new(ring[T])
	case *ring[T]:
		q.fifo = storage
	default:
		q.custom = storage
	}
	q.itemReady.L = &q.mu
	q.drained.L = &q.mu
	q.metrics = newQueueMetrics[T](config.MetricsProvider, config.Name, config.Clock, &q.mu)
	return q
}

// queueSlot is where the queue keeps an item and its record.
type queueSlot[T comparable] struct {
	item T
	rec  itemRecord
}

// lookup returns the slot of item, whose hash is hash, if the queue holds
// item.
func (q *Typed[T]) lookup(item T, hash uint32) (slot *queueSlot[T], id int32) {
	// The walk of index.find, with the item comparison inline: this is the
	// hottest loop of the queue, and a callback per entry costs.
	entries, start := q.index.run(hash)
	mask := uint32(len(entries) - 1)
	for i := start; entries != nil; i = (i + 1) & mask {
		e := entries[i]
		if e.slotPlus1 == 0 {
			break
		}
		if e.hash == hash {
			if slot := q.slots.at(int(e.slotPlus1 - 1)); slot.item == item {
				return slot, e.slotPlus1 - 1
			}
		}
	}
	return nil, -1
}

// addSlot files a new slot for item and returns it.
func (q *Typed[T]) addSlot(item T, hash uint32) *queueSlot[T] {
	var id int32
	if n := q.free.len(); n > 0 {
		id = *q.free.at(n - 1)
		q.free.truncate()
	} else {
		q.slots.push(queueSlot[T]{})
		id = int32(q.slots.len() - 1)
	}
	q.index.insert(hash, id)
	slot := q.slots.at(int(id))
	slot.item = item
	return slot
}

// removeSlot forgets the item in slot id, filed under hash.
func (q *Typed[T]) removeSlot(hash uint32, id int32) {
	q.index.remove(hash, id)
	*q.slots.at(int(id)) = queueSlot[T]{} // let the garbage collector have the item
	q.free.push(id)
}

// isProcessing reports whether the item with record rec has been handed out
// and not yet marked done.
func (q *Typed[T]) isProcessing(rec itemRecord) bool {
	if q.custom != nil {
		return rec&recordProcessing != 0
	}
	return uint64(rec>>recordTicketShift) < q.popped
}

// push stores item, makes sure a Get caller will take it, and returns the
// item's new record.
func (q *Typed[T]) push(item T) (rec itemRecord) {
	if q.custom != nil {
		q.custom.Push(item)
	} else {
		q.fifo.Push(item)
		rec = itemRecord(q.pushed << recordTicketShift)
		q.pushed++
	}
	q.wakeOne()
	return rec
}

// wakeOne wakes a sleeping Get caller if items wait and no wakeup is under
// way already.
func (q *Typed[T]) wakeOne() {
	if q.wakeups == 0 && q.sleepingGets > 0 && q.queued() > 0 {
		q.wakeups++
		q.itemReady.Signal()
	}
}

func (q *Typed[T]) queued() int {
	if q.custom != nil {
		return q.custom.Len()
	}
	return q.fifo.n
}

// Add marks item as needing processing. An item that is already queued is
// not queued again (custom storage is told through Touch); an item that is
// being processed is queued again when it is marked done. After a shutdown
// has begun, Add does nothing.
func (q *Typed[T]) Add(item T) {
	hash := hashItem(q.seed, item) // outside the lock: the seed never changes
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.shuttingDown {
		return
	}
	slot, _ := q.lookup(item, hash)
	switch {
	case slot == nil:
		slot = q.addSlot(item, hash)
		slot.rec = q.push(item)
	case !q.isProcessing(slot.rec):
		if q.custom != nil {
			q.custom.Touch(item)
		}
		return
	case slot.rec&recordDirty == 0:
		slot.rec |= recordDirty
	default:
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
	return q.queued()
}

// Get blocks until an item is queued, marks it as being processed and
// returns it. The caller must call Done with the item when it has finished
// with it. After a shutdown has begun, Get keeps handing out queued items;
// once none is left it returns the zero value and shutdown true at once.
func (q *Typed[T]) Get() (item T, shutdown bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for q.queued() == 0 {
		if q.shuttingDown {
			return item, true
		}
		q.sleepingGets++
		q.itemReady.Wait()
		q.sleepingGets--
		if q.wakeups > 0 {
			q.wakeups--
		}
	}
	if q.custom != nil {
		item = q.custom.Pop()
		slot, _ := q.lookup(item, hashItem(q.seed, item))
		slot.rec |= recordProcessing
	} else {
		item = q.fifo.Pop()
		q.popped++
	}
	q.processing++
	q.wakeOne() // pass the wakeup on if more items wait
	if q.metrics != nil {
		q.metrics.get(item)
	}
	return item, false
}

// Done marks item as done processing. If it was added while being processed,
// it is queued again. Done for an item that is not being processed does
// nothing; client-go would queue such an item a second time.
func (q *Typed[T]) Done(item T) {
	hash := hashItem(q.seed, item)
	q.mu.Lock()
	defer q.mu.Unlock()
	slot, id := q.lookup(item, hash)
	if slot == nil || !q.isProcessing(slot.rec) {
		return
	}
	if slot.rec&recordDirty != 0 {
		slot.rec = q.push(item)
	} else {
		q.removeSlot(hash, id)
	}
	q.processing--
	if q.metrics != nil {
		q.metrics.done(item)
	}
	if q.drainWaiters > 0 && q.processing == 0 && q.queued() == 0 {
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
	q.wakeups = 0 // every sleeper wakes
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
	q.wakeups = 0 // every sleeper wakes
	q.itemReady.Broadcast()
	q.drainWaiters++
	for !q.drainReleased && (q.processing > 0 || q.queued() > 0) {
		q.drained.Wait()
	}
	q.drainWaiters--
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
