package workqueue

import "hash/maphash"

// delayHeap holds the items that wait for their delay, each once, ordered by
// ready time; items with equal ready times leave in the order they were last
// moved in.
//
// The heap array holds small entries (ready time, sequence number, slot);
// the item itself lives in a slot of slots, which also records the entry's
// position in the heap, so moving an entry updates an array element instead
// of a map. index finds each waiting item's slot by the item's hash, which
// the slot keeps so that removing an item does not hash it again. Freed
// slots are cleared at once, so the heap never keeps an item alive after it
// leaves; the slots themselves are reused, and released when the heap
// empties. The arrays are chunked and the index grows a table of at most
// 1024 entries at a time, so no add ever copies or rehashes much.
//
// Invariant: for every 0 < i < entries.len(), writing e(i) for
// *entries.at(i): !e(i).before(e((i-1)/heapArity)); slots.at(e(i).slot).pos == i;
// index files e(i).slot under the hash of slots.at(e(i).slot).item. Ready times are
// durations since an epoch the delaying queue chose, so the comparison is
// one integer compare.
type delayHeap[T comparable] struct {
	entries chunked[delayEntry]
	slots   chunked[delaySlot[T]]
	free    chunked[int32] // slots not in use
	index   slotIndex
	seed    maphash.Seed
	nextSeq uint64
}

type delayEntry struct {
	readyAt int64  // nanoseconds since the delaying queue's epoch
	seq     uint64 // order of the adds that set the ready time, to break ties
	slot    int32
}

type delaySlot[T comparable] struct {
	item T
	pos  int32  // position of the item's entry in the heap
	hash uint32 // the item's hash, under which index files the slot
}

// heapArity is the number of children per node: four halves the depth of
// a binary heap, so an insert, which mostly compares with parents far
// apart in memory, misses the cache less often; the four children a pop
// compares sit next to each other.
const heapArity = 4

func (e *delayEntry) before(other *delayEntry) bool {
	if e.readyAt != other.readyAt {
		return e.readyAt < other.readyAt
	}
	return e.seq < other.seq
}

func newDelayHeap[T comparable]() *delayHeap[T] {
	return &delayHeap[T]{seed: maphash.MakeSeed()}
}

func (h *delayHeap[T]) hash(item T) uint32 { return hashItem(h.seed, item) }

// len returns the number of waiting items.
func (h *delayHeap[T]) len() int { return h.entries.len() }

// firstReadyAt returns the earliest ready time; the heap must not be empty.
func (h *delayHeap[T]) firstReadyAt() int64 { return h.entries.at(0).readyAt }

// add inserts item with the given ready time, or, if item is already waiting,
// moves its ready time earlier when the new one is earlier: the earliest
// ready time wins. It reports whether item is now first.
func (h *delayHeap[T]) add(item T, readyAt int64) (isFirst bool) {
	seq := h.nextSeq
	hash := h.hash(item)
	slot, ok := h.index.find(hash, func(slot int32) bool { return h.slots.at(int(slot)).item == item })
	if ok {
		pos := int(h.slots.at(int(slot)).pos)
		e := h.entries.at(pos)
		if readyAt >= e.readyAt {
			return false
		}
		h.nextSeq++
		e.readyAt, e.seq = readyAt, seq
		return h.up(pos) == 0
	}
	h.nextSeq++
	slot = h.allocSlot(item, hash)
	h.index.insert(hash, slot)
	h.entries.push(delayEntry{readyAt: readyAt, seq: seq, slot: slot})
	return h.up(h.entries.len()-1) == 0
}

// popFirst removes the item with the earliest ready time and returns it; the
// heap must not be empty.
func (h *delayHeap[T]) popFirst() T {
	slot := h.entries.at(0).slot
	item := h.slots.at(int(slot)).item
	h.index.remove(h.slots.at(int(slot)).hash, slot)
	h.freeSlot(slot)
	last := h.entries.len() - 1
	if last > 0 {
		h.put(0, *h.entries.at(last))
	}
	h.entries.truncate()
	if last > 0 {
		h.down(0)
	} else {
		h.slots.reset()
		h.free.reset()
		h.index.reset()
	}
	return item
}

// removeAll empties the heap and returns how many items it held.
func (h *delayHeap[T]) removeAll() int {
	n := h.entries.len()
	h.entries.reset()
	h.slots.reset()
	h.free.reset()
	h.index.reset()
	return n
}

func (h *delayHeap[T]) allocSlot(item T, hash uint32) int32 {
	if n := h.free.len(); n > 0 {
		slot := *h.free.at(n - 1)
		h.free.truncate()
		*h.slots.at(int(slot)) = delaySlot[T]{item: item, hash: hash}
		return slot
	}
	h.slots.push(delaySlot[T]{item: item, hash: hash})
	return int32(h.slots.len() - 1)
}

func (h *delayHeap[T]) freeSlot(slot int32) {
	*h.slots.at(int(slot)) = delaySlot[T]{} // let the garbage collector have the item
	h.free.push(slot)
}

// up moves the entry at i towards the root until the invariant holds and
// returns its final position.
func (h *delayHeap[T]) up(i int) int {
	e := *h.entries.at(i)
	for i > 0 {
		parent := (i - 1) / heapArity
		p := h.entries.at(parent)
		if !e.before(p) {
			break
		}
		h.put(i, *p)
		i = parent
	}
	h.put(i, e)
	return i
}

// down moves the entry at i towards the leaves until the invariant holds.
func (h *delayHeap[T]) down(i int) {
	e := *h.entries.at(i)
	n := h.entries.len()
	for {
		first := heapArity*i + 1
		if first >= n {
			break
		}
		child, c := first, h.entries.at(first)
		for sibling := first + 1; sibling < min(first+heapArity, n); sibling++ {
			if s := h.entries.at(sibling); s.before(c) {
				child, c = sibling, s
			}
		}
		if !c.before(&e) {
			break
		}
		h.put(i, *c)
		i = child
	}
	h.put(i, e)
}

func (h *delayHeap[T]) put(i int, e delayEntry) {
	*h.entries.at(i) = e
	h.slots.at(int(e.slot)).pos = int32(i)
}
