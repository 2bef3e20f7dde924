package list

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestListsAgainstSlices runs random pushes, removals and pops on three
// lists sharing one Links against slices, and checks every list after
// every step.
func TestListsAgainstSlices(t *testing.T) {
	tests := []struct {
		name string
		ids  int
	}{
		{"within a chunk", 40},
		{"across chunks", 3000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(3, 4))
			var links Links
			lists := []IDs{New(), New(), New()}
			models := make([][]int32, len(lists))
			in := map[int32]int{} // the list each id is in
			for step := range 20 * tt.ids {
				id := int32(rng.IntN(tt.ids))
				if which, ok := in[id]; ok {
					if rng.IntN(2) == 0 && lists[which].Head() == id {
						require.Equal(t, id, lists[which].PopFront(&links))
					} else {
						lists[which].Remove(&links, id)
					}
					models[which] = slices.DeleteFunc(models[which], func(x int32) bool { return x == id })
					delete(in, id)
				} else {
					which := rng.IntN(len(lists))
					lists[which].PushBack(&links, id)
					models[which] = append(models[which], id)
					in[id] = which
				}
				if step%13 == 0 {
					for i := range lists {
						got, err := Verify(lists[i], &links)
						require.NoError(t, err, "step %d, list %d", step, i)
						require.True(t, slices.Equal(models[i], got), "step %d, list %d: %v, want %v", step, i, got, models[i])
						require.Equal(t, len(models[i]), lists[i].Len())
					}
				}
			}
			for i := range lists {
				for lists[i].Len() > 0 {
					lists[i].PopFront(&links)
				}
				require.Equal(t, int32(-1), lists[i].Head())
			}
			links.Shrink()
			if tt.ids > 1024 {
				require.Zero(t, links.Size(), "links kept after the lists emptied")
			}
		})
	}
}

type node struct {
	id int
	Elem[node]
}

func (n *node) Links() *Elem[node] { return &n.Elem }

// TestPtrsAgainstSlice runs random pushes, removals, pops and moves to the
// back on a Ptrs list against a slice, and checks the list after every
// step.
func TestPtrsAgainstSlice(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	nodes := make([]*node, 20)
	for i := range nodes {
		nodes[i] = &node{id: i}
	}
	var l Ptrs[node, *node]
	var model []*node
	for step := range 2000 {
		n := nodes[rng.IntN(len(nodes))]
		i := slices.Index(model, n)
		switch {
		case i < 0:
			l.PushBack(n)
			model = append(model, n)
		case rng.IntN(3) == 0:
			l.MoveToBack(n)
			model = append(slices.Delete(model, i, i+1), n)
		case rng.IntN(2) == 0 && l.Front() == n:
			require.Same(t, n, l.PopFront())
			model = model[1:]
		default:
			l.Remove(n)
			model = slices.Delete(model, i, i+1)
		}
		got, err := VerifyPtrs(&l)
		require.NoError(t, err, "step %d", step)
		require.True(t, slices.Equal(model, got), "step %d", step)
		require.Equal(t, len(model) > 0 && l.Back() == model[len(model)-1] || len(model) == 0 && l.Back() == nil, true)
	}
	for l.Len() > 0 {
		l.PopFront()
	}
	require.Nil(t, l.PopFront())
}
