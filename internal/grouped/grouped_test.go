package grouped

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/go-workqueue/workqueue/internal/chunked"
	"github.com/go-workqueue/workqueue/internal/list"
	"github.com/stretchr/testify/require"
)

// ref is the reference: each list's ids with their groups, in key order,
// and which groups are closed.
type ref struct {
	lists  [][]refID
	closed map[int]bool
}

type refID struct {
	id    int32
	group int
}

// eligible returns the ids of list i whose group is open, in key order.
func (r *ref) eligible(i int) []int32 {
	var ids []int32
	for _, e := range r.lists[i] {
		if !r.closed[e.group] {
			ids = append(ids, e.id)
		}
	}
	return ids
}

// TestListRandomOperations drives three lists that share their groups and
// a reference with random pushes, removals, pops, closes and reopens, and
// checks Verify and everything the lists show after every operation.
func TestListRandomOperations(t *testing.T) {
	const (
		lists, groups, ids = 3, 5, 48
		steps              = 2000
	)
	for seed := range uint64(10) {
		rng := rand.New(rand.NewPCG(seed, 44))
		var (
			links list.Links
			keys  chunked.Array[uint64]
			key   uint64
		)
		for range ids {
			keys.Push(0)
		}
		gs := make([]Group, groups)
		ls := make([]*List, lists)
		for i := range ls {
			ls[i] = New(&links, &keys, i)
		}
		r := ref{lists: make([][]refID, lists), closed: map[int]bool{}}
		where := map[int32]int{} // the list of each listed id
		for step := range steps {
			switch op := rng.IntN(10); {
			case op < 4: // push a free id
				id := int32(rng.IntN(ids))
				if _, ok := where[id]; ok {
					continue
				}
				i, g := rng.IntN(lists), rng.IntN(groups)
				key++
				*keys.At(int(id)) = key
				ls[i].Push(id, &gs[g])
				r.lists[i] = append(r.lists[i], refID{id, g})
				where[id] = i
			case op < 6: // remove a listed id
				id := int32(rng.IntN(ids))
				i, ok := where[id]
				if !ok {
					continue
				}
				at := slices.IndexFunc(r.lists[i], func(e refID) bool { return e.id == id })
				ls[i].Remove(id, &gs[r.lists[i][at].group])
				r.lists[i] = slices.Delete(r.lists[i], at, at+1)
				delete(where, id)
			case op < 8: // take the first eligible id of a list
				i := rng.IntN(lists)
				want := r.eligible(i)
				require.Equal(t, len(want), ls[i].Eligible(), "seed %d step %d: Eligible of list %d", seed, step, i)
				if len(want) == 0 {
					continue
				}
				id := ls[i].First()
				require.Equal(t, want[0], id, "seed %d step %d: First of list %d", seed, step, i)
				at := slices.IndexFunc(r.lists[i], func(e refID) bool { return e.id == id })
				ls[i].Remove(id, &gs[r.lists[i][at].group])
				r.lists[i] = slices.Delete(r.lists[i], at, at+1)
				delete(where, id)
			default: // close or reopen a group
				g := rng.IntN(groups)
				if r.closed[g] {
					gs[g].Reopen()
				} else {
					gs[g].Close()
				}
				r.closed[g] = !r.closed[g]
			}
			for i, l := range ls {
				listed, err := Verify(l)
				require.NoError(t, err, "seed %d step %d: list %d", seed, step, i)
				require.Len(t, listed, len(r.lists[i]), "seed %d step %d: list %d", seed, step, i)
				require.Equal(t, r.eligible(i), nilIfEmpty(l.Walk(ids)), "seed %d step %d: Walk of list %d", seed, step, i)
				require.Equal(t, len(r.eligible(i)), l.Eligible(), "seed %d step %d: Eligible of list %d", seed, step, i)
			}
			for g := range gs {
				require.Equal(t, !r.closed[g], gs[g].Open(), "seed %d step %d: group %d", seed, step, g)
				for _, s := range gs[g].Subs() {
					require.Positive(t, s.Len())
					owner := s.List().Owner.(int)
					require.Equal(t, r.lists[owner][slices.IndexFunc(r.lists[owner], func(e refID) bool { return e.group == g })].id,
						s.ids.Head(), "seed %d step %d: group %d's first id in list %d", seed, step, g, owner)
				}
			}
		}
	}
}

func nilIfEmpty(ids []int32) []int32 {
	if len(ids) == 0 {
		return nil
	}
	return ids
}

// TestVerifyCatchesFaults breaks a sound list in each way Verify looks for
// and checks that it says so.
func TestVerifyCatchesFaults(t *testing.T) {
	build := func() (*List, []Group, *chunked.Array[uint64]) {
		var links list.Links
		keys := &chunked.Array[uint64]{}
		for i := range 6 {
			keys.Push(uint64(i + 1))
		}
		gs := make([]Group, 3)
		l := New(&links, keys, nil)
		for id := range int32(6) {
			l.Push(id, &gs[id%3])
		}
		return l, gs, keys
	}
	l, _, _ := build()
	_, err := Verify(l)
	require.NoError(t, err)

	tests := []struct {
		name  string
		spoil func(l *List, gs []Group, keys *chunked.Array[uint64])
	}{
		{"keys out of order", func(l *List, gs []Group, keys *chunked.Array[uint64]) { *keys.At(3) = 0 }},
		{"heap out of order", func(l *List, gs []Group, keys *chunked.Array[uint64]) { l.swap(0, 2) }},
		{"closed group in the heap", func(l *List, gs []Group, keys *chunked.Array[uint64]) { gs[1].closed = true }},
		{"open group out of the heap", func(l *List, gs []Group, keys *chunked.Array[uint64]) {
			gs[1].Close()
			gs[1].closed = false
		}},
		{"eligible miscounted", func(l *List, gs []Group, keys *chunked.Array[uint64]) { l.eligible++ }},
		{"group's lists filed wrong", func(l *List, gs []Group, keys *chunked.Array[uint64]) { gs[0].subs[0].groupAt = 1 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, gs, keys := build()
			tt.spoil(l, gs, keys)
			_, err := Verify(l)
			require.Error(t, err)
		})
	}
}
