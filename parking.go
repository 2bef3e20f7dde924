package workqueue

import (
	"cmp"
	"fmt"

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
