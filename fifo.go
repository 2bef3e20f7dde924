package workqueue

import "sync"

// fifoSegmentSize is how many items a segment of a fifo holds.
const fifoSegmentSize = 128

// fifoKeepSegments bounds the emptied segments a fifo keeps for reuse: a
// queue that fills and empties in batches of up to this many segments does
// not allocate, and a burst does not pin its memory forever.
const fifoKeepSegments = 8

// fifo is the default storage of a queue: first in, first out, in segments
// linked from the oldest to the newest. Unlike a ring buffer, which moves
// every item when it grows, its two ends share nothing but a segment's
// link: push touches only the tail and pop only the head, so a sharded
// queue pushes under one lock and pops under another, and adders do not
// wait for getters or the other way round. The owner counts pushes and pops
// and calls pop only when a push has not been popped yet; the count of
// pushes, written after the push and read before the pop, orders the two
// ends.
type fifo[T any] struct {
	// The head end, used by pop.
	head    *fifoSegment[T]
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
}

func newFIFO[T any]() *fifo[T] {
	first := new(fifoSegment[T])
	return &fifo[T]{head: first, tail: first}
}

// push appends item.
func (f *fifo[T]) push(item T) {
	if f.tailPos == fifoSegmentSize {
		next := f.spare()
		f.tail.next = next
		f.tail = next
		f.tailPos = 0
	}
	f.tail.items[f.tailPos] = item
	f.tailPos++
}

// pop removes and returns the oldest item; the owner knows there is one.
func (f *fifo[T]) pop() T {
	if f.headPos == fifoSegmentSize {
		emptied := f.head
		f.head = emptied.next
		f.headPos = 0
		f.keep(emptied)
	}
	item := f.head.items[f.headPos]
	var zero T
	f.head.items[f.headPos] = zero // let the garbage collector have what it points to
	f.headPos++
	return item
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
