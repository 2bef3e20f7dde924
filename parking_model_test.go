package workqueue

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"time"
)

// parkingModel is the parking part of the reference models (queueModel and
// pqModel), written once: the parks, the events woken since each
// processing item's Get, and the parks counted for the park backoff. It
// decides when a park ends; what an ended park's item becomes (queued, or
// waiting for its backoff) is the owning model's to say, so the methods
// that end parks hand them to the owner's release.
//
// The rules: Park takes the park backoff and, if one of its events woke
// since the item's Get, ends at once; otherwise it waits for a wake of one
// of its events and takes effect (settles) at the item's Done. A wake ends
// the parks waiting for it in the order of their Park calls; a settled park
// ends by itself after maxPark, oldest settled first. An ended park's item
// is ready once its backoff has passed.
type parkingModel struct {
	maxPark time.Duration
	parks   map[int]*modelPark
	fired   map[int]uint8 // the events woken since each processing item's Get
	counts  map[int]int   // parks since the item's last Forget or Remove
	seq     uint64
	down    bool // shut down: no park, and no wake
}

// modelPark is a park: its events, whether it took effect (at Done) and
// when, the end of its backoff, and the order of the Park calls (seq) and
// of the Dones (settleSeq).
type modelPark struct {
	events       uint8
	settled      bool
	since        time.Duration
	backoffUntil time.Duration
	seq          uint64
	settleSeq    uint64
}

// endedPark is a park that has ended: its item is ready once until has
// passed.
type endedPark struct {
	item  int
	until time.Duration
}

func newParkingModel(maxPark time.Duration) parkingModel {
	return parkingModel{maxPark: maxPark, parks: map[int]*modelPark{}, fired: map[int]uint8{}, counts: map[int]int{}}
}

func (p *parkingModel) next() uint64 { p.seq++; return p.seq }

// handOut notes that Get handed item out: no event has woken since.
func (p *parkingModel) handOut(item int) { p.fired[item] = 0 }

// park applies Park(item, events) to an item the owner found may park:
// processing, and neither added again nor woken since its Get. It returns
// the park backoff it took. If one of events woke since the item's Get,
// the park ends at once, and release gets it.
func (p *parkingModel) park(now time.Duration, item int, events uint8, release func(...endedPark)) time.Duration {
	backoff := modelBackoff(p.counts, item)
	delete(p.parks, item)
	if p.fired[item]&events != 0 {
		release(endedPark{item, now + backoff})
		return backoff
	}
	p.parks[item] = &modelPark{events: events, backoffUntil: now + backoff, seq: p.next()}
	return backoff
}

// done notes that item's processing ended at now: its park, if it has
// one, takes effect.
func (p *parkingModel) done(now time.Duration, item int) {
	delete(p.fired, item)
	if park := p.parks[item]; park != nil {
		park.settled, park.since, park.settleSeq = true, now, p.next()
	}
}

// wake applies Wake of the events in bit: it ends the parks waiting for
// them and hands them to release in the order of their Park calls. It
// returns how many it ended.
func (p *parkingModel) wake(bit uint8, release func(...endedPark)) int {
	if p.down {
		return 0
	}
	for item := range p.fired {
		p.fired[item] |= bit
	}
	var woken []int
	for item, park := range p.parks {
		if park.events&bit != 0 {
			woken = append(woken, item)
		}
	}
	slices.SortFunc(woken, func(a, b int) int { return cmp.Compare(p.parks[a].seq, p.parks[b].seq) })
	release(p.end(woken)...)
	return len(woken)
}

// wakeItem applies WakeItem(item) at now: it ends item's park, if it has
// one, with no backoff left, hands it to release, and reports whether it
// did.
func (p *parkingModel) wakeItem(now time.Duration, item int, release func(...endedPark)) bool {
	if !p.drop(item) {
		return false
	}
	release(endedPark{item, now})
	return true
}

// nextExpiry returns the first instant at which a settled park has lasted
// maxPark.
func (p *parkingModel) nextExpiry() (time.Duration, bool) {
	next, ok := time.Duration(0), false
	for _, park := range p.parks {
		if t := park.since + p.maxPark; park.settled && (!ok || t < next) {
			next, ok = t, true
		}
	}
	return next, ok
}

// expire ends the parks that have lasted maxPark at t, oldest settled
// first.
func (p *parkingModel) expire(t time.Duration) []endedPark {
	var expired []int
	for _, item := range p.settledOrder() {
		if p.parks[item].since+p.maxPark == t {
			expired = append(expired, item)
		}
	}
	return p.end(expired)
}

// end ends the parks of items, in that order.
func (p *parkingModel) end(items []int) []endedPark {
	ended := make([]endedPark, 0, len(items))
	for _, item := range items {
		ended = append(ended, endedPark{item, p.parks[item].backoffUntil})
		delete(p.parks, item)
	}
	return ended
}

// has reports whether item has a park, in effect or to take effect at its
// Done.
func (p *parkingModel) has(item int) bool { return p.parks[item] != nil }

// drop ends item's park without waking it, as an Add or a Remove does, and
// reports whether it had one.
func (p *parkingModel) drop(item int) bool {
	_, parked := p.parks[item]
	delete(p.parks, item)
	return parked
}

// forget resets item's park backoff, as Forget and Remove do.
func (p *parkingModel) forget(item int) { delete(p.counts, item) }

// shutDown drops every park; from here on nothing parks or wakes.
func (p *parkingModel) shutDown() {
	clear(p.parks)
	p.down = true
}

// settledOrder returns the items of the parks in effect, oldest first.
func (p *parkingModel) settledOrder() []int {
	var parked []int
	for item, park := range p.parks {
		if park.settled {
			parked = append(parked, item)
		}
	}
	slices.SortFunc(parked, func(a, b int) int { return cmp.Compare(p.parks[a].settleSeq, p.parks[b].settleSeq) })
	return parked
}

// parked returns the number of parks in effect.
func (p *parkingModel) parked() int { return len(p.settledOrder()) }

// parkingRef is a reference model that parks: queueModel or pqModel.
type parkingRef interface {
	// park applies a worker's Park(item, events), and reports whether it
	// took effect and then the park backoff it took.
	park(item int, events uint8) (backoff time.Duration, parked bool)
}

// modelParkOp applies a worker's Park(item, events) to q and to the model
// m, and describes how the park backoff q took differs from m's, or "". A
// park consults the queue's ParkBackoff (parkLimiter), never its rate
// limiter.
func modelParkOp(q parkingUnderTest, limiter, parkLimiter *recordingLimiter, m parkingRef, item int, events uint8) string {
	limiter.last, parkLimiter.last = -1, -1
	q.Park(modelKeys[item], linEvents(events)...)
	if limiter.last != -1 {
		return "Park consulted the rate limiter"
	}
	want, parked := m.park(item, events)
	if !parked {
		want = -1
	}
	if parkLimiter.last != want {
		return fmt.Sprintf("park backoff = %v, model %v", parkLimiter.last, want)
	}
	return ""
}

// clone returns a copy of p that can be changed without changing p.
func (p *parkingModel) clone() parkingModel {
	c := *p
	c.parks = map[int]*modelPark{}
	for item, park := range p.parks {
		copied := *park
		c.parks[item] = &copied
	}
	c.fired, c.counts = maps.Clone(p.fired), maps.Clone(p.counts)
	return c
}
