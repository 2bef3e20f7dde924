package workqueue

import (
	"container/heap"
	"time"
)

// Snapshot is a view of a queue at one instant, for inspection: how much
// it holds, and the first few items of each kind. Take one with the
// Snapshot method of any queue of this package; the inspect package serves
// them.
type Snapshot[T comparable] struct {
	// Taken is when the view was taken, on the queue's clock.
	Taken time.Time
	// ShuttingDown reports whether a shutdown has begun.
	ShuttingDown bool
	// Depth is the number of items waiting to be handed out, as Len.
	Depth int
	// Queued holds the first of them in the order Get hands them out. It
	// is empty with custom storage, which cannot be read without popping.
	Queued []T
	// Processing is the number of items handed out and not yet done.
	Processing int
	// InFlight holds the longest-running of them, longest first. Only
	// items handed out after the queue's first Snapshot are listed: see
	// Typed.Snapshot.
	InFlight []InFlightItem[T]
	// Waiting is the number of items waiting for their delay, on a
	// delaying or rate-limiting queue.
	Waiting int
	// Delayed holds the waiting items that are ready first, soonest first.
	Delayed []DelayedItem[T]
	// Adds counts the adds that queued an item or marked one being
	// processed to be queued again, since the queue was made; the rate of
	// adds is its difference between two snapshots over their Taken times.
	Adds uint64
	// Failures holds, on a rate-limiting queue, the number of failures the
	// rate limiter counts for each item listed in Queued, InFlight and
	// Delayed that has any.
	Failures map[T]int
}

// InFlightItem is an item being processed.
type InFlightItem[T comparable] struct {
	Item T
	// Since is when Get handed the item out.
	Since time.Time
	// Requeue reports whether the item was added again while being
	// processed, so that Done queues it again.
	Requeue bool
}

// DelayedItem is an item waiting for its delay.
type DelayedItem[T comparable] struct {
	Item T
	// ReadyAt is when the item will be added to the queue.
	ReadyAt time.Time
}

// snapshotter is implemented by every queue of this package; the layers
// look for it in the queue below them.
type snapshotter[T comparable] interface {
	Snapshot(n int) Snapshot[T]
}

// Snapshot returns a view of the queue at one instant, listing at most n
// items of each kind (n <= 0 lists none; the counts are always there). It
// holds the queue's lock for O(n) steps, plus one step for each removed
// item that Get has not passed yet, so it is cheap enough to call on a
// busy queue every second.
//
// From its first call on, the queue records when it hands out each item,
// which costs a clock reading per Get; InFlight lists only items handed
// out since. It is safe for concurrent use.
func (q *Typed[T]) Snapshot(n int) Snapshot[T] {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.snapshotLocked(n)
}

func (q *Typed[T]) snapshotLocked(n int) Snapshot[T] {
	q.flight.tracking = true
	s := Snapshot[T]{
		Taken:        q.clock.Now(),
		ShuttingDown: q.shuttingDown.Load(),
		Depth:        q.queued(),
		Adds:         q.adds,
	}
	s.Processing = q.items.len() - s.Depth
	if q.custom != nil {
		s.Processing -= q.removed // removed records stay indexed
	} else {
		for i := 0; i < q.order.Len() && len(s.Queued) < n; i++ {
			if record := q.items.at(q.order.at(i)); record.val == stateQueued {
				s.Queued = append(s.Queued, record.item)
			}
		}
	}
	for id := q.flight.head; id >= 0 && len(s.InFlight) < n; id = q.flight.links.at(int(id)).next {
		link := q.flight.links.at(int(id))
		record := q.items.at(id)
		s.InFlight = append(s.InFlight, InFlightItem[T]{Item: record.item, Since: link.since, Requeue: record.val == stateDirty})
	}
	return s
}

// flightList links the items being processed in the order Get handed them
// out, by their ids in the item table, once a Snapshot has asked for it.
// The queue makes it with newFlightList.
type flightList struct {
	tracking   bool
	links      chunked[flightLink] // by id; grown as ids are linked
	head, tail int32               // -1 when empty
}

func newFlightList() flightList { return flightList{head: -1, tail: -1} }

type flightLink struct {
	prev, next int32
	linked     bool
	since      time.Time
}

// link appends the item with id, handed out at since.
func (l *flightList) link(id int32, since time.Time) {
	for l.links.len() <= int(id) {
		l.links.push(flightLink{})
	}
	*l.links.at(int(id)) = flightLink{prev: l.tail, next: -1, linked: true, since: since}
	if l.tail >= 0 {
		l.links.at(int(l.tail)).next = id
	} else {
		l.head = id
	}
	l.tail = id
}

