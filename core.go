package workqueue

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-workqueue/workqueue/internal/lock"
	"github.com/go-workqueue/workqueue/internal/table"
	"k8s.io/utils/clock"
)

// ErrShutDown is returned by GetContext once a shutdown has left no item.
var ErrShutDown = errors.New("workqueue: queue is shut down")

// pending is what an item that the queue holds waits for, apart from the end
// of its processing.
type pending uint8

const (
	// pendingNone: nothing; the item is being processed and leaves the
	// queue at Done.
	pendingNone pending = iota
	// pendingReady: to be handed out: queued, or, while being processed,
	// queued again by Done.
	pendingReady
	// pendingDelay: the end of its delay, in the core's delays: a priority
	// queue's delayed add, or the backoff of an item woken from its park.
	pendingDelay
	// pendingParked: an event, in the core's parking; while the item is
	// processed, its park takes effect at Done.
	pendingParked
)

// record is what the core knows of an item it holds.
//
// Invariant (verifyCore checks it): processing or pending is not
// pendingNone; an item is in the hand-out order if and only if it is not
// processing and pending is pendingReady; it is in the delays' heap if and
// only if pending is pendingDelay, and in the parking if and only if
// pending is pendingParked.
type record struct {
	processing bool
	pending    pending
}

// handOutOrder is the one thing in which the queues differ: the order in
// which the core hands out its queued items. The core calls it with its
// lock held; it refers to items by their id in the core's item table.
type handOutOrder interface {
	// queue puts id, whose record becomes queued, in the order. If it
	// panics (custom storage's Push), it leaves the order as it was, and
	// the core, which calls it before it changes anything else, leaves a
	// held item as it was (parked, say); Typed takes back a record filed
	// for the add.
	queue(id int32)
	// next removes and returns the id to hand out next; at least one is
	// queued.
	next() int32
	// unqueue takes the queued id out of the order.
	unqueue(id int32)
	// first returns at most n queued ids in the order next would return
	// them, without changing anything; nil if the order cannot tell.
	first(n int) []int32
	// empty tells the order that the table holds no item any more and has
	// let go of the memory a burst made it grow, so that the order can let
	// go of its arrays indexed by id.
	empty()
}

// groupedOrder is a hand-out order that passes over the items of groups
// without a free slot; the core tells it when a group's slots fill up or
// one frees.
type groupedOrder interface {
	block(g *group)
	unblock(g *group)
}

