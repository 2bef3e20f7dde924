package workqueue

import (
	"hash/maphash"
	"math/bits"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

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

// DefaultQueue returns first-in, first-out storage: a ring buffer that
// grows and shrinks with its contents. Pop on an empty DefaultQueue returns
// the zero value. The result is not safe for concurrent use on its own. A
// queue whose config names an empty DefaultQueue, or none, uses its own
// first-in, first-out storage instead, whose two ends [Typed] can lock
// apart.
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
// whose ticket is below Typed.handedOut has been handed out, so Get needs
// neither the item's record nor its shard's lock to mark it. With custom
// storage there are no tickets and Get sets recordProcessing instead.
type itemRecord uint64

const (
	// recordDirty: added again while processing; Done queues it again.
	recordDirty itemRecord = 1 << iota
	// recordProcessing: handed out, with custom storage only.
	recordProcessing
	recordTicketShift = iota
)

// recordPushing is the record of an item that an Add of a sharded queue has
// filed but not yet pushed; see Typed.addUnnested. Its ticket is above any
// that Get hands out, so the item counts as queued: nothing is to be done
// for an Add of it, and a Done of it does nothing.
const recordPushing = ^itemRecord(0) &^ (recordDirty | recordProcessing)

// Typed is a work queue; see the package documentation for its guarantees.
// Create one with [NewTyped] or [NewTypedWithConfig]; the zero value is not
// usable. All methods are safe for concurrent use.
//
// The records of the items are spread over shards by hash. A queue starts
// with mu guarding the shards too, so that a caller takes one lock per
// call. Once callers have found mu held by another caller often enough,
// the queue is sharded for good: each shard is then under its own lock,
// Add pushes into the default storage under tailMu, and Get claims the next
// item's ticket with a compare-and-swap on handedOut, taking mu only to
// sleep when nothing is queued (or to record metrics). The lookups, which
// miss the processor's caches when many items are queued, then run outside
// the locks that every caller shares, two callers collide on a shard only
// when their items hash to it, and adders and getters do not wait for each
// other. Locks are taken in this order: a
// shard's, mu, tailMu.
type Typed[T comparable] struct {
	// The fields are grouped by who writes them, each group on cache lines
	// of its own, so that an adder on one core and a getter on another do
	// not take the lines the other writes away for fields they only read.
	// First the ones set at construction or written seldom.

	// fifo is the storage unless custom is set.
	fifo *fifo[T]
	// custom is storage given in the config, or nil.
	custom Queue[T]

	// shards hold a record for every item that is queued or being
	// processed. Invariant: an item is in storage if and only if it has a
	// record and is not processing, except while its record is pushing (see
	// addUnnested); an item that Get has handed out has its ticket in its
	// record; the number of processing records is handedOut - finished,
	// except between a Done's removal of a record and its count.
	shards []queueShard[T]
	// shardShift turns a 64-bit hash into a shard number: its top bits.
	shardShift uint8
	seed       maphash.Seed

	// metrics is nil when the queue records no metrics.
	metrics *queueMetrics[T]

	shuttingDown atomic.Bool
	// drainReleased is set by ShutDown: no ShutDownWithDrain waits after it.
	drainReleased bool
	drainWaiters  atomic.Int32
	// sharded is set, never cleared, when the shards' locks start to guard
	// the records; before, mu does. contended counts the callers that found
	// mu held while the queue was not sharded.
	sharded   atomic.Bool
	contended atomic.Int32

	// sleepingGets counts the Get callers waiting on itemReady, and wakeups
	// the signals sent to them that no woken caller has taken up yet. One
	// wakeup at a time is enough: a woken caller that takes an item passes
	// the signal on if more items wait, and callers already awake take
	// items without sleeping, so a burst does not wake every worker. Both
	// counts change under mu; pushes under tailMu read them without it
	// (wakeAfterPush).
	sleepingGets, wakeups atomic.Int32

	// filedHook and emptyHook are for tests: addUnnested runs filedHook
	// between filing its record and the push, and Get runs emptyHook under
	// mu when it has found the queue empty, before it counts itself among
	// the sleepers.
	filedHook, emptyHook func()

	_ [cacheLinePad]byte

	// Written by Get.

	// mu guards the wakeup and drain fields, the metrics, the writes to
	// shuttingDown (with tailMu), and, until the queue is sharded, the
	// default storage, pushed and handedOut; always the custom storage.
	mu sync.Mutex
	// itemReady wakes Get callers: storage gained an item or shutdown
	// began.
	itemReady sync.Cond
	// drained wakes ShutDownWithDrain callers: the queue may have become
	// idle, or ShutDown released them.
	drained sync.Cond
	// handedOut counts the items Get has handed out, and finished the ones
	// Done has marked done; the difference is the number being processed.
	// With the default storage handedOut is also the first ticket not yet
	// handed out. Until the queue is sharded they are counted under mu with
	// plain increments: an atomic one costs as much as a lock. Once it is,
	// both are read under a shard's lock, without mu, and counted
	// atomically, handedOut by Get's compare-and-swap (claim); Done counts
	// without mu, then wakes drain waiters if there are any: both sides use
	// atomics, so one of them sees the other. Reads are atomic in both
	// forms.
	_         alignAtomic64
	handedOut uint64
	// seenPushed is a value of pushed that a Get read; see pushedPast.
	seenPushed atomic.Uint64

	_ [cacheLinePad]byte

	// Written by Done.

	_        alignAtomic64
	finished uint64

	_ [cacheLinePad]byte

	// Written by Add.

	// tailMu guards the pushes into fifo once the queue is sharded.
	tailMu sync.Mutex
	// pushed counts the pushes into fifo: the next ticket. Once the queue
	// is sharded it is stored atomically after each push, which publishes
	// the pushed item to Get.
	_      alignAtomic64
	pushed uint64

	_ [cacheLinePad]byte
}

// alignAtomic64 placed before a uint64 field aligns it to 8 bytes, as the
// 64-bit functions of sync/atomic need on 32-bit platforms: the field
// cannot be an atomic.Uint64, which has no plain increment.
type alignAtomic64 [0]atomic.Uint64

// cacheLinePad keeps two groups of fields apart: two cache lines, because
// processors fetch lines in adjacent pairs.
const cacheLinePad = 128

// queueShard holds the records of the items whose hashes pick it. Each
// slot holds an item and its record, and index finds an item's slot by the
// item's hash: one hash per Add or Done where a Go map would hash twice
// (lookup, then insert or delete). Freed slots are cleared, so no item is
// kept alive, chained into a free list through their records, and reused.
type queueShard[T comparable] struct {
	queueShardFields[T]
	// Keeps two shards' locks off one cache line, so that callers on
	// different shards do not slow each other down. The fields' size does
	// not depend on T: they hold slices and numbers.
	_ [cacheLinePad - unsafe.Sizeof(queueShardFields[int]{})]byte
}

type queueShardFields[T comparable] struct {
	mu    sync.Mutex
	slots slotChunks[queueSlot[T]]
	// freePlus1 is the id plus one of the first free slot, 0 if none; a
	// free slot's rec holds the next one the same way, so freeing and
	// reusing a slot touch nothing but the slot.
	freePlus1 int32
	index     slotIndex
}

// queueSlot is where a shard keeps an item and its record. The record is
// written under the shard's lock, except by an Add that pushes the item
// (see Typed.push): it is read with record().
type queueSlot[T comparable] struct {
	item T
	_    alignAtomic64
	rec  itemRecord
}

// record returns the slot's record. The caller holds the records' lock.
func (s *queueSlot[T]) record() itemRecord {
	return itemRecord(atomic.LoadUint64((*uint64)(&s.rec)))
}

// shardAfterContention is how many times callers find mu held before a
// queue is sharded: a queue used by one goroutine at a time, or seldom by
// two at once, keeps one lock per call; under steady contention the
// threshold is reached within microseconds.
const shardAfterContention = 64

// maxQueueShards bounds the shards of a queue: 128 bytes each.
const maxQueueShards = 64

// queueShardCount returns how many shards a queue with default storage gets:
// enough that two of the running goroutines seldom pick the same one.
func queueShardCount() int {
	n := 1
	for n < 16*runtime.GOMAXPROCS(0) && n < maxQueueShards {
		n *= 2
	}
	return n
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
	if r, isRing := config.Queue.(*ring[T]); config.Queue == nil || isRing && r.Len() == 0 {
		q.fifo = newFIFO[T]()
	} else {
		q.custom = config.Queue
	}
	shards := 1 // Get with custom storage marks records: it holds the shard
	if q.custom == nil {
		shards = queueShardCount()
	} else {
		q.sharded.Store(true) // and only in its sharded form
	}
	q.shards = make([]queueShard[T], shards)
	q.shardShift = uint8(64 - bits.TrailingZeros(uint(shards)))
	// The lock Get sleeps with is the one it holds: mu, and with custom
	// storage also the one shard, whose record of the item Get marks.
	q.itemReady.L = &q.mu
	if q.custom != nil {
		q.itemReady.L = lockPair{&q.shards[0].mu, &q.mu}
	}
	q.drained.L = &q.mu
	q.metrics = newQueueMetrics[T](config.MetricsProvider, config.Name, config.Clock, &q.mu)
	return q
}

// lockPair locks first, then second.
type lockPair struct{ first, second *sync.Mutex }

func (l lockPair) Lock()   { l.first.Lock(); l.second.Lock() }
func (l lockPair) Unlock() { l.second.Unlock(); l.first.Unlock() }

// lockMu locks mu, counting the callers that find it held while the queue
// is not sharded, and shards the queue when there have been enough.
func (q *Typed[T]) lockMu() {
	if q.mu.TryLock() {
		return
	}
	if !q.sharded.Load() && q.contended.Add(1) == shardAfterContention {
		q.shard()
	}
	q.mu.Lock()
}

// shard makes each shard's lock guard its records from now on. It waits
// for every caller that holds a lock, and must not be called with one held.
func (q *Typed[T]) shard() {
	for i := range q.shards {
		q.shards[i].mu.Lock()
	}
	q.mu.Lock()
	q.sharded.Store(true)
	q.mu.Unlock()
	for i := range q.shards {
		q.shards[i].mu.Unlock()
	}
}

// lockRecords locks what guards the records of shard s: mu until the queue
// is sharded, the shard's lock after. It reports whether it locked mu.
func (q *Typed[T]) lockRecords(s *queueShard[T]) (mu bool) {
	if !q.sharded.Load() {
		q.lockMu()
		if !q.sharded.Load() {
			return true
		}
		q.mu.Unlock()
	}
	s.mu.Lock()
	return false
}

// lockLookup locks the records of shard s, as lockRecords does, and looks
// item up.
func (q *Typed[T]) lockLookup(s *queueShard[T], item T, hash uint32) (holdsMu bool, slot *queueSlot[T], id int32) {
	holdsMu = q.lockRecords(s)
	slot, id = s.lookup(item, hash)
	return holdsMu, slot, id
}

// unlockRecords undoes lockRecords, which returned mu.
func (q *Typed[T]) unlockRecords(s *queueShard[T], mu bool) {
	if mu {
		q.mu.Unlock()
	} else {
		s.mu.Unlock()
	}
}

// itemShard returns the shard of item and the hash it is filed under there.
// It reads nothing that changes, so callers hash before they lock.
func (q *Typed[T]) itemShard(item T) (*queueShard[T], uint32) {
	sum := maphash.Comparable(q.seed, item)
	// The index uses the low 32 bits; the shard number comes from the
	// others, so each shard's index still sees evenly spread hashes.
	return &q.shards[sum>>q.shardShift], uint32(sum)
}

// lookup returns the slot of item, whose hash is hash, if the shard holds
// item.
func (s *queueShard[T]) lookup(item T, hash uint32) (slot *queueSlot[T], id int32) {
	// The walk of index.find, with the item comparison inline: this is the
	// hottest loop of the queue, and a callback per entry costs.
	entries, start := s.index.run(hash)
	mask := uint32(len(entries) - 1)
	for i := start; entries != nil; i = (i + 1) & mask {
		e := entries[i]
		if e.slotPlus1 == 0 {
			break
		}
		if e.hash == hash {
			if slot := s.slots.at(int(e.slotPlus1 - 1)); slot.item == item {
				return slot, e.slotPlus1 - 1
			}
		}
	}
	return nil, -1
}

// addSlot files a new slot for item and returns it and its id.
func (s *queueShard[T]) addSlot(item T, hash uint32) (*queueSlot[T], int32) {
	var id int32
	if s.freePlus1 > 0 {
		id = s.freePlus1 - 1
		s.freePlus1 = int32(s.slots.at(int(id)).rec)
	} else {
		id = int32(s.slots.grow())
	}
	s.index.insert(hash, id)
	slot := s.slots.at(int(id))
	slot.item = item
	return slot, id
}

// removeSlot forgets the item in slot id, filed under hash.
func (s *queueShard[T]) removeSlot(hash uint32, id int32) {
	s.index.remove(hash, id)
	// Cleared, so that the garbage collector can have the item.
	*s.slots.at(int(id)) = queueSlot[T]{rec: itemRecord(s.freePlus1)}
	s.freePlus1 = id + 1
}

// isProcessing reports whether the item with record rec has been handed out
// and not yet marked done. The caller holds the lock of the item's shard.
func (q *Typed[T]) isProcessing(rec itemRecord) bool {
	if q.custom != nil {
		return rec&recordProcessing != 0
	}
	return uint64(rec>>recordTicketShift) < atomic.LoadUint64(&q.handedOut)
}

// push stores item, whose record is in slot, and gives it a new record:
// queued, not dirty. The caller then wakes a Get caller (unlockPush, or
// wakeOne under mu). The caller holds mu, or tailMu if the queue is
// sharded and has default storage; it holds the records' lock of the item
// too, except in addUnnested.
func (q *Typed[T]) push(item T, slot *queueSlot[T]) {
	if q.custom != nil {
		q.custom.Push(item)
		slot.rec = 0
		return
	}
	q.fifo.push(item)
	rec := itemRecord(q.pushed << recordTicketShift)
	if q.sharded.Load() {
		// The record first: a Get may take the item as soon as pushed
		// says it is there, and a Done of it must find its ticket.
		atomic.StoreUint64((*uint64)(&slot.rec), uint64(rec))
		atomic.StoreUint64(&q.pushed, q.pushed+1)
	} else {
		slot.rec = rec
		q.pushed++
	}
}

// wakeOne wakes a sleeping Get caller if items wait and no wakeup is under
// way already. The caller holds mu.
func (q *Typed[T]) wakeOne() {
	if q.wakeups.Load() == 0 && q.sleepingGets.Load() > 0 && q.anyQueued() {
		q.wakeups.Add(1)
		q.itemReady.Signal()
	}
}

// wakeAfterPush is wakeOne for a caller that pushed under tailMu and holds
// no lock now. It takes mu only when a Get caller sleeps and no wakeup is
// under way. Pushes publish pushed before they read sleepingGets, and Get
// callers count themselves in sleepingGets before they read pushed, so
// either the caller sees the sleeper or the sleeper sees the item.
func (q *Typed[T]) wakeAfterPush() {
	if q.sleepingGets.Load() > 0 && q.wakeups.Load() == 0 {
		q.mu.Lock()
		q.wakeOne()
		q.mu.Unlock()
	}
}

// idle reports whether no item is queued or being processed. The caller
// holds mu.
func (q *Typed[T]) idle() bool {
	return q.queued() == 0 && atomic.LoadUint64(&q.handedOut) == atomic.LoadUint64(&q.finished)
}

// anyQueued reports whether an item is queued. The caller holds mu.
func (q *Typed[T]) anyQueued() bool {
	if q.custom != nil {
		return q.custom.Len() > 0
	}
	return q.pushedPast(atomic.LoadUint64(&q.handedOut))
}

// pushedPast reports whether the item with ticket has been pushed. It reads
// pushed, which every push writes, only when seenPushed, on the line that
// Get callers write anyway, is not past ticket: while items wait, Get
// callers do not take the line the adders write.
func (q *Typed[T]) pushedPast(ticket uint64) bool {
	if !q.sharded.Load() {
		// The caller holds mu, which guards pushed until the queue is
		// sharded; storing seenPushed would cost more than it saves.
		return ticket < q.pushed
	}
	if ticket < q.seenPushed.Load() {
		return true
	}
	pushed := atomic.LoadUint64(&q.pushed)
	if ticket >= pushed {
		return false
	}
	// Another caller may store an older value over this one: that costs
	// a read of pushed, and seenPushed never passes pushed.
	q.seenPushed.Store(pushed)
	return true
}

func (q *Typed[T]) queued() int {
	if q.custom != nil {
		return q.custom.Len()
	}
	// handedOut first: it never passes pushed.
	handedOut := atomic.LoadUint64(&q.handedOut)
	return int(atomic.LoadUint64(&q.pushed) - handedOut)
}

// Add marks item as needing processing. An item that is already queued is
// not queued again (custom storage is told through Touch); an item that is
// being processed is queued again when it is marked done. After a shutdown
// has begun, Add does nothing.
func (q *Typed[T]) Add(item T) {
	if q.shuttingDown.Load() {
		return
	}
	s, hash := q.itemShard(item)
	holdsMu, slot, _ := q.lockLookup(s, item, hash)
	if slot == nil && !holdsMu && q.custom == nil {
		q.addUnnested(s, item, hash)
		return
	}
	q.add(s, slot, item, hash, holdsMu)
	q.unlockRecords(s, holdsMu)
}

// add is Add with the records of s locked and slot, item's slot or nil,
// looked up; holdsMu tells whether that lock is mu.
func (q *Typed[T]) add(s *queueShard[T], slot *queueSlot[T], item T, hash uint32, holdsMu bool) {
	switch {
	case slot == nil:
		// lockPush's work, written out: this is the hot path of a queue
		// that is not sharded, and going through lockPush and unlockPush
		// made the Add/Get/Done cycle 2-3 ns slower.
		if !holdsMu {
			q.mu.Lock()
		}
		// Checked again under mu: once ShutDownWithDrain has seen the
		// queue idle, nothing may be queued.
		if q.shuttingDown.Load() {
			if !holdsMu {
				q.mu.Unlock()
			}
			return
		}
		slot, _ = s.addSlot(item, hash)
		q.push(item, slot)
		q.wakeOne()
		if q.metrics != nil {
			q.metrics.add(item)
		}
		if !holdsMu {
			q.mu.Unlock()
		}
	case !q.isProcessing(slot.record()):
		if q.custom != nil { // custom storage comes sharded: mu is free
			q.mu.Lock()
			q.custom.Touch(item)
			q.mu.Unlock()
		}
	case slot.record()&recordDirty == 0:
		slot.rec |= recordDirty
		if q.metrics != nil {
			if !holdsMu {
				q.mu.Lock()
			}
			q.metrics.add(item)
			if !holdsMu {
				q.mu.Unlock()
			}
		}
	}
}

// addUnnested files item, which shard s has no record of, as pushing,
// releases the shard's lock and pushes item under tailMu (lockPush), which
// writes the item's ticket into its record before Get can take the item.
// Waiting for tailMu with the shard's lock held would make every caller on
// the shard wait for the other adders too. Meanwhile the record stays
// where it was filed (slotChunks never moves a slot), and an Add or Done of
// the item finds it queued: nothing for either to do.
func (q *Typed[T]) addUnnested(s *queueShard[T], item T, hash uint32) {
	slot, id := s.addSlot(item, hash)
	slot.rec = recordPushing
	s.mu.Unlock()
	if q.filedHook != nil {
		q.filedHook()
	}

	q.lockPush(false)
	// Checked again under tailMu: once ShutDownWithDrain has seen the
	// queue idle, nothing may be queued.
	dropped := q.shuttingDown.Load()
	if !dropped {
		q.push(item, slot)
		if q.metrics != nil {
			q.metrics.add(item)
		}
	}
	q.unlockPush(false)

	if dropped {
		s.mu.Lock()
		s.removeSlot(hash, id)
		s.mu.Unlock()
	}
}

// lockPush locks, besides what the caller holds, what a push needs: mu,
// unless the caller holds it; in a sharded queue with default storage
// tailMu instead, and mu too if the queue records metrics, which mu
// guards. holdsMu tells whether the caller holds mu.
func (q *Typed[T]) lockPush(holdsMu bool) {
	switch {
	case holdsMu:
	case q.custom != nil:
		q.mu.Lock()
	default:
		if q.metrics != nil {
			q.mu.Lock()
		}
		q.tailMu.Lock()
	}
}

// unlockPush undoes lockPush and wakes a Get caller if one should take
// what was pushed.
func (q *Typed[T]) unlockPush(holdsMu bool) {
	switch {
	case holdsMu:
		q.wakeOne()
	case q.custom != nil:
		q.wakeOne()
		q.mu.Unlock()
	case q.metrics != nil:
		q.tailMu.Unlock()
		q.wakeOne()
		q.mu.Unlock()
	default:
		q.tailMu.Unlock()
		q.wakeAfterPush()
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
	// A sharded queue hands out queued items without mu: callers claim
	// tickets with a compare-and-swap. Metrics are recorded under mu.
	if q.custom == nil && q.metrics == nil && q.sharded.Load() {
		if item, ok := q.claim(); ok {
			return item, false
		}
	}
	if q.custom != nil {
		q.shards[0].mu.Lock()
		defer q.shards[0].mu.Unlock()
	}
	q.lockMu()
	defer q.mu.Unlock()
	for {
		if item, ok := q.takeLocked(); ok {
			q.wakeOne() // pass the wakeup on if more items wait
			if q.metrics != nil {
				q.metrics.get(item)
			}
			return item, false
		}
		if q.shuttingDown.Load() {
			return item, true
		}
		if q.emptyHook != nil {
			q.emptyHook()
		}
		q.sleepingGets.Add(1)
		// Checked again after counting in: a push under tailMu may have
		// come in and missed the count (see wakeAfterPush).
		if !q.anyQueued() {
			q.itemReady.Wait()
			if q.wakeups.Load() > 0 {
				q.wakeups.Add(-1)
			}
		}
		q.sleepingGets.Add(-1)
	}
}

// takeLocked hands out the next queued item, if there is one. The caller
// holds mu, and with custom storage the one shard's lock too.
func (q *Typed[T]) takeLocked() (item T, ok bool) {
	switch {
	case q.custom != nil: // always sharded
		if q.custom.Len() == 0 {
			return item, false
		}
		item = q.custom.Pop()
		s, hash := q.itemShard(item)
		slot, _ := s.lookup(item, hash)
		slot.rec |= recordProcessing
		atomic.AddUint64(&q.handedOut, 1)
	case q.sharded.Load():
		return q.claim()
	default:
		if !q.anyQueued() {
			return item, false
		}
		item = q.fifo.pop()
		q.handedOut++
	}
	return item, true
}

// claim hands out the next queued item of a sharded queue with default
// storage, if there is one, without a lock: the caller that moves
// handedOut past a ticket takes that ticket's item.
func (q *Typed[T]) claim() (item T, ok bool) {
	for {
		// Loaded before the ticket is claimed; see fifo.take.
		head := q.fifo.head.Load()
		ticket := atomic.LoadUint64(&q.handedOut)
		if !q.pushedPast(ticket) {
			return item, false
		}
		if atomic.CompareAndSwapUint64(&q.handedOut, ticket, ticket+1) {
			return q.fifo.take(head, ticket), true
		}
	}
}

// Done marks item as done processing. If it was added while being processed,
// it is queued again. Done for an item that is not being processed does
// nothing; client-go would queue such an item a second time.
func (q *Typed[T]) Done(item T) {
	s, hash := q.itemShard(item)
	holdsMu, slot, id := q.lockLookup(s, item, hash)
	q.done(s, slot, id, item, hash, holdsMu)
	q.unlockRecords(s, holdsMu)
}

// done is Done with the records of s locked and slot, item's slot (id) or
// nil, looked up; holdsMu tells whether that lock is mu.
func (q *Typed[T]) done(s *queueShard[T], slot *queueSlot[T], id int32, item T, hash uint32, holdsMu bool) {
	if slot == nil || !q.isProcessing(slot.record()) {
		return
	}
	if slot.record()&recordDirty != 0 {
		q.requeue(slot, item, holdsMu)
		return
	}
	if !holdsMu && q.metrics != nil {
		q.mu.Lock()
		defer q.mu.Unlock()
		holdsMu = true
	}
	s.removeSlot(hash, id)
	if q.metrics != nil {
		q.metrics.done(item)
	}
	if q.countFinished() == atomic.LoadUint64(&q.handedOut) && q.drainWaiters.Load() > 0 {
		if !holdsMu {
			q.mu.Lock()
			defer q.mu.Unlock()
		}
		if q.idle() {
			q.drained.Broadcast()
		}
	}
}

// requeue queues item, which was added again while being processed and
// whose record is in slot, and counts it finished. holdsMu tells whether
// the caller holds mu.
func (q *Typed[T]) requeue(slot *queueSlot[T], item T, holdsMu bool) {
	q.lockPush(holdsMu)
	defer q.unlockPush(holdsMu)
	q.push(item, slot)
	q.countFinished()
	if q.metrics != nil {
		q.metrics.done(item)
	}
}

// countFinished counts an item marked done and returns the count. The
// caller holds the records' lock of the item, and mu if the queue is not
// sharded.
func (q *Typed[T]) countFinished() uint64 {
	if q.sharded.Load() {
		return atomic.AddUint64(&q.finished, 1)
	}
	q.finished++
	return q.finished
}

// ShutDown makes the queue ignore further adds, wakes every Get caller
// (which then drain what is queued and return shutdown true), releases every
// ShutDownWithDrain caller, and stops the metrics goroutine. It returns when
// that goroutine has exited. Calling it again does nothing.
func (q *Typed[T]) ShutDown() {
	q.mu.Lock()
	q.stopAdds()
	q.drainReleased = true
	q.wakeups.Store(0) // every sleeper wakes
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
	q.stopAdds()
	q.wakeups.Store(0) // every sleeper wakes
	q.itemReady.Broadcast()
	q.drainWaiters.Add(1)
	for !q.drainReleased && !q.idle() {
		q.drained.Wait()
	}
	q.drainWaiters.Add(-1)
	q.mu.Unlock()
	q.stopMetrics()
}

// stopAdds makes Add ignore items from now on. The caller holds mu; pushes
// check the flag under mu or tailMu, so none is under way when it returns.
func (q *Typed[T]) stopAdds() {
	q.tailMu.Lock()
	q.shuttingDown.Store(true)
	q.tailMu.Unlock()
}

// ShuttingDown reports whether ShutDown or ShutDownWithDrain has been
// called.
func (q *Typed[T]) ShuttingDown() bool {
	return q.shuttingDown.Load()
}

func (q *Typed[T]) stopMetrics() {
	if q.metrics != nil {
		q.metrics.stop()
	}
}
