package workqueue

// chunked is a growable array kept in chunks of chunkSize elements, so that
// growing it never copies what it already holds: with a million items
// waiting, an append costs at most one allocation of a chunk instead of a
// copy of the whole array, and no AddAfter caller stalls behind one. The
// first chunk grows like a slice, so a small array stays small.
type chunked[E any] struct {
	chunks [][]E
	n      int
}

const (
	chunkShift = 10
	chunkSize  = 1 << chunkShift
	chunkMask  = chunkSize - 1
)

func (c *chunked[E]) len() int { return c.n }

// at returns the i-th element, which must exist.
func (c *chunked[E]) at(i int) *E {
	return &c.chunks[i>>chunkShift][i&chunkMask]
}

func (c *chunked[E]) push(e E) {
	switch {
	case c.n < chunkSize:
		if len(c.chunks) == 0 {
			c.chunks = append(c.chunks, nil)
		}
		c.chunks[0] = append(c.chunks[0], e)
	case c.n&chunkMask == 0 && c.n>>chunkShift == len(c.chunks):
		chunk := make([]E, chunkSize)
		chunk[0] = e
		c.chunks = append(c.chunks, chunk)
	default: // within a chunk, or the first element of the spare one
		*c.at(c.n) = e
	}
	c.n++
}

// truncate removes the last element, clearing it for the garbage
// collector, and lets go of chunks that are no longer needed, keeping one
// spare so that a length going up and down across a boundary does not
// allocate each time. The first chunk keeps its capacity (append may round
// it a little above chunkSize elements), so a length going up and down
// within it, as a queue's does batch after batch, allocates nothing; reset
// lets go of it.
func (c *chunked[E]) truncate() {
	c.n--
	var zero E
	*c.at(c.n) = zero
	if c.n < chunkSize {
		c.chunks[0] = c.chunks[0][:c.n]
	}
	if last := len(c.chunks) - 1; last >= 2 && c.n <= (last-1)*chunkSize {
		c.chunks[last] = nil
		c.chunks = c.chunks[:last]
	}
}

// empty sets the length to zero, keeping the first chunk's capacity; the
// caller has cleared the elements already.
func (c *chunked[E]) empty() {
	if len(c.chunks) > 0 {
		clear(c.chunks[1:])
		c.chunks = c.chunks[:1]
		c.chunks[0] = c.chunks[0][:0]
	}
	c.n = 0
}

// shrink empties the array, whose elements hold no pointers or have been
// cleared: it lets go of all its memory if it had grown beyond the first
// chunk, so that a burst does not pin memory, and keeps the first chunk
// otherwise, so that an array that holds a few elements at a time
// allocates nothing.
func (c *chunked[E]) shrink() {
	if c.n > chunkSize {
		c.reset()
	} else {
		c.empty()
	}
}

// reset empties the array and lets go of all its memory.
func (c *chunked[E]) reset() {
	c.chunks, c.n = nil, 0
}
