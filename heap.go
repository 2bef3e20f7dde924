package workqueue

// delayHeap holds the items that wait for their delay, each once, ordered by
// ready time; items with equal ready times leave in the order they were last
// moved in.
//
// The heap array holds small entries (ready time, sequence number, slot);
// the item itself lives in a slot of slots, which also records the entry's
// position in the heap, so moving an entry updates a slice element instead
// of a map. index maps each waiting item to its slot. Freed slots are
// cleared at once, so the heap never keeps an item alive after it leaves.
//
// Invariant: for every 0 < i < len(entries),
// !entries[i].before(&entries[(i-1)/2]); slots[entries[i].slot].pos == i;
// index[slots[entries[i].slot].item] == entries[i].slot. Ready times are
// durations since an epoch the delaying queue chose, so the comparison is
// one integer compare.
type delayHeap[T comparable] struct {
	entries []delayEntry
	slots   []delaySlot[T]
	free    []int32 // slots not in use
	index   map[T]int32
	nextSeq uint64
}

type delayEntry struct {
	readyAt int64  // nanoseconds since the delaying queue's epoch
	seq     uint64 // order of the adds that set the ready time, to break ties
	slot    int32
}

type delaySlot[T comparable] struct {
	item T
	pos  int32 // position of the item's entry in the heap
}

func (e *delayEntry) before(other *delayEntry) bool {
	if e.readyAt != other.readyAt {
		return e.readyAt < other.readyAt
	}
	return e.seq < other.seq
}

func newDelayHeap[T comparable]() *delayHeap[T] {
	return &delayHeap[T]{index: make(map[T]int32)}
}

// len returns the number of waiting items.
func (h *delayHeap[T]) len() int { return len(h.entries) }

// firstReadyAt returns the earliest ready time; the heap must not be empty.
func (h *delayHeap[T]) firstReadyAt() int64 { return h.entries[0].readyAt }

// add inserts item with the given ready time, or, if item is already waiting,
// moves its ready time earlier when the new one is earlier: the earliest
// ready time wins. It reports whether item is now first.
func (h *delayHeap[T]) add(item T, readyAt int64) (isFirst bool) {
	seq := h.nextSeq
	if slot, ok := h.index[item]; ok {
		pos := h.slots[slot].pos
		if readyAt >= h.entries[pos].readyAt {
			return false
		}
		h.nextSeq++
		h.entries[pos].readyAt = readyAt
		h.entries[pos].seq = seq
		return h.up(int(pos)) == 0
	}
	h.nextSeq++
	slot := h.allocSlot(item)
	h.index[item] = slot
	h.entries = append(h.entries, delayEntry{readyAt: readyAt, seq: seq, slot: slot})
	return h.up(len(h.entries)-1) == 0
}

// popFirst removes the item with the earliest ready time and returns it; the
// heap must not be empty.
func (h *delayHeap[T]) popFirst() T {
	slot := h.entries[0].slot
	item := h.slots[slot].item
	delete(h.index, item)
	h.freeSlot(slot)
	last := len(h.entries) - 1
	if last > 0 {
		h.put(0, h.entries[last])
	}
	h.entries = h.entries[:last]
	if last > 0 {
		h.down(0)
	}
	h.shrinkIfSparse()
	return item
}

// removeAll empties the heap and returns how many items it held.
func (h *delayHeap[T]) removeAll() int {
	n := len(h.entries)
	h.entries, h.slots, h.free = nil, nil, nil
	clear(h.index)
	return n
}

func (h *delayHeap[T]) allocSlot(item T) int32 {
	if n := len(h.free); n > 0 {
		slot := h.free[n-1]
		h.free = h.free[:n-1]
		h.slots[slot].item = item
		return slot
	}
	h.slots = append(h.slots, delaySlot[T]{item: item})
	return int32(len(h.slots) - 1)
}

func (h *delayHeap[T]) freeSlot(slot int32) {
	h.slots[slot] = delaySlot[T]{} // let the garbage collector have the item
	h.free = append(h.free, slot)
}

// shrinkIfSparse rebuilds the slots and the heap array once they are four
// times larger than needed, so a burst of delayed items does not pin its
// memory. Each rebuild follows at least len/2 pops, so it is O(1) amortized.
func (h *delayHeap[T]) shrinkIfSparse() {
	if len(h.slots) <= 1024 || len(h.entries) > len(h.slots)/4 {
		return
	}
	slots := make([]delaySlot[T], len(h.entries))
	for i := range h.entries {
		old := h.entries[i].slot
		slots[i] = delaySlot[T]{item: h.slots[old].item, pos: int32(i)}
		h.entries[i].slot = int32(i)
		h.index[slots[i].item] = int32(i)
	}
	h.slots = slots
	h.free = nil
	h.entries = append([]delayEntry(nil), h.entries...)
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
		h.put(i, h.entries[parent])
		i = parent
	}
	h.put(i, e)
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
		h.put(i, h.entries[child])
		i = child
	}
	h.put(i, e)
}

func (h *delayHeap[T]) put(i int, e delayEntry) {
	h.entries[i] = e
	h.slots[e.slot].pos = int32(i)
}