// core is the engine under every queue of this package: the lock, the item
// table with each item's record, the Get callers asleep and their wakeups,
// shutdown and drain, the items in flight and the metrics. A queue is a
// core with a hand-out order, and its own add rules on top.
type core[T comparable] struct {
	mu lock.Mutex
	// The fields every Get, Add and Done reads and writes sit beside the
	// lock, so that a hand-off between cores moves fewer cache lines.
	queued     int // items in the order
	processing int // items handed out and not yet done
	// slotWaits counts the queued items that wait for a free slot of
	// their group: Get hands out only the others.
	slotWaits int
	// sleepers are the Get callers asleep and not yet woken, and
	// wakeupsPending counts those woken and not yet running. A push wakes
	// a sleeper only when more items are queued than wakeups are pending,
	// so a burst does not wake more workers than it has items for.
	sleepers       lock.Line
	wakeupsPending int

	// drained wakes ShutDownWithDrain callers: the queue became idle, or a
	// ShutDown released them.
	drained sync.Cond

	// items holds a record of every item the queue holds: queued, being
	// processed, waiting for a delay in the core's delays, or parked.
	items table.Table[T, record]
	order handOutOrder
	// fifo is order when that is the plain FIFO, which Add and Get then
	// call directly: an interface call is not inlined.
	fifo *fifoOrder
	// unguarded is set when Add, Get and Done call no user code with mu
	// held: the order is the plain FIFO (no custom storage, no group
	// limits), there is no metrics provider (so no metrics and no
	// tracing) and the clock is the real one; Get calls its context only
	// with mu released. They then unlock mu themselves instead of
	// deferring it, since only user code could panic with mu held, and a
	// deferred unlock is a call, about a fiftieth of the cycle's
	// instructions. Otherwise they defer it, so that a panic in the user's
	// code leaves the queue unlocked.
	unguarded bool
	// groups and grouped are nil unless the queue has group limits, and
	// groupMetrics unless it also records their metrics.
	groups       *groupSet[T]
	grouped      groupedOrder
	groupMetrics *groupMetrics

	drainWaiters int
	// drainReleased is set by ShutDown: no ShutDownWithDrain waits after it.
	drainReleased bool
	// shuttingDown is written under mu; ShuttingDown reads it without.
	shuttingDown atomic.Bool

	// metrics is nil when the queue records no metrics. The provider's
	// metrics are user code called under mu: the depth gauge's Inc and
	// Dec must reach it in the order the queue changed, or it could go
	// below zero, and Prometheus' own metrics are atomics that do not
	// block. The rate limiters, which may, are called outside mu.
	metrics *queueMetrics[T]
	// provider and name are the config's, for MetricsConfig.
	provider MetricsProvider
	name     string
	clock    clock.WithTicker
	logger   *slog.Logger

	// delays holds the items waiting for a delay to end, and a delaying
	// queue's delayed adds, and runs the goroutine that ends delays and
	// parks. A priority queue makes it at once; a Typed queue when a
	// delaying queue is set over it, or at its first Park. It is nil until
	// then.
	delays *delayer[delayKey[T]]
	// addDelayed is the add of a delayed add that ended; nil until a
	// delaying queue is set over the core.
	addDelayed func(item T)
	// onReady counts an item that became ready at the end of its delay or
	// park; nil means countAdd.
	onReady func(item T, id int32)
	// parking holds the parked items; nil until the first Park or Wake.
	parking        *parking
	parkingMetrics *parkingMetrics
	maxPark        time.Duration
	// dropped counts the items waiting for a delay or an event that the
	// shutdown dropped, for the log line the shutdown writes.
	droppedDelayed, droppedParked int
	// adds counts the adds that made an item ready, for Snapshot.
	adds uint64
	// flight lists the items being processed, by hand-out time, once a
	// Snapshot or the metrics need it.
	flight flightList
	// trace holds the links of the adds (tracing.go); nil unless the
	// provider is a linker.
	trace *traceState[T]
}

// init sets up a core that hands out items in order; start starts its
// goroutines once the queue around it is set up. The core must not be
// copied afterwards.
func (c *core[T]) init(order handOutOrder, provider MetricsProvider, name string, clk clock.WithTicker, logger *slog.Logger, maxPark time.Duration) {
	c.items = table.New[T, record]()
	c.order = order
	c.fifo, _ = order.(*fifoOrder)
	_, realClock := clk.(clock.RealClock)
	c.unguarded = c.fifo != nil && provider == nil && realClock
	c.clock = clk
	c.logger = logger
	c.maxPark = maxPark
	c.provider, c.name = provider, name
	c.flight = newFlightList()
	c.drained.L = &c.mu
	warnIfNoProvider(provider, name, logger)
	c.metrics = newQueueMetrics[T](provider, name, clk, c.refreshUnfinishedWork)
	c.parkingMetrics = newParkingMetrics(provider, name)
	if c.groups != nil {
		c.groupMetrics = newGroupMetrics(provider, name)
	}
	c.flight.tracking = c.metrics != nil
	c.trace = newTraceState[T](provider)
}

// start starts the goroutines of a core set up by init and, for a queue
// that ends delays from the start, by makeDelays. A goroutine started
// before its queue is set up would read fields the constructor is still
// writing.
func (c *core[T]) start() {
	if c.delays != nil {
		c.delays.start(&c.mu, c.delayEnded, func() bool { return false }, c.logger)
	}
	if c.metrics != nil {
		c.metrics.start()
	}
}

