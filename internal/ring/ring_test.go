package ring

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRing(t *testing.T) {
	tests := []struct {
		name   string
		pushes []int // items pushed per round
		pops   []int // items popped per round
	}{
		{"empty", nil, nil},
		{"fill and drain", []int{100}, []int{100}},
		{"wrap around", []int{10, 10, 10, 10}, []int{8, 8, 8, 16}},
		{"grow while wrapped", []int{12, 40, 3}, []int{10, 2, 43}},
		{"shrink after burst", []int{10000, 0, 10}, []int{9990, 5, 15}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r Ring[int]
			var model []int
			next := 0
			for round := range tt.pushes {
				for range tt.pushes[round] {
					r.Push(next)
					model = append(model, next)
					next++
				}
				for range tt.pops[round] {
					require.Equal(t, model[0], r.Pop())
					model = model[1:]
				}
				require.Equal(t, len(model), r.Len())
				require.True(t, len(r.buf) == 0 || len(r.buf)&(len(r.buf)-1) == 0, "buffer length %d is not a power of two", len(r.buf))
				require.LessOrEqual(t, len(r.buf), max(keepSize, 4*len(model)), "buffer did not shrink")
			}
			assert.Zero(t, r.Pop(), "Pop of an empty ring")
		})
	}
}

func TestRingClearsPoppedSlots(t *testing.T) {
	var r Ring[*int]
	for i := range 20 {
		r.Push(&i)
	}
	for range 20 {
		r.Pop()
	}
	for i, p := range r.buf {
		assert.Nilf(t, p, "slot %d still references a popped item", i)
	}
}
