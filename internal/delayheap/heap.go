// Package delayheap provides the heap of the items that wait for their
// delay, ordered by ready time.
package delayheap

import (
	"container/heap"
	"fmt"

	"github.com/go-workqueue/workqueue/internal/chunked"
	"github.com/go-workqueue/workqueue/internal/table"
)

// Heap holds the items that wait for their delay, each once, ordered by
// ready time; items with equal ready times leave in the order they were last
// moved in.
//
// The heap array holds small entries (ready time, sequence number, id); the
// item itself lives in items, whose value for it is the position of its
// entry in the heap, so moving an entry updates an array element instead of
// a map. The heap array is chunked and items grows in small steps, so no
// Add ever copies or rehashes much.
//
// Invariant (Verify checks it): for every 0 < i < entries.Len(), writing
// e(i) for *entries.At(i): !e(i).before(e((i-1)/heapArity)); and for every
// i, items.At(e(i).id).Val == i. Ready times are durations since an epoch
// the delaying queue chose, so the comparison is one integer compare.
type Heap[T comparable] struct {
	entries chunked.Array[delayEntry]
	items   table.Table[T, int32]
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

// New returns an empty heap.
func New[T comparable]() *Heap[T] {
	return &Heap[T]{items: table.New[T, int32]()}
}

// Len returns the number of waiting items.
func (h *Heap[T]) Len() int { return h.entries.Len() }

// FirstReadyAt returns the earliest ready time; the heap must not be empty.
func (h *Heap[T]) FirstReadyAt() int64 { return h.entries.At(0).readyAt }

// Add inserts item with the given ready time, or, if item is already waiting,
// moves its ready time earlier when the new one is earlier: the earliest
// ready time wins. It reports whether item is now first.
func (h *Heap[T]) Add(item T, readyAt int64) (isFirst bool) {
	seq := h.nextSeq
	hash := h.items.Hash(item)
	if waiting, _ := h.items.Lookup(item, hash); waiting != nil {
		e := h.entries.At(int(waiting.Val))
		if readyAt >= e.readyAt {
			return false
		}
		h.nextSeq++
		e.readyAt, e.seq = readyAt, seq
		return h.up(int(waiting.Val)) == 0
	}
	h.nextSeq++
	_, id := h.items.Insert(item, hash, int32(h.entries.Len()))
	h.entries.Push(delayEntry{readyAt: readyAt, seq: seq, id: id})
	return h.up(h.entries.Len()-1) == 0
}

// Set gives item the ready time readyAt, inserting it if it is not
// waiting, and moving it earlier or later if it is: the latest call wins.
// It reports whether item is now first.
func (h *Heap[T]) Set(item T, readyAt int64) (isFirst bool) {
	waiting, _ := h.items.Lookup(item, h.items.Hash(item))
	if waiting == nil {
		return h.Add(item, readyAt)
	}
	i := int(waiting.Val)
	e := h.entries.At(i)
	e.readyAt, e.seq = readyAt, h.nextSeq
	h.nextSeq++
	h.down(h.up(i))
	return waiting.Val == 0 // put keeps the position in the table up to date
}

// ReadyAt returns item's ready time and whether it is waiting.
func (h *Heap[T]) ReadyAt(item T) (readyAt int64, ok bool) {
	if h.items.Len() == 0 {
		return 0, false
	}
	waiting, _ := h.items.Lookup(item, h.items.Hash(item))
	if waiting == nil {
		return 0, false
	}
	return h.entries.At(int(waiting.Val)).readyAt, true
}

// PopFirst removes the item with the earliest ready time and returns it; the
// heap must not be empty.
func (h *Heap[T]) PopFirst() T {
	id := h.entries.At(0).id
	item := h.items.At(id).Item
	h.items.Remove(id)
	last := h.entries.Len() - 1
	if last > 0 {
		h.put(0, *h.entries.At(last))
	}
	h.entries.Truncate()
	if last > 0 {
		h.down(0)
	}
	return item
}

// Remove takes item out of the heap, if it is waiting, in O(log n), and
// reports whether it was.
func (h *Heap[T]) Remove(item T) bool {
	waiting, id := h.items.Lookup(item, h.items.Hash(item))
	if waiting == nil {
		return false
	}
	i := int(waiting.Val)
	h.items.Remove(id)
	last := h.entries.Len() - 1
	if i != last {
		h.put(i, *h.entries.At(last))
	}
	h.entries.Truncate()
	if i != last {
		h.down(h.up(i))
	}
	return true
}

// RemoveAll empties the heap and returns how many items it held.
func (h *Heap[T]) RemoveAll() int {
	n := h.entries.Len()
	h.entries.Reset()
	h.items.Clear()
	return n
}

// up moves the entry at i towards the root until the invariant holds and
// returns its final position.
func (h *Heap[T]) up(i int) int {
	e := *h.entries.At(i)
	for i > 0 {
		parent := (i - 1) / heapArity
		p := h.entries.At(parent)
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
func (h *Heap[T]) down(i int) {
	e := *h.entries.At(i)
	n := h.entries.Len()
	for {
		first := heapArity*i + 1
		if first >= n {
			break
		}
		child, c := first, h.entries.At(first)
		for sibling := first + 1; sibling < min(first+heapArity, n); sibling++ {
			if s := h.entries.At(sibling); s.before(c) {
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

func (h *Heap[T]) put(i int, e delayEntry) {
	*h.entries.At(i) = e
	h.items.At(e.id).Val = int32(i)
}

// Waiting is an item of the delay heap with its ready time.
type Waiting[T comparable] struct {
	Item T
	// ReadyAt is when the item is ready, in nanoseconds since the epoch
	// of the heap's owner.
	ReadyAt int64
}

// First returns the n items that are ready first, soonest first, by a
// best-first walk of the heap from its root: O(n log n).
func (h *Heap[T]) First(n int) []Waiting[T] {
	var out []Waiting[T]
	frontier := &heapFrontier{entries: &h.entries}
	if h.Len() > 0 {
		frontier.positions = append(frontier.positions, 0)
	}
	for frontier.Len() > 0 && len(out) < n {
		i := heap.Pop(frontier).(int)
		e := h.entries.At(i)
		out = append(out, Waiting[T]{Item: h.items.At(e.id).Item, ReadyAt: e.readyAt})
		for child := heapArity*i + 1; child < min(heapArity*i+1+heapArity, h.Len()); child++ {
			heap.Push(frontier, child)
		}
	}
	return out
}

// heapFrontier is a min-heap of positions in a delay heap, ordered as the
// entries there: the candidates for the next of first's items.
type heapFrontier struct {
	entries   *chunked.Array[delayEntry]
	positions []int
}

func (f *heapFrontier) Len() int { return len(f.positions) }
func (f *heapFrontier) Less(i, j int) bool {
	return f.entries.At(f.positions[i]).before(f.entries.At(f.positions[j]))
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

// Contains reports whether item is waiting.
func (h *Heap[T]) Contains(item T) bool {
	if h.items.Len() == 0 {
		return false
	}
	waiting, _ := h.items.Lookup(item, h.items.Hash(item))
	return waiting != nil
}

// Verify checks the heap invariant, the positions and the item table,
// and returns the first fault found. It avoids testify in its loops, which
// run millions of times. It is for tests.
func Verify[T comparable](h *Heap[T]) error {
	if err := table.Verify(&h.items); err != nil {
		return err
	}
	n := h.entries.Len()
	if h.items.Len() != n {
		return fmt.Errorf("table has %d items, heap %d", h.items.Len(), n)
	}
	for i := range n {
		e := h.entries.At(i)
		if parent := (i - 1) / heapArity; i > 0 && e.before(h.entries.At(parent)) {
			return fmt.Errorf("entry %d is before its parent %d", i, parent)
		}
		if pos := h.items.At(e.id).Val; int(pos) != i {
			return fmt.Errorf("entry %d: item %d says position %d", i, e.id, pos)
		}
	}
	return nil
}