// insertQueued files item, which the core does not hold, as queued. The
// caller holds mu and counts the add.
func (c *core[T]) insertQueued(item T, hash uint32) int32 {
	_, id := c.items.Insert(item, hash, record{pending: pendingReady})
	if c.groups != nil {
		c.queueGrouped(id)
		return id
	}
	// queueHeld written out: the add of a new item is the hot path, and
	// the call would not be inlined.
	if c.fifo != nil {
		c.fifo.queue(id)
	} else {
		c.order.queue(id)
	}
	c.queued++
	if c.sleepers.Len() > 0 { // wakeOne's first test, which saves its call when no Get sleeps
		c.wakeOne()
	}
	return id
}

// queueHeld queues the held item with id, neither processing nor queued,
// whose record the caller makes pendingReady, after this call for one that
// waited for something else. The caller holds mu.
func (c *core[T]) queueHeld(id int32) {
	if c.groups != nil {
		c.queueGrouped(id)
		return
	}
	c.order.queue(id)
	c.queued++
	c.wakeOne()
}

// queueGrouped is queueHeld on a queue with group limits.
func (c *core[T]) queueGrouped(id int32) {
	g := c.groups.attach(id, c.items.At(id).Item) // first: the order files the item under its group
	c.order.queue(id)
	c.queued++
	c.changeGroup(g, func() { g.queued++ })
	c.wakeOne()
}

// unqueue takes the queued item with id out of the order; the caller holds
// mu and changes its record.
func (c *core[T]) unqueue(id int32) {
	c.order.unqueue(id)
	c.queued--
	if c.groups != nil {
		g := c.groups.of(id)
		c.changeGroup(g, func() { g.queued-- })
		c.wakeIfShutDownEmpty()
	}
}

// handOutGrouped takes a slot of the group of id, just handed out. The
// caller holds mu.
func (c *core[T]) handOutGrouped(id int32) {
	g := c.groups.of(id)
	c.changeGroup(g, func() { g.queued--; g.inFlight++ })
	c.wakeIfShutDownEmpty()
}

// freeSlot gives back the slot of the group of id, whose processing ended,
// and wakes a sleeper if that lets it take an item. The caller holds mu.
func (c *core[T]) freeSlot(id int32) {
	g := c.groups.of(id)
	c.changeGroup(g, func() { g.inFlight-- })
	c.wakeOne()
}

// changeGroup applies update to g's counts or limit, and passes on what
// changed to the count of items waiting for a slot and to the order. The
// caller holds mu and wakes the Get callers the change lets take an item.
func (c *core[T]) changeGroup(g *group, update func()) {
	atLimit := c.groups.atLimit
	waiting, opened, closed := c.groups.change(g, update)
	c.slotWaits += waiting
	if c.groupMetrics != nil && waiting != 0 {
		c.groupMetrics.waiting.Set(float64(c.slotWaits))
		if atLimit != c.groups.atLimit {
			c.groupMetrics.atLimit.Set(float64(c.groups.atLimit))
		}
	}
	switch {
	case opened:
		c.grouped.unblock(g)
	case closed:
		c.grouped.block(g)
	}
}

// wakeIfShutDownEmpty wakes every Get caller asleep once a shutdown has
// left no item queued: with group limits, a Get sleeps during a shutdown
// while the queued items wait for a slot, and must then return. The caller
// holds mu.
func (c *core[T]) wakeIfShutDownEmpty() {
	if c.queued == 0 && c.shuttingDown.Load() {
		c.wakeAll()
	}
}

// countAdd records an add that made item ready. The caller holds mu.
func (c *core[T]) countAdd(item T) {
	c.adds++
	if c.metrics != nil {
		c.metrics.add(item)
	}
}

