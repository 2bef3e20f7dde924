// Package ring provides a first-in, first-out ring buffer: the storage
// that DefaultQueue returns.
package ring

// Ring is a FIFO Ring buffer: the storage DefaultQueue returns. Its buffer length is
// zero or a power of two, so positions wrap with a mask. Above
// keepSize slots it shrinks by half when a quarter full, so a burst does
// not pin its memory forever; the gap between the grow and shrink points
// keeps it from resizing on every operation at a boundary, and keeping
// small buffers spares queues that fill and empty in batches.
type Ring[T any] struct {
	buf  []T
	head int // position of the oldest item
	n    int // number of items
}

const (
	// minSize is the smallest buffer the Ring allocates.
	minSize = 16
	// keepSize is the buffer size the Ring never shrinks below.
	keepSize = 1024
)

// Touch does nothing: a FIFO does not reorder an item added again.
func (r *Ring[T]) Touch(T) {}

// Len returns the number of items.
func (r *Ring[T]) Len() int { return r.n }

// Push appends item.
func (r *Ring[T]) Push(item T) {
	if r.n == len(r.buf) {
		r.resize(max(2*len(r.buf), minSize))
	}
	r.buf[(r.head+r.n)&(len(r.buf)-1)] = item
	r.n++
}

// Pop removes and returns the oldest item, or the zero value if there is
// none.
func (r *Ring[T]) Pop() T {
	var zero T
	if r.n == 0 {
		return zero
	}
	item := r.buf[r.head]
	r.buf[r.head] = zero // let the garbage collector have what the item points to
	r.head = (r.head + 1) & (len(r.buf) - 1)
	r.n--
	if len(r.buf) > keepSize && r.n <= len(r.buf)/4 {
		r.resize(len(r.buf) / 2)
	}
	return item
}

// resize moves the items, oldest first, to a new buffer of the given length,
// which must be a power of two no smaller than r.n.
func (r *Ring[T]) resize(size int) {
	buf := make([]T, size)
	if r.n > 0 {
		end := r.head + r.n
		if end <= len(r.buf) {
			copy(buf, r.buf[r.head:end])
		} else {
			k := copy(buf, r.buf[r.head:])
			copy(buf[k:], r.buf[:end-len(r.buf)])
		}
	}
	r.buf = buf
	r.head = 0
}
