package workqueue

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSlotChunksKeepsElementsInPlace checks that growing a slotChunks
// across many chunk boundaries never moves an element: a pointer taken
// early still reaches the element that at returns later.
func TestSlotChunksKeepsElementsInPlace(t *testing.T) {
	var c slotChunks[int]
	var pointers []*int
	for i := range 5*(1<<slotChunkShift) + 3 {
		require.Equal(t, i, c.grow())
		p := c.at(i)
		assert.Zero(t, *p, "a new element is zero")
		*p = i
		pointers = append(pointers, p)
	}
	for i, p := range pointers {
		assert.Samef(t, p, c.at(i), "element %d moved", i)
		assert.Equal(t, i, *c.at(i))
	}
}