// release forgets the record with id, neither queued nor processing, and
// releases a drain if the queue is idle. The caller holds mu.
func (c *core[T]) release(id int32) {
	if c.groups != nil {
		c.groups.detach(id) // first: letting go of a burst's memory forgets every id's group
	}
	if c.trace != nil {
		delete(c.trace.items, id)
	}
	if c.items.Remove(id) {
		// Only a table that let go of a burst's memory can have ids whose
		// links outgrew a chunk; checking here rather than at every idle
		// moment saves the cycle an interface call.
		c.order.empty()
		c.flight.shrink()
	}
	if c.drainWaiters > 0 && c.items.Len() == 0 {
		c.drained.Broadcast()
	}
}

// wakeOne wakes a sleeping Get caller if one should take a newly queued
// item: if more items can be handed out than wakeups are pending. The
// caller holds mu.
func (c *core[T]) wakeOne() {
	if c.sleepers.Len() > 0 && c.queued-c.slotWaits > c.wakeupsPending {
		c.wakeupsPending++
		c.sleepers.WakeFirst()
	}
}

// wakeAll wakes every sleeping Get caller. The caller holds mu.
func (c *core[T]) wakeAll() {
	for c.sleepers.Len() > 0 {
		c.wakeupsPending++
		c.sleepers.WakeFirst()
	}
}

// get hands out the next item, sleeping until there is one, and returns
// it with its id; the caller holds mu, and holds it again when get returns. It
// returns ErrShutDown once a shutdown has begun and none is left, and ctx's
// error when ctx ends first.
func (c *core[T]) get(ctx context.Context) (item T, id int32, err error) {
	for c.queued == c.slotWaits {
		// With group limits, items may be queued and wait for a slot that
		// a Done frees, shutdown or not.
		if c.queued == 0 && c.shuttingDown.Load() {
			return item, -1, ErrShutDown
		}
		if err := lock.Sleep(ctx, &c.mu, &c.sleepers, &c.wakeupsPending, c.wakeOne); err != nil {
			return item, -1, err
		}
	}
	if c.fifo != nil {
		id = c.fifo.next()
	} else {
		id = c.order.next()
	}
	c.queued--
	c.processing++
	if c.groups != nil {
		c.handOutGrouped(id)
	}
	entry := c.items.At(id)
	entry.Val = record{processing: true}
	if c.parking != nil {
		c.parking.noteGet(id)
	}
	if c.trace != nil {
		c.handOutTrace(id)
	}
	if c.flight.tracking {
		// One clock reading for the in-flight list and the metrics.
		now := c.clock.Now()
		c.flight.link(id, now)
		if c.metrics != nil {
			c.metrics.get(entry.Item, now)
		}
	}
	return entry.Item, id, nil
}

// done ends the processing of item, if it is being processed: the item is
// queued again if it was added meanwhile, waits for its delay if it has
// one, and otherwise leaves the queue. The caller holds mu.
func (c *core[T]) done(item T, hash uint32) {
	entry, id := c.items.Lookup(item, hash)
	if entry == nil || !entry.Val.processing {
		return
	}
	// The order runs first, since custom storage's Push may panic: a Done
	// that panics has not happened. The metrics, user code too, run last.
	if entry.Val.pending == pendingReady {
		c.queueHeld(id)
	}
	entry.Val.processing = false // entry is still valid: queueing inserts nothing in the table
	c.processing--
	if c.trace != nil {
		c.doneTrace(id)
	}
	if c.groups != nil {
		c.freeSlot(id)
	}
	var since time.Time
	linked := false
	if c.flight.tracking { // nothing is in the list before tracking begins
		since, linked = c.flight.unlink(id)
	}
	switch entry.Val.pending {
	case pendingNone:
		c.release(id)
	case pendingParked:
		if c.parking.settle(id, c.delays.now()) {
			c.delays.poke() // the safety net's first deadline
		}
		c.countParked()
	}
	if c.metrics != nil && linked {
		c.metrics.done(since)
	}
}

// removeReady takes back the ready add of the item with id: a queued item
// leaves the queue, and an item being processed is not queued again by
// Done. The caller holds mu; the record's pending is pendingReady.
func (c *core[T]) removeReady(id int32) {
	entry := c.items.At(id)
	item := entry.Item
	entry.Val.pending = pendingNone
	if entry.Val.processing {
		c.trace.dropNext(id)
		c.uncountAdd(item)
		return
	}
	c.unqueue(id)
	c.release(id)
	c.uncountAdd(item)
}

