package workqueue

import (
	"sync"
	"sync/atomic"
)

// fifoSegmentSize is how many items a segment of a fifo holds.
const fifoSegmentSize = 128

// fifoKeepSegments bounds the emptied segments a fifo keeps for reuse: a
// queue that fills and empties in batches of up to this many segments does
// not allocate, and a burst does not pin its memory forever.
const fifoKeepSegments = 8

// fifo is the default storage of a queue: first in, first out, in segments
// linked from the oldest to the newest. Unlike a ring buffer, which moves
// every item when it grows, its two ends share nothing but a segment's
// link: push touches only the tail and pop or take only the head, so a
// queue pushes under one lock and pops under another, or takes without
// one, and adders do not wait for getters or the other way round. The owner counts pushes and pops
// and calls pop only when a push has not been popped yet; the count of
// pushes, written after the push and read before the pop, orders the two
// ends.
//
// The n-th item pushed, counting from 0, has ticket n. Instead of pop, the
// owner may hand each ticket to one caller, who takes its item with take;
// callers take items concurrently and in any order, without a lock. Once
// take has been used, pop must not be.
type fifo[T any] struct {
	// The head end. head is the segment of the next item to pop, or, once
	// take is used, a segment at or before the one of any ticket not yet
	// handed out; headPos is the position of the next pop in head.
	head    atomic.Pointer[fifoSegment[T]]
	headPos int
	_       [cacheLinePad]byte // keeps the ends' fields off each other's lines

	// The tail end, used by push.
	tail    *fifoSegment[T]
	tailPos int
	_       [cacheLinePad]byte

	// spares are emptied segments, linked through next, for push to reuse;
	// pop files them. Only every fifoSegmentSize-th push or pop takes
	// sparesMu, so the two ends seldom meet on it.
	sparesMu sync.Mutex
	spares   *fifoSegment[T]
	nSpares  int
}

type fifoSegment[T any] struct {
	items [fifoSegmentSize]T
	next  *fifoSegment[T]
	// first is the ticket of items[0].
	first uint64
}

func newFIFO[T any]() *fifo[T] {
	first := new(fifoSegment[T])
	f := &fifo[T]{tail: first}
	f.head.Store(first)
	return f
}

// push appends item.
func (f *fifo[T]) push(item T) {
	if f.tailPos == fifoSegmentSize {
		next := f.spare()
		next.first = f.tail.first + fifoSegmentSize
		f.tail.next = next
		f.tail = next
		f.tailPos = 0
	}
	f.tail.items[f.tailPos] = item
	f.tailPos++
}

// pop removes and returns the oldest item; the owner knows there is one.
func (f *fifo[T]) pop() T {
	head := f.head.Load()
	if f.headPos == fifoSegmentSize {
		emptied := head
		head = emptied.next
		f.head.Store(head)
		f.headPos = 0
		f.keep(emptied)
	}
	item := head.items[f.headPos]
	var zero T
	head.items[f.headPos] = zero // let the garbage collector have what it points to
	f.headPos++
	return item
}

// take removes and returns the item with ticket t. The caller loaded from
// before it was handed t, from head; t has been pushed, and no other caller
// takes it. Segments that take has emptied are left to the garbage
// collector, not reused: a slower caller may still be reading one.
func (f *fifo[T]) take(from *fifoSegment[T], t uint64) T {
	seg := from
	for t-seg.first >= fifoSegmentSize {
		seg = seg.next
	}
	if t == seg.first && seg != from {
		f.advance(seg)
	}
	i := t - seg.first
	item := seg.items[i]
	var zero T
	seg.items[i] = zero
	return item
}

// advance moves head forward to seg, whose first ticket has been handed
// out, unless head has passed it already. Every ticket before seg's was
// handed out earlier, and a caller handed one loaded head before, so no
// caller that loads head from now on needs an earlier segment.
func (f *fifo[T]) advance(seg *fifoSegment[T]) {
	for {
		head := f.head.Load()
		if head.first >= seg.first || f.head.CompareAndSwap(head, seg) {
			return
		}
	}
}

// spare returns an empty segment to append.
func (f *fifo[T]) spare() *fifoSegment[T] {
	f.sparesMu.Lock()
	s := f.spares
	if s != nil {
		f.spares = s.next
		f.nSpares--
	}
	f.sparesMu.Unlock()
	if s == nil {
		return new(fifoSegment[T])
	}
	s.next = nil
	return s
}

// keep files an emptied segment for reuse, or drops it if enough are kept.
// Its items are cleared already.
func (f *fifo[T]) keep(s *fifoSegment[T]) {
	f.sparesMu.Lock()
	if f.nSpares < fifoKeepSegments {
		s.next = f.spares
		f.spares = s
		f.nSpares++
	}
	f.sparesMu.Unlock()
}
