package workqueue

import "time"

// Snapshot returns a view of the queue at one instant, listing at most n
// items of each kind (n <= 0 lists none; the counts are always there); see
// [Typed.Snapshot]. Queued lists the ready items in the order Get would
// hand them out if called again and again at that instant: with MaxWait,
// the overdue items first, then each priority from the highest, each in
// turn of its fairness keys. Delayed lists the items waiting for their
// delay that are ready first, and Failures the failure counts of the items
// listed. It holds the queue's lock for O(n log n) steps without
// fairness dimensions, and O(n²) at most with them, plus one step per
// overdue item skipped.
//
// From its first call on, the queue records when it hands out each item,
// which costs a clock reading per Get; InFlight lists only items handed
// out since. It is safe for concurrent use.
func (q *TypedPriorityQueue[T]) Snapshot(n int) Snapshot[T] {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.flight.tracking = true
	s := Snapshot[T]{
		Taken:        q.clock.Now(),
		ShuttingDown: q.shuttingDown.Load(),
		Depth:        q.queued,
		Processing:   q.processing,
		Waiting:      q.waiting.len(),
		Adds:         q.adds,
	}
	s.Queued = q.handOutOrder(n)
	for id := q.flight.head; id >= 0 && len(s.InFlight) < n; id = q.flight.links.at(int(id)).next {
		link := q.flight.links.at(int(id))
		record := q.items.at(id)
		s.InFlight = append(s.InFlight, InFlightItem[T]{Item: record.item, Since: link.since, Requeue: record.val.pending == pendingReady})
	}
	for _, e := range q.waiting.first(n) {
		s.Delayed = append(s.Delayed, DelayedItem[T]{Item: e.item, ReadyAt: q.epoch.Add(time.Duration(e.readyAt))})
	}
	s.Failures = listedFailures(q.rateLimiter, &s)
	return s
}

// handOutOrder returns the first n queued items in the order Get would hand
// them out now.
func (q *TypedPriorityQueue[T]) handOutOrder(n int) []T {
	var out []T
	overdue := func(int32) bool { return false }
	if q.maxWait > 0 {
		cutoff := q.sinceEpoch() - q.maxWait
		overdue = func(id int32) bool { return q.ages.at(int(id)).readySince <= cutoff }
		for id := q.ageHead; id >= 0 && len(out) < n && overdue(id); id = q.ages.at(int(id)).next {
			out = append(out, q.items.at(id).item)
		}
	}
	for i := len(q.levels) - 1; i >= 0 && len(out) < n; i-- {
		c := &fairCursor{node: &q.levels[i].root, id: -1}
		for len(out) < n {
			id := q.step(c, n, overdue)
			if id < 0 {
				break
			}
			out = append(out, q.items.at(id).item)
		}
	}
	return out
}

// fairCursor walks a fairness tree in hand-out order without changing it.
type fairCursor struct {
	node    *fairNode
	started bool
	id      int32         // a leaf's next item
	turns   []*fairCursor // an inner node's children, next in turn first
}

// step returns the id of the next item below c.node in hand-out order that
// skip does not reject, or -1 when there is none. budget bounds how many
// children in turn it considers: the caller stops after n items, and the
// children that have only items to skip have overdue items listed before.
func (q *TypedPriorityQueue[T]) step(c *fairCursor, budget int, skip func(id int32) bool) int32 {
	if !c.started {
		c.started = true
		c.id = c.node.head
		for child := c.node.first; child != nil && len(c.turns) < budget; child = child.next {
			c.turns = append(c.turns, &fairCursor{node: child, id: -1})
		}
	}
	if c.node.leaf {
		for c.id >= 0 {
			id := c.id
			c.id = q.items.at(id).val.next
			if !skip(id) {
				return id
			}
		}
		return -1
	}
	for len(c.turns) > 0 {
		child := c.turns[0]
		c.turns = c.turns[1:]
		if id := q.step(child, budget, skip); id >= 0 {
			c.turns = append(c.turns, child) // an emptied child drops out at its next turn
			return id
		}
	}
	return -1
}