// removeWaiting takes back what the item with id waits for, a delay or an
// event: an item not being processed leaves the queue. The caller holds
// mu.
func (c *core[T]) removeWaiting(id int32) {
	c.cancelWait(id)
	if !c.items.At(id).Val.processing {
		c.release(id)
		return
	}
	c.trace.dropNext(id)
}

// uncountAdd tells the metrics that an add was taken back before Get.
func (c *core[T]) uncountAdd(item T) {
	if c.metrics != nil {
		c.metrics.remove(item)
	}
}

// stopAddsLocked is the instant at which a shutdown begins: from then on
// every add is ignored, and every sleeping Get caller is woken. The caller
// holds mu.
func (c *core[T]) stopAddsLocked() {
	if !c.shuttingDown.Load() {
		c.dropWaiting()
	}
	c.shuttingDown.Store(true)
	c.wakeAll()
}

// doneItem is Done, which the queues share.
func (c *core[T]) doneItem(item T) {
	hash := c.items.Hash(item)
	if !c.mu.TryLock() { // Lock written out: the call would not be inlined
		c.mu.LockSlow()
	}
	if c.unguarded {
		c.done(item, hash)
		c.mu.Unlock()
		return
	}
	defer c.mu.Unlock()
	c.done(item, hash)
}

// setGroupLimit is SetGroupLimit, which the queues share.
func (c *core[T]) setGroupLimit(name string, limit int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.groups == nil || name == "" {
		return
	}
	limit = max(limit, 0)
	c.groups.limits[name] = limit
	if g := c.groups.byName[name]; g != nil {
		c.changeGroup(g, func() { g.limit = limit })
		for c.sleepers.Len() > 0 && c.queued-c.slotWaits > c.wakeupsPending {
			c.wakeOne()
		}
	}
}

// length is Len, which the queues share.
func (c *core[T]) length() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.queued
}

// releaseDrains is ShutDown's part under mu: the shutdown begins, and every
// ShutDownWithDrain caller is released.
func (c *core[T]) releaseDrains() {
	c.stopAddsLocked()
	c.drainReleased = true
	c.drained.Broadcast()
}

// drain waits, with mu held and released while it sleeps, until no item is
// held or a ShutDown releases it.
func (c *core[T]) drain() {
	c.drainWaiters++
	for !c.drainReleased && c.items.Len() > 0 {
		c.drained.Wait()
	}
	c.drainWaiters--
}

// stopMetrics stops the metrics goroutine and waits for it to exit.
func (c *core[T]) stopMetrics() {
	if c.metrics != nil {
		c.metrics.stop()
	}
}

// refreshUnfinishedWork sets the unfinished-work gauges from the items in
// flight; the metrics goroutine calls it periodically.
func (c *core[T]) refreshUnfinishedWork() {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock.Now()
	var total, oldest float64
	for id := c.flight.list.Head(); id >= 0; id = c.flight.links.Next(id) {
		age := now.Sub(c.flight.since(id)).Seconds()
		total += age
		oldest = max(oldest, age)
	}
	c.metrics.unfinishedWorkSeconds.Set(total)
	c.metrics.longestRunningProcessor.Set(oldest)
}

