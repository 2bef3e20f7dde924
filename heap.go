package workqueue

// delayHeap holds the items that wait for their delay, each once, ordered by
// ready time; items with equal ready times leave in the order they entered.
//
// Moving an item earlier does not search the heap: it pushes a new entry and
// leaves the old one behind, stale. live maps each waiting item to the
// sequence number (and ready time) of its one current entry, so an entry is
// stale exactly when live does not map its item to its seq. Stale entries are skipped when
// they reach the top and swept out when they outnumber the live ones, so the
// heap holds at most about twice as many entries as items.
//
// Invariant: for every 0 < i < len(entries),
// !entries[i].before(&entries[(i-1)/2]). Ready times are durations since an
// epoch the delaying queue chose, so the comparison is one integer compare.
type delayHeap[T comparable] struct {
	entries []delayEntry[T]
	live    map[T]liveEntry
	nextSeq uint64
}

type delayEntry[T comparable] struct {
	readyAt int64  // nanoseconds since the delaying queue's epoch
	seq     uint64 // insertion order, to break ties and to tell stale entries
	item    T
}

// liveEntry identifies the current entry of a waiting item.
type liveEntry struct {
	readyAt int64
	seq     uint64
}

func (e *delayEntry[T]) before(other *delayEntry[T]) bool {
	if e.readyAt != other.readyAt {
		return e.readyAt < other.readyAt
	}
	return e.seq < other.seq
}

func newDelayHeap[T comparable]() *delayHeap[T] {
	return &delayHeap[T]{live: make(map[T]liveEntry)}
}

// len returns the number of waiting items.
func (h *delayHeap[T]) len() int { return len(h.live) }

func (h *delayHeap[T]) isStale(e *delayEntry[T]) bool {
	current, ok := h.live[e.item]
	return !ok || current.seq != e.seq
}

// first returns the entry with the earliest ready time; the heap must not be
// empty.
func (h *delayHeap[T]) first() *delayEntry[T] {
	for h.isStale(&h.entries[0]) {
		h.removeTop()
	}
	return &h.entries[0]
}

// add inserts item with the given ready time, or, if item is already waiting,
// moves its ready time earlier when the new one is earlier: the earliest
// ready time wins. It reports whether item is now first.
func (h *delayHeap[T]) add(item T, readyAt int64) (isFirst bool) {
	if current, ok := h.live[item]; ok && readyAt >= current.readyAt {
		return false
	}
	seq := h.nextSeq
	h.nextSeq++
	h.live[item] = liveEntry{readyAt: readyAt, seq: seq}
	h.entries = append(h.entries, delayEntry[T]{readyAt: readyAt, seq: seq, item: item})
	h.up(len(h.entries) - 1)
	h.sweepIfMostlyStale()
	// Compare with the first current entry, not the root: a stale entry at
	// the root must not hide that item is now the earliest.
	return h.first().seq == seq
}

// popFirst removes the item with the earliest ready time and returns it; the
// heap must not be empty.
func (h *delayHeap[T]) popFirst() T {
	item := h.first().item
	delete(h.live, item)
	h.removeTop()
	h.sweepIfMostlyStale()
	return item
}

// removeAll empties the heap and returns how many items it held.
func (h *delayHeap[T]) removeAll() int {
	n := len(h.live)
	h.entries = nil
	clear(h.live)
	return n
}

func (h *delayHeap[T]) removeTop() {
	last := len(h.entries) - 1
	h.entries[0] = h.entries[last]
	h.entries[last] = delayEntry[T]{} // drop the reference for the garbage collector
	h.entries = h.entries[:last]
	if last > 0 {
		h.down(0)
	}
	if cap(h.entries) > 64 && len(h.entries) < cap(h.entries)/4 {
		h.entries = append([]delayEntry[T](nil), h.entries...)
	}
}

// sweepIfMostlyStale sweeps once stale entries outnumber the current ones
// (plus some slack), which bounds the entries to about twice the items. Each
// stale entry is swept once, so the cost per add stays O(1) amortized.
func (h *delayHeap[T]) sweepIfMostlyStale() {
	if len(h.entries) > 2*len(h.live)+64 {
		h.sweep()
	}
}

// sweep drops every stale entry and restores the invariant in O(n).
func (h *delayHeap[T]) sweep() {
	kept := h.entries[:0]
	for i := range h.entries {
		if !h.isStale(&h.entries[i]) {
			kept = append(kept, h.entries[i])
		}
	}
	clear(h.entries[len(kept):])
	h.entries = kept
	for i := len(h.entries)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
}

// up moves the entry at i towards the root until the invariant holds.
func (h *delayHeap[T]) up(i int) {
	e := h.entries[i]
	for i > 0 {
		parent := (i - 1) / 2
		if !e.before(&h.entries[parent]) {
			break
		}
		h.entries[i] = h.entries[parent]
		i = parent
	}
	h.entries[i] = e
}

// down moves the entry at i towards the leaves until the invariant holds.
func (h *delayHeap[T]) down(i int) {
	e := h.entries[i]
	n := len(h.entries)
	for {
		child := 2*i + 1
		if child >= n {
			break
		}
		if right := child + 1; right < n && h.entries[right].before(&h.entries[child]) {
			child = right
		}
		if !h.entries[child].before(&e) {
			break
		}
		h.entries[i] = h.entries[child]
		i = child
	}
	h.entries[i] = e
}
