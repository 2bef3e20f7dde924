package workqueue

// delayHeap holds the items that wait for their delay, each once, ordered by
// ready time; items with equal ready times leave in the order they entered.
//
// Invariant: for every 0 < i < len(entries),
// !entries[i].before(entries[(i-1)/2]), and index[entries[i].item] == i.
// Ready times are durations since an epoch the delaying queue chose, so the
// comparison is one integer compare.
type delayHeap[T comparable] struct {
	entries []delayEntry[T]
	index   map[T]int
	nextSeq uint64
}

type delayEntry[T comparable] struct {
	item    T
	readyAt int64  // nanoseconds since the delaying queue's epoch
	seq     uint64 // insertion order, to break ties
}

func (e *delayEntry[T]) before(other *delayEntry[T]) bool {
	if e.readyAt != other.readyAt {
		return e.readyAt < other.readyAt
	}
	return e.seq < other.seq
}

func newDelayHeap[T comparable]() *delayHeap[T] {
	return &delayHeap[T]{index: make(map[T]int)}
}

func (h *delayHeap[T]) len() int { return len(h.entries) }

// first returns the entry with the earliest ready time; the heap must not be
// empty.
func (h *delayHeap[T]) first() *delayEntry[T] { return &h.entries[0] }

// add inserts item with the given ready time, or, if item is already waiting,
// moves its ready time earlier when the new one is earlier: the earliest
// ready time wins. It reports whether item is now first.
func (h *delayHeap[T]) add(item T, readyAt int64) (isFirst bool) {
	if i, ok := h.index[item]; ok {
		if readyAt >= h.entries[i].readyAt {
			return false
		}
		h.entries[i].readyAt = readyAt
		return h.up(i) == 0
	}
	h.entries = append(h.entries, delayEntry[T]{item: item, readyAt: readyAt, seq: h.nextSeq})
	h.nextSeq++
	i := len(h.entries) - 1
	h.index[item] = i
	return h.up(i) == 0
}

// popFirst removes and returns the entry with the earliest ready time; the
// heap must not be empty.
func (h *delayHeap[T]) popFirst() T {
	item := h.entries[0].item
	last := len(h.entries) - 1
	h.move(last, 0)
	h.entries[last] = delayEntry[T]{} // drop the reference for the garbage collector
	h.entries = h.entries[:last]
	delete(h.index, item)
	if last > 0 {
		h.down(0)
	}
	if cap(h.entries) > 64 && len(h.entries) < cap(h.entries)/4 {
		h.entries = append([]delayEntry[T](nil), h.entries...)
	}
	return item
}

// removeAll empties the heap and returns how many entries it held.
func (h *delayHeap[T]) removeAll() int {
	n := len(h.entries)
	h.entries = nil
	clear(h.index)
	return n
}

// up moves the entry at i towards the root until the invariant holds and
// returns its final position.
func (h *delayHeap[T]) up(i int) int {
	e := h.entries[i]
	for i > 0 {
		parent := (i - 1) / 2
		if !e.before(&h.entries[parent]) {
			break
		}
		h.move(parent, i)
		i = parent
	}
	h.put(e, i)
	return i
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
		h.move(child, i)
		i = child
	}
	h.put(e, i)
}

func (h *delayHeap[T]) move(from, to int) {
	h.put(h.entries[from], to)
}

func (h *delayHeap[T]) put(e delayEntry[T], i int) {
	h.entries[i] = e
	h.index[e.item] = i
}
