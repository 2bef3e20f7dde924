package workqueue

// slotChunkShift sets how many slots a chunk of slotChunks holds: 64, so
// that a shard with a few items does not hold kilobytes.
const (
	slotChunkShift = 6
	slotChunkMask  = 1<<slotChunkShift - 1
)

// slotChunks is a growable array whose elements never move: it grows by
// whole chunks, and only the list of chunks is ever copied. A pointer to an
// element therefore stays valid while other callers grow the array, which
// Typed.addUnnested relies on when it writes the record of its slot after
// releasing the shard's lock.
type slotChunks[E any] struct {
	chunks []*[1 << slotChunkShift]E
	n      int
}

// at returns the i-th element, which must exist.
func (c *slotChunks[E]) at(i int) *E {
	return &c.chunks[i>>slotChunkShift][i&slotChunkMask]
}

// grow appends a zero element and returns its index.
func (c *slotChunks[E]) grow() int {
	if c.n>>slotChunkShift == len(c.chunks) {
		c.chunks = append(c.chunks, new([1 << slotChunkShift]E))
	}
	c.n++
	return c.n - 1
}