// snapshotLocked is the core's part of a Snapshot: the counts, the first
// n queued items and the n longest in flight. The caller holds mu. From
// the first Snapshot on, the core tracks the items in flight.
func (c *core[T]) snapshotLocked(n int) Snapshot[T] {
	c.flight.tracking = true
	s := Snapshot[T]{
		Taken:        c.clock.Now(),
		ShuttingDown: c.shuttingDown.Load(),
		Depth:        c.queued,
		Processing:   c.processing,
		Adds:         c.adds,
	}
	if c.groups != nil {
		s.WaitingForSlot = c.slotWaits
		s.GroupCount, s.Groups = c.groups.states(n)
	}
	if n > 0 {
		for _, id := range c.order.first(n) {
			s.Queued = append(s.Queued, c.items.At(id).Item)
		}
	}
	for id := c.flight.list.Head(); id >= 0 && len(s.InFlight) < n; id = c.flight.links.Next(id) {
		entry := c.items.At(id)
		s.InFlight = append(s.InFlight, InFlightItem[T]{Item: entry.Item, Since: c.flight.since(id), Requeue: entry.Val.pending == pendingReady})
	}
	if c.delays != nil {
		s.Waiting, s.Delayed = snapshotDelays(c.delays, n, func(k delayKey[T]) T { return k.item })
	}
	if c.parking != nil {
		s.Parked, s.ParkedItems = c.snapshotParked(n)
	}
	return s
}

// delayKey names what waits in the core's delays: the item's own delay,
// which its record says (pendingDelay), or, with added set, an add that a
// delaying queue holds back (AddAfter), which adds the item when its delay
// ends whatever its record says, as client-go's delaying queue does. An
// item may wait for both at once, each with its own ready time.
type delayKey[T comparable] struct {
	item  T
	added bool
}

// ownDelay is the key of item's own delay.
func ownDelay[T comparable](item T) delayKey[T] { return delayKey[T]{item: item} }

// delayedAdd is the key of a delaying queue's delayed add of item.
func delayedAdd[T comparable](item T) delayKey[T] { return delayKey[T]{item: item, added: true} }

// makeDelays makes the core's delays; start starts their goroutine.
func (c *core[T]) makeDelays(provider MetricsProvider, name string) {
	c.delays = newDelayer[delayKey[T]](c.clock, provider, name)
	c.delays.expire = c.expireParks
}

// startDelays makes the core's delays, and starts their goroutine, if it
// has none yet. The caller holds mu.
func (c *core[T]) startDelays() {
	if c.delays != nil {
		return
	}
	c.makeDelays(nil, "")
	c.delays.start(&c.mu, c.delayEnded, func() bool { return false }, c.logger)
}

// attachDelays makes the core's delays take a delaying queue's delayed
// adds too: add, called with mu held, adds an item whose delayed add has
// ended, and provider's metrics under name count the retries and the
// items waiting. It starts the delay goroutine if the core has none, unless
// a shutdown has begun: then no delayed add is accepted.
func (c *core[T]) attachDelays(add func(item T), provider MetricsProvider, name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.addDelayed = add
	if c.shuttingDown.Load() {
		return
	}
	if c.delays == nil {
		c.makeDelays(provider, name)
		c.delays.start(&c.mu, c.delayEnded, func() bool { return false }, c.logger)
		return
	}
	if c.delays.retries == nil {
		c.delays.retries, c.delays.gauge = delayingMetrics(provider, name)
		c.delays.setGauge()
	}
}

// removeDelayedAdd takes back a delaying queue's delayed add of item and
// reports whether there was one. The caller holds mu.
func (c *core[T]) removeDelayedAdd(item T) bool {
	if c.trace != nil {
		delete(c.trace.delayed, item)
	}
	return c.delays != nil && c.delays.remove(delayedAdd(item))
}

// delayEnded makes the item of key, whose delay has ended, ready: queued,
// or queued by Done if it is being processed; a delayed add adds it. The
// delay goroutine calls it with mu held.
func (c *core[T]) delayEnded(key delayKey[T]) {
	if key.added {
		c.addDelayed(key.item)
		if c.trace != nil {
			c.takeDelayed(key.item)
		}
		return
	}
	item := key.item
	entry, id := c.items.Lookup(item, c.items.Hash(item))
	if !entry.Val.processing {
		c.queueHeld(id)
	}
	entry.Val.pending = pendingReady
	c.readied(item, id)
}