// unlink takes the item with id out of the list, if it is in it.
func (l *flightList) unlink(id int32) {
	if int(id) >= l.links.len() {
		return
	}
	link := l.links.at(int(id))
	if !link.linked {
		return
	}
	if link.prev >= 0 {
		l.links.at(int(link.prev)).next = link.next
	} else {
		l.head = link.next
	}
	if link.next >= 0 {
		l.links.at(int(link.next)).prev = link.prev
	} else {
		l.tail = link.prev
	}
	*link = flightLink{}
}

// Snapshot returns a view of the queue at one instant; see [Typed.Snapshot].
// It lists the items waiting for their delay too, the n that are ready
// first, which takes O(n log n) steps under the heap's lock. Over a queue
// from outside this package without a Snapshot method, only the waiting
// items are listed.
func (q *delayingQueue[T]) Snapshot(n int) Snapshot[T] {
	q.mu.Lock() // held while the queue below takes its part: one instant
	defer q.mu.Unlock()
	var s Snapshot[T]
	if inner, ok := q.queue.(snapshotter[T]); ok {
		s = inner.Snapshot(n)
	} else {
		s = Snapshot[T]{Taken: q.clock.Now(), ShuttingDown: q.queue.ShuttingDown(), Depth: q.queue.Len()}
	}
	s.Waiting = q.waiting.len()
	for _, e := range q.waiting.first(n) {
		s.Delayed = append(s.Delayed, DelayedItem[T]{Item: e.item, ReadyAt: q.epoch.Add(time.Duration(e.readyAt))})
	}
	return s
}

// Snapshot returns a view of the queue at one instant, with the failure
// counts of the items it lists; see [delayingQueue.Snapshot].
func (q *rateLimitingQueue[T]) Snapshot(n int) Snapshot[T] {
	q.mu.Lock()
	defer q.mu.Unlock()
	var s Snapshot[T]
	if inner, ok := q.TypedDelayingInterface.(snapshotter[T]); ok {
		s = inner.Snapshot(n)
	} else {
		s = Snapshot[T]{Taken: time.Now(), ShuttingDown: q.ShuttingDown(), Depth: q.Len()}
	}
	s.Failures = listedFailures(q.rateLimiter, &s)
	return s
}

// waitingItem is an item of the delay heap with its ready time.
type waitingItem[T comparable] struct {
	item    T
	readyAt int64
}

// first returns the n items that are ready first, soonest first, by a
// best-first walk of the heap from its root: O(n log n).
func (h *delayHeap[T]) first(n int) []waitingItem[T] {
	var out []waitingItem[T]
	frontier := &heapFrontier{entries: &h.entries}
	if h.len() > 0 {
		frontier.positions = append(frontier.positions, 0)
	}
	for frontier.Len() > 0 && len(out) < n {
		i := heap.Pop(frontier).(int)
		e := h.entries.at(i)
		out = append(out, waitingItem[T]{item: h.items.at(e.id).item, readyAt: e.readyAt})
		for child := heapArity*i + 1; child < min(heapArity*i+1+heapArity, h.len()); child++ {
			heap.Push(frontier, child)
		}
	}
	return out
}

// heapFrontier is a min-heap of positions in a delay heap, ordered as the
// entries there: the candidates for the next of first's items.
type heapFrontier struct {
	entries   *chunked[delayEntry]
	positions []int
}

func (f *heapFrontier) Len() int { return len(f.positions) }
func (f *heapFrontier) Less(i, j int) bool {
	return f.entries.at(f.positions[i]).before(f.entries.at(f.positions[j]))
}
func (f *heapFrontier) Swap(i, j int) {
	f.positions[i], f.positions[j] = f.positions[j], f.positions[i]
}
func (f *heapFrontier) Push(x any) { f.positions = append(f.positions, x.(int)) }
func (f *heapFrontier) Pop() any {
	last := f.positions[len(f.positions)-1]
	f.positions = f.positions[:len(f.positions)-1]
	return last
}

// listedFailures returns the failure counts limiter keeps for the items s
// lists, nil if none has any.
func listedFailures[T comparable](limiter TypedRateLimiter[T], s *Snapshot[T]) map[T]int {
	var failures map[T]int
	count := func(item T) {
		if n := limiter.NumRequeues(item); n > 0 {
			if failures == nil {
				failures = map[T]int{}
			}
			failures[item] = n
		}
	}
	for _, item := range s.Queued {
		count(item)
	}
	for _, f := range s.InFlight {
		count(f.Item)
	}
	for _, d := range s.Delayed {
		count(d.Item)
	}
	return failures
}
