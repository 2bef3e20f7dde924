package workqueue

// ring is a FIFO ring buffer: the storage DefaultQueue returns. Its buffer length is
// zero or a power of two, so positions wrap with a mask. Above
// ringKeepSize slots it shrinks by half when a quarter full, so a burst does
// not pin its memory forever; the gap between the grow and shrink points
// keeps it from resizing on every operation at a boundary, and keeping
// small buffers spares queues that fill and empty in batches.
type ring[T any] struct {
	buf  []T
	head int // position of the oldest item
	n    int // number of items
}

const (
	// minRingSize is the smallest buffer the ring allocates.
	minRingSize = 16
	// ringKeepSize is the buffer size the ring never shrinks below.
	ringKeepSize = 1024
)

func (r *ring[T]) Touch(T) {}

func (r *ring[T]) Len() int { return r.n }

func (r *ring[T]) Push(item T) {
	if r.n == len(r.buf) {
		r.resize(max(2*len(r.buf), minRingSize))
	}
	r.buf[(r.head+r.n)&(len(r.buf)-1)] = item
	r.n++
}

func (r *ring[T]) Pop() T {
	var zero T
	if r.n == 0 {
		return zero
	}
	item := r.buf[r.head]
	r.buf[r.head] = zero // let the garbage collector have what the item points to
	r.head = (r.head + 1) & (len(r.buf) - 1)
	r.n--
	if len(r.buf) > ringKeepSize && r.n <= len(r.buf)/4 {
		r.resize(len(r.buf) / 2)
	}
	return item
}

// resize moves the items, oldest first, to a new buffer of the given length,
// which must be a power of two no smaller than r.n.
func (r *ring[T]) resize(size int) {
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