// readied counts an add that made the item with id ready at the end of a
// delay or a park.
func (c *core[T]) readied(item T, id int32) {
	if c.onReady != nil {
		c.onReady(item, id)
		return
	}
	c.countAdd(item)
}

// cancelWait takes back what the held item with id waits for, a delay or
// an event, and leaves its pending none. The caller holds mu.
func (c *core[T]) cancelWait(id int32) {
	entry := c.items.At(id)
	switch entry.Val.pending {
	case pendingDelay:
		c.delays.remove(ownDelay(entry.Item))
	case pendingParked:
		c.unpark(id)
	}
	entry.Val.pending = pendingNone
}

// dropWaiting is the shutdown's part under mu: the items waiting for a
// delay or an event are dropped, with the delayed adds, and a park that a
// worker asked for will not happen: its item leaves the queue at Done.
func (c *core[T]) dropWaiting() {
	drop := func(id int32) {
		entry := c.items.At(id)
		entry.Val.pending = pendingNone
		if !entry.Val.processing {
			c.release(id)
			return
		}
		c.trace.dropNext(id)
	}
	if c.trace != nil {
		clear(c.trace.delayed)
	}
	if c.delays != nil {
		c.droppedDelayed = c.delays.dropAll(func(key delayKey[T]) {
			if key.added {
				return
			}
			_, id := c.items.Lookup(key.item, c.items.Hash(key.item))
			drop(id)
		})
	}
	if c.parking != nil {
		c.droppedParked = c.parking.parked()
		for _, id := range c.parking.ids() {
			c.unpark(id)
			drop(id)
		}
	}
}

// stopDelays stops the delay goroutine, if the core has one, and logs what
// the shutdown dropped; the caller does not hold mu, and the shutdown has
// begun.
func (c *core[T]) stopDelays() {
	c.mu.Lock()
	delays, delayed, parked := c.delays, c.droppedDelayed, c.droppedParked
	c.droppedDelayed, c.droppedParked = 0, 0
	c.mu.Unlock()
	if delays == nil {
		return
	}
	delays.stop()
	if delayed > 0 {
		c.logger.Debug("workqueue: dropped items still waiting for their delay at shutdown", "count", delayed)
	}
	if parked > 0 {
		c.logger.Info("workqueue: dropped items parked until an event at shutdown", "count", parked)
	}
}

// parkLocked parks item, which its caller is processing, until one of
// events wakes it; the park takes effect at Done, and the item is not
// queued again before backoff has passed. It does nothing after a shutdown
// has begun, for an item not being processed, for one added again since
// its Get (the add wins), or for one whose earlier park a wake has ended.
// A later park of the same item replaces an earlier one that no wake has
// ended. If one of events woke since the item's Get, the park does not
// wait: the item is queued again after its backoff. The caller holds mu.
func (c *core[T]) parkLocked(item T, hash uint32, backoff func() time.Duration, events []string) {
	if c.shuttingDown.Load() {
		return
	}
	entry, id := c.items.Lookup(item, hash)
	if entry == nil || !entry.Val.processing {
		return
	}
	switch entry.Val.pending {
	case pendingReady, pendingDelay:
		return
	case pendingParked:
		c.unpark(id) // replaced by this park
		entry.Val.pending = pendingNone
	}
	c.startDelays()
	if c.parking == nil {
		c.parking = newParking()
	}
	until := c.delays.now()
	if backoff != nil {
		until = readyAfter(until, backoff())
	}
	c.carryServed(item, false) // the reconcile after the wake links the adds this one served
	if c.parking.firedSinceGet(id, events) {
		c.endPark(id, until)
		return
	}
	c.parking.add(id, events, until)
	entry.Val.pending = pendingParked
}

// unpark takes the item with id out of the parking; the caller sets its
// pending. The caller holds mu.
func (c *core[T]) unpark(id int32) {
	r := c.parking.remove(id)
	if r.settledIn {
		c.countParked()
	}
	c.parking.recycle(r)
}

