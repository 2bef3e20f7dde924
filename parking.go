package workqueue

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/go-workqueue/workqueue/internal/chunked"
	"github.com/go-workqueue/workqueue/internal/list"
)

// DefaultMaxParkTime is the MaxParkTime of a config that leaves it zero.
const DefaultMaxParkTime = 5 * time.Minute

// parking holds a core's parked items: those whose worker parked them and
// is still processing them (the park takes effect at Done), and those
// parked since their Done, which wait for an event, WakeItem, an add, or
// the end of their longest park.
type parking struct {
	byID    map[int32]*parkedRecord
	byEvent map[string]map[int32]*parkedRecord
	// settled lists the items parked since their Done, oldest park first.
	// Every park lasts the same longest time, so this is also the order in
	// which the safety net ends them: no heap is needed.
	settled list.Ptrs[parkedRecord, *parkedRecord]
	seq     uint64 // numbers the parks, so that a wake queues in park order
	// spare holds records and woken the parks of the last wake, for reuse:
	// a park and its wake then allocate nothing but the events' copy.
	spare []*parkedRecord
	woken []*parkedRecord

	// fired counts the wakes by event; lastFired holds its value at each
	// event's last wake, and gotAt, by item id, its value when Get handed
	// the item out. An event that fired after an item's Get may have
	// changed what its worker read, so its park must not wait for it.
	fired     uint64
	lastFired map[string]uint64
	gotAt     chunked.Array[uint64]
}

// parkedRecord is one parked item's park.
type parkedRecord struct {
	list.Elem[parkedRecord]
	id     int32
	seq    uint64
	events []string
	// since is when the park took effect, as an offset on the delays'
	// clock; settledIn tells whether it has.
	since     int64
	settledIn bool
	// backoffUntil is when the park's backoff ends: a
	// wake before then waits for it, as kube-scheduler's backoff queue does.
	backoffUntil int64
}

func (r *parkedRecord) Links() *list.Elem[parkedRecord] { return &r.Elem }

// noteGet records the wake count at the Get of the item with id.
func (p *parking) noteGet(id int32) {
	if p.fired == 0 {
		return // gotAt reads 0 for every id already
	}
	for p.gotAt.Len() <= int(id) {
		p.gotAt.Push(0)
	}
	*p.gotAt.At(int(id)) = p.fired
}

// firedSinceGet reports whether one of events woke since the Get of the
// item with id.
func (p *parking) firedSinceGet(id int32, events []string) bool {
	var got uint64
	if int(id) < p.gotAt.Len() {
		got = *p.gotAt.At(int(id))
	}
	for _, e := range events {
		if p.lastFired[e] > got {
			return true
		}
	}
	return false
}

// ids returns the ids of every parked item.
func (p *parking) ids() []int32 {
	ids := make([]int32, 0, len(p.byID))
	for id := range p.byID {
		ids = append(ids, id)
	}
	return ids
}

// maxParkTime returns the longest park that a config's MaxParkTime asks
// for; it panics, naming the constructor, if that is negative.
func maxParkTime(constructor string, d time.Duration) time.Duration {
	if d < 0 {
		panic(fmt.Sprintf("workqueue: %s: MaxParkTime must not be negative, got %v", constructor, d))
	}
	if d == 0 {
		return DefaultMaxParkTime
	}
	return d
}

// defaultParkBackoff is the park backoff of a queue whose config names
// none: kube-scheduler's backoff for unschedulable pods ends at 10 s too.
func defaultParkBackoff[T comparable]() TypedRateLimiter[T] {
	return NewTypedItemExponentialFailureRateLimiter[T](5*time.Millisecond, 10*time.Second)
}

func newParking() *parking {
	return &parking{
		byID:      map[int32]*parkedRecord{},
		byEvent:   map[string]map[int32]*parkedRecord{},
		lastFired: map[string]uint64{},
	}
}

// add parks the item with id, which is not parked, until one of events.
func (p *parking) add(id int32, events []string, backoffUntil int64) {
	p.seq++
	var r *parkedRecord
	if n := len(p.spare); n > 0 {
		r, p.spare = p.spare[n-1], p.spare[:n-1]
	} else {
		r = new(parkedRecord)
	}
	events = slices.Clone(events)
	slices.Sort(events)
	*r = parkedRecord{id: id, seq: p.seq, events: slices.Compact(events), backoffUntil: backoffUntil}
	p.byID[id] = r
	for _, e := range r.events {
		set := p.byEvent[e]
		if set == nil {
			// Kept when it empties: events come from a small set, and
			// the next park on the event reuses it.
			set = map[int32]*parkedRecord{}
			p.byEvent[e] = set
		}
		set[id] = r
	}
}

// settle makes the park of the item with id take effect at now, and
// reports whether it is the only one that has: the first to fall due.
func (p *parking) settle(id int32, now int64) (first bool) {
	r := p.byID[id]
	r.since, r.settledIn = now, true
	p.settled.PushBack(r)
	return p.settled.Len() == 1
}

// remove takes the item with id, which is parked, out, and returns its
// park.
func (p *parking) remove(id int32) *parkedRecord {
	r := p.byID[id]
	delete(p.byID, id)
	for _, e := range r.events {
		delete(p.byEvent[e], id)
	}
	if r.settledIn {
		p.settled.Remove(r)
	}
	return r
}

// recycle takes back the record of a park that remove returned, once its
// caller is done with it.
func (p *parking) recycle(r *parkedRecord) {
	if len(p.spare) < 1024 {
		*r = parkedRecord{}
		p.spare = append(p.spare, r)
	}
}

// fire records a wake of event and returns the parks that wait for it,
// in the order they were made, in a slice that the next fire reuses.
func (p *parking) fire(event string) []*parkedRecord {
	p.fired++
	p.lastFired[event] = p.fired
	p.woken = p.woken[:0]
	for _, r := range p.byEvent[event] {
		p.woken = append(p.woken, r)
	}
	slices.SortFunc(p.woken, func(a, b *parkedRecord) int { return cmp.Compare(a.seq, b.seq) })
	return p.woken
}

// oldest returns the oldest park that has taken effect, nil if none has.
func (p *parking) oldest() *parkedRecord { return p.settled.Front() }

// next returns the park that took effect after r, nil if none did.
func (p *parking) next(r *parkedRecord) *parkedRecord { return p.settled.Next(r) }

// parked returns the number of parks that have taken effect.
func (p *parking) parked() int { return p.settled.Len() }

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
		if c.delays.add(entry.Item, time.Duration(wait)) {
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
