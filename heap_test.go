package workqueue

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// verifyHeap fails t unless checkHeap finds h sound.
func verifyHeap[T comparable](t *testing.T, h *delayHeap[T]) {
	t.Helper()
	if err := checkHeap(h); err != nil {
		t.Fatal(err)
	}
}

// checkHeap checks the heap invariant, the positions and the item table,
// and returns the first fault found. It avoids testify in its loops, which
// run millions of times.
func checkHeap[T comparable](h *delayHeap[T]) error {
	if err := verifyTable(&h.items); err != nil {
		return err
	}
	n := h.entries.len()
	if h.items.len() != n {
		return fmt.Errorf("table has %d items, heap %d", h.items.len(), n)
	}
	for i := range n {
		e := h.entries.at(i)
		if parent := (i - 1) / heapArity; i > 0 && e.before(h.entries.at(parent)) {
			return fmt.Errorf("entry %d is before its parent %d", i, parent)
		}
		if pos := h.items.at(e.id).val; int(pos) != i {
			return fmt.Errorf("entry %d: item %d says position %d", i, e.id, pos)
		}
	}
	return nil
}

func TestDelayHeapRandomOperations(t *testing.T) {
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, seed))
		h := newDelayHeap[int]()
		model := map[int]int64{} // item -> ready time
		for range 2000 {
			switch rng.IntN(3) {
			case 0, 1:
				item, readyAt := rng.IntN(200), rng.Int64N(50)
				h.add(item, readyAt)
				if old, ok := model[item]; !ok || readyAt < old {
					model[item] = readyAt
				}

			case 2:
				if h.len() == 0 {
					continue
				}
				wantReady := slices.Min(valuesOf(model))
				require.Equal(t, wantReady, h.firstReadyAt(), "first ready time")
				item := h.popFirst()
				require.Equal(t, model[item], wantReady)
				delete(model, item)
			}
			verifyHeap(t, h)
			require.Equal(t, len(model), h.len())
		}
	}
}

func valuesOf(m map[int]int64) []int64 {
	values := make([]int64, 0, len(m))
	for _, v := range m {
		values = append(values, v)
	}
	return values
}

func TestDelayHeapTiesLeaveInInsertionOrder(t *testing.T) {
	h := newDelayHeap[int]()
	for i := range 100 {
		h.add(i, int64(i%3))
	}
	var got []int
	for h.len() > 0 {
		got = append(got, h.popFirst())
		verifyHeap(t, h)
	}
	var want []int
	for r := range 3 {
		for i := r; i < 100; i += 3 {
			want = append(want, i)
		}
	}
	require.Equal(t, want, got)
}

func TestDelayHeapAddReportsFirst(t *testing.T) {
	h := newDelayHeap[string]()
	require.True(t, h.add("a", 10))
	require.False(t, h.add("b", 20))
	require.False(t, h.add("b", 15), "moved earlier but not first")
	require.True(t, h.add("b", 5), "moved to the front")
	require.False(t, h.add("b", 30), "a later time is ignored")
	require.Equal(t, int64(5), h.firstReadyAt())
	require.Equal(t, 2, h.removeAll())
	require.Zero(t, h.len())
	verifyHeap(t, h)
}

func TestDelayHeapMovingEarlierKeepsOneEntry(t *testing.T) {
	h := newDelayHeap[int]()
	h.add(-1, 1<<40)
	for i := range 10000 {
		h.add(i%3, int64(1<<30-i))
	}
	verifyHeap(t, h)
	require.Equal(t, 4, h.entries.len())
	require.Equal(t, []int{0, 2, 1, -1}, []int{h.popFirst(), h.popFirst(), h.popFirst(), h.popFirst()})
}

// An item moved earlier and then popped must leave nothing behind that
// hides a later item from being first.
func TestDelayHeapAddReportsFirstAfterMovedItemLeft(t *testing.T) {
	h := newDelayHeap[string]()
	h.add("a", 5)
	h.add("a", 3) // moved earlier, in place
	require.Equal(t, "a", h.popFirst())
	require.True(t, h.add("b", 7), "b is the only waiting item")
	verifyHeap(t, h)
}

func TestDelayHeapReleasesMemory(t *testing.T) {
	h := newDelayHeap[int]()
	for i := range 10000 {
		h.add(i, int64(i))
	}
	for range 9990 {
		h.popFirst()
	}
	verifyHeap(t, h)
	require.LessOrEqual(t, len(h.entries.chunks), 2, "heap array chunks kept after the drain")
	for range 10 {
		h.popFirst()
	}
	require.Zero(t, h.items.entries.len(), "items kept after the heap emptied")
	require.Nil(t, h.items.entries.chunks)
	require.Nil(t, h.items.index.dir)
}
