// Package chunked provides an array that grows without copying what it
// holds, for the queue's item table, delay heap and lists.
package chunked

// Array is a growable array kept in chunks of Size elements, so that
// growing it never copies what it already holds: with a million items
// waiting, an append costs at most one allocation of a chunk instead of a
// copy of the whole array, and no AddAfter caller stalls behind one. The
// first chunk grows like a slice, so a small array stays small.
type Array[E any] struct {
	chunks [][]E
	n      int
}

const (
	shift = 10
	// Size is the number of elements in a chunk.
	Size = 1 << shift
	mask = Size - 1
)

// Len returns the number of elements.
func (c *Array[E]) Len() int { return c.n }

// At returns the i-th element, which must exist.
func (c *Array[E]) At(i int) *E {
	return &c.chunks[i>>shift][i&mask]
}

// Chunks returns the number of chunks the array holds memory for.
func (c *Array[E]) Chunks() int { return len(c.chunks) }

// Push appends e.
func (c *Array[E]) Push(e E) {
	switch {
	case c.n < Size:
		if len(c.chunks) == 0 {
			c.chunks = append(c.chunks, nil)
		}
		c.chunks[0] = append(c.chunks[0], e)
	case c.n&mask == 0 && c.n>>shift == len(c.chunks):
		chunk := make([]E, Size)
		chunk[0] = e
		c.chunks = append(c.chunks, chunk)
	default: // within a chunk, or the first element of the spare one
		*c.At(c.n) = e
	}
	c.n++
}

// Truncate removes the last element, clearing it for the garbage
// collector, and lets go of chunks that are no longer needed, keeping one
// spare so that a length going up and down across a boundary does not
// allocate each time. The first chunk keeps its capacity (append may round
// it a little above Size elements), so a length going up and down
// within it, as a queue's does batch after batch, allocates nothing; Reset
// lets go of it.
func (c *Array[E]) Truncate() {
	c.n--
	var zero E
	*c.At(c.n) = zero
	if c.n < Size {
		c.chunks[0] = c.chunks[0][:c.n]
	}
	if last := len(c.chunks) - 1; last >= 2 && c.n <= (last-1)*Size {
		c.chunks[last] = nil
		c.chunks = c.chunks[:last]
	}
}

// Shrink lets go of all the array's memory if it had grown beyond the first
// chunk, so that a burst does not pin memory, and otherwise leaves the
// array as it is: an array indexed by id, whose every element is written
// before it is read, then allocates nothing and does no work while it
// holds a few elements at a time.
func (c *Array[E]) Shrink() {
	if c.n > Size {
		c.Reset()
	}
}

// Reset empties the array and lets go of all its memory.
func (c *Array[E]) Reset() {
	c.chunks, c.n = nil, 0
}