// countParked publishes the number of parked items.
func (c *core[T]) countParked() {
	if c.parkingMetrics != nil {
		c.parkingMetrics.parked.Set(float64(c.parking.parked()))
	}
}

// endPark ends the park of the item with id, if it is parked, and makes
// it ready once until has passed on the delays' clock: at once, or
// through the delays. The caller holds mu.
func (c *core[T]) endPark(id int32, until int64) {
	entry := c.items.At(id)
	now := c.delays.now()
	wait := until - now
	if until > now && wait < 0 {
		wait = math.MaxInt64 // saturated: the clock was set back before the epoch
	}
	if wait <= 0 && !entry.Val.processing {
		c.queueHeld(id) // first: if custom storage's Push panics, the park stays
	}
	if entry.Val.pending == pendingParked {
		c.unpark(id)
	}
	if wait > 0 {
		entry.Val.pending = pendingDelay
		if c.delays.add(ownDelay(entry.Item), time.Duration(wait)) {
			c.delays.poke()
		}
		return
	}
	entry.Val.pending = pendingReady
	c.readied(entry.Item, id)
}

// wakeLocked ends the parks that wait for event and that accept, if not
// nil, accepts, in the order they were made, and returns how many it
// ended. Each item is queued again once its park's backoff has passed.
// The caller holds mu.
func (c *core[T]) wakeLocked(event string, accept func(item T) bool) int {
	if c.shuttingDown.Load() {
		return 0
	}
	if c.parking == nil {
		c.parking = newParking()
	}
	woken := 0
	for _, r := range c.parking.fire(event) {
		if accept == nil || accept(c.items.At(r.id).Item) {
			c.endPark(r.id, r.backoffUntil)
			woken++
			if c.parkingMetrics != nil {
				c.parkingMetrics.wakes.Inc(event)
			}
		}
	}
	return woken
}

// wakeItemLocked ends the park of item, if it is parked, and queues it at
// once, whatever its backoff. The caller holds mu.
func (c *core[T]) wakeItemLocked(item T, hash uint32) bool {
	entry, id := c.items.Lookup(item, hash)
	if entry == nil || entry.Val.pending != pendingParked {
		return false
	}
	c.endPark(id, c.delays.now())
	return true
}

// expireParks ends at most budget of the parks that have lasted maxPark
// at now, oldest first, each item queued again once its backoff has
// passed, and returns how many it ended and when the next one falls due.
// The delay goroutine calls it with mu held; the budget keeps a burst of
// parks from holding mu for long, as the delays' batches do.
func (c *core[T]) expireParks(now int64, budget int) (ended int, next int64, ok bool) {
	if c.parking == nil {
		return 0, 0, false
	}
	for r := c.parking.oldest(); r != nil; r = c.parking.oldest() {
		due := readyAfter(r.since, c.maxPark)
		if due > now {
			return ended, due, true
		}
		if ended == budget {
			return ended, now, true
		}
		c.endPark(r.id, r.backoffUntil)
		ended++
		if c.parkingMetrics != nil {
			c.parkingMetrics.timeouts.Inc()
		}
	}
	return ended, 0, false
}

// snapshotParked returns the number of items parked since their Done and
// the n parked longest, longest first. The caller holds mu.
func (c *core[T]) snapshotParked(n int) (parked int, first []ParkedItem[T]) {
	for r := c.parking.oldest(); r != nil && len(first) < n; r = c.parking.next(r) {
		first = append(first, ParkedItem[T]{
			Item:   c.items.At(r.id).Item,
			Events: slices.Clone(r.events),
			Since:  c.delays.epoch.Add(time.Duration(r.since)),
		})
	}
	return c.parking.parked(), first
}

// wakeFunc is WakeFunc, which the queues share.
func (c *core[T]) wakeFunc(event string, accept func(item T) bool) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.wakeLocked(event, accept)
}

// wakeItem is WakeItem, which the queues share.
func (c *core[T]) wakeItem(item T) bool {
	hash := c.items.Hash(item)
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.wakeItemLocked(item, hash)
}
