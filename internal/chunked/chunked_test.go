package chunked

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestChunked(t *testing.T) {
	tests := []struct {
		name         string
		pushes, pops []int // per round
	}{
		{"within the first chunk", []int{10, 5}, []int{3, 12}},
		{"across chunks", []int{3000, 100}, []int{1000, 2100}},
		{"up and down a boundary", []int{1025, 1, 1, 1}, []int{1, 2, 0, 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c Array[*int]
			var model []*int
			for round := range tt.pushes {
				check := func() {
					t.Helper()
					require.Equal(t, len(model), c.Len())
					for i, want := range model {
						require.Same(t, want, *c.At(i), "element %d", i)
					}
				}
				for range tt.pushes[round] {
					v := new(int)
					*v = len(model)
					c.Push(v)
					model = append(model, v)
				}
				check()
				for range tt.pops[round] {
					c.Truncate()
					model = model[:len(model)-1]
				}
				check()
				require.LessOrEqual(t, len(c.chunks), len(model)/Size+2, "chunks kept")
				if len(c.chunks) > 0 {
					for i := len(model); i < min(cap(c.chunks[0]), Size); i++ {
						require.Nil(t, c.chunks[0][:i+1][i], "cleared slot %d of the first chunk", i)
					}
				}
			}
			c.Reset()
			require.Zero(t, c.Len())
		})
	}
}
