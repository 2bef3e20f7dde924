package workqueue

import "container/heap"

// delayHeap holds the items that wait for their delay, each once, ordered by
// ready time; items with equal ready times leave in the order they were last
// moved in.
//
// The heap array holds small entries (ready time, sequence number, id); the
// item itself lives in items, whose value for it is the position of its
// entry in the heap, so moving an entry updates an array element instead of
// a map. The heap array is chunked and items grows in small steps, so no
// add ever copies or rehashes much.
//
// Invariant (checked by verify): for every 0 < i < entries.len(), writing
// e(i) for *entries.at(i): !e(i).before(e((i-1)/heapArity)); and for every
// i, items.at(e(i).id).val == i. Ready times are durations since an epoch
// the delaying queue chose, so the comparison is one integer compare.
type delayHeap[T comparable] struct {
	entries chunked[delayEntry]
	items   itemTable[T, int32]
	nextSeq uint64
}

type delayEntry struct {
	readyAt int64  // nanoseconds since the delaying queue's epoch
	seq     uint64 // order of the adds that set the ready time, to break ties
	id      int32  // the item's id in items
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
	return &delayHeap[T]{items: newItemTable[T, int32]()}
}

// len returns the number of waiting items.
func (h *delayHeap[T]) len() int { return h.entries.len() }

// firstReadyAt returns the earliest ready time; the heap must not be empty.
func (h *delayHeap[T]) firstReadyAt() int64 { return h.entries.at(0).readyAt }

// add inserts item with the given ready time, or, if item is already waiting,
// moves its ready time earlier when the new one is earlier: the earliest
// ready time wins. It reports whether item is now first.
func (h *delayHeap[T]) add(item T, readyAt int64) (isFirst bool) {
	seq := h.nextSeq
	hash := h.items.hash(item)
	if waiting, _ := h.items.lookup(item, hash); waiting != nil {
		e := h.entries.at(int(waiting.val))
		if readyAt >= e.readyAt {
			return false
		}
		h.nextSeq++
		e.readyAt, e.seq = readyAt, seq
		return h.up(int(waiting.val)) == 0
	}
	h.nextSeq++
	_, id := h.items.insert(item, hash, int32(h.entries.len()))
	h.entries.push(delayEntry{readyAt: readyAt, seq: seq, id: id})
	return h.up(h.entries.len()-1) == 0
}

// popFirst removes the item with the earliest ready time and returns it; the
// heap must not be empty.
func (h *delayHeap[T]) popFirst() T {
	id := h.entries.at(0).id
	item := h.items.at(id).item
	h.items.remove(id)
	last := h.entries.len() - 1
	if last > 0 {
		h.put(0, *h.entries.at(last))
	}
	h.entries.truncate()
	if last > 0 {
		h.down(0)
	}
	return item
}

// remove takes item out of the heap, if it is waiting, in O(log n), and
// reports whether it was.
func (h *delayHeap[T]) remove(item T) bool {
	waiting, id := h.items.lookup(item, h.items.hash(item))
	if waiting == nil {
		return false
	}
	i := int(waiting.val)
	h.items.remove(id)
	last := h.entries.len() - 1
	if i != last {
		h.put(i, *h.entries.at(last))
	}
	h.entries.truncate()
	if i != last {
		h.down(h.up(i))
	}
	return true
}

// removeAll empties the heap and returns how many items it held.
func (h *delayHeap[T]) removeAll() int {
	n := h.entries.len()
	h.entries.reset()
	h.items.clear()
	return n
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
	h.items.at(e.id).val = int32(i)
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
