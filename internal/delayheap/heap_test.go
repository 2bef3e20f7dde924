package delayheap

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// verifyHeap fails t unless checkHeap finds h sound.
func verifyHeap[T comparable](t *testing.T, h *Heap[T]) {
	t.Helper()
	if err := Verify(h); err != nil {
		t.Fatal(err)
	}
}

func TestDelayHeapRandomOperations(t *testing.T) {
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, seed))
		h := New[int]()
		model := map[int]int64{} // item -> ready time
		for range 2000 {
			switch rng.IntN(3) {
			case 0, 1:
				item, readyAt := rng.IntN(200), rng.Int64N(50)
				h.Add(item, readyAt)
				if old, ok := model[item]; !ok || readyAt < old {
					model[item] = readyAt
				}

			case 2:
				if h.Len() == 0 {
					continue
				}
				wantReady := slices.Min(valuesOf(model))
				require.Equal(t, wantReady, h.FirstReadyAt(), "first ready time")
				item := h.PopFirst()
				require.Equal(t, model[item], wantReady)
				delete(model, item)
			}
			verifyHeap(t, h)
			require.Equal(t, len(model), h.Len())
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
	h := New[int]()
	for i := range 100 {
		h.Add(i, int64(i%3))
	}
	var got []int
	for h.Len() > 0 {
		got = append(got, h.PopFirst())
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
	h := New[string]()
	require.True(t, h.Add("a", 10))
	require.False(t, h.Add("b", 20))
	require.False(t, h.Add("b", 15), "moved earlier but not first")
	require.True(t, h.Add("b", 5), "moved to the front")
	require.False(t, h.Add("b", 30), "a later time is ignored")
	require.Equal(t, int64(5), h.FirstReadyAt())
	require.Equal(t, 2, h.RemoveAll())
	require.Zero(t, h.Len())
	verifyHeap(t, h)
}

func TestDelayHeapMovingEarlierKeepsOneEntry(t *testing.T) {
	h := New[int]()
	h.Add(-1, 1<<40)
	for i := range 10000 {
		h.Add(i%3, int64(1<<30-i))
	}
	verifyHeap(t, h)
	require.Equal(t, 4, h.entries.Len())
	require.Equal(t, []int{0, 2, 1, -1}, []int{h.PopFirst(), h.PopFirst(), h.PopFirst(), h.PopFirst()})
}

// An item moved earlier and then popped must leave nothing behind that
// hides a later item from being first.
func TestDelayHeapAddReportsFirstAfterMovedItemLeft(t *testing.T) {
	h := New[string]()
	h.Add("a", 5)
	h.Add("a", 3) // moved earlier, in place
	require.Equal(t, "a", h.PopFirst())
	require.True(t, h.Add("b", 7), "b is the only waiting item")
	verifyHeap(t, h)
}

func TestDelayHeapReleasesMemory(t *testing.T) {
	h := New[int]()
	for i := range 10000 {
		h.Add(i, int64(i))
	}
	for range 9990 {
		h.PopFirst()
	}
	verifyHeap(t, h)
	require.LessOrEqual(t, h.entries.Chunks(), 2, "heap array chunks kept after the drain")
	for range 10 {
		h.PopFirst()
	}
	require.Zero(t, h.items.IDLimit(), "items kept after the heap emptied")
	require.Zero(t, h.items.Chunks(), "the item table's memory kept after the heap emptied")
}

// TestDelayHeapFirst compares first with a full sort of the heap.
func TestDelayHeapFirst(t *testing.T) {
	h := New[int]()
	for i := range 500 {
		h.Add(i, int64((i*7919)%97)) // many ties
	}
	all := h.First(h.Len())
	require.Len(t, all, 500)
	for i := 1; i < len(all); i++ {
		require.LessOrEqual(t, all[i-1].ReadyAt, all[i].ReadyAt)
	}
	for _, n := range []int{0, 1, 5, 100} {
		got := h.First(n)
		require.Len(t, got, n)
		for i := range got {
			assert.Equal(t, all[i], got[i], "first %d, item %d", n, i)
		}
	}
}

// TestDelayHeapSet mixes Set, which moves an item either way, with Add,
// PopFirst and Remove, against a map, checking ReadyAt and the invariant
// after every operation.
func TestDelayHeapSet(t *testing.T) {
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 1))
		h := New[int]()
		model := map[int]int64{}
		for range 2000 {
			item, readyAt := rng.IntN(50), rng.Int64N(50)
			switch rng.IntN(4) {
			case 0:
				isFirst := h.Set(item, readyAt)
				model[item] = readyAt
				require.Equal(t, h.First(1)[0].Item == item, isFirst, "Set(%d, %d) isFirst", item, readyAt)
			case 1:
				h.Add(item, readyAt)
				if old, ok := model[item]; !ok || readyAt < old {
					model[item] = readyAt
				}
			case 2:
				_, want := model[item]
				require.Equal(t, want, h.Remove(item))
				delete(model, item)
			case 3:
				if h.Len() > 0 {
					require.Equal(t, slices.Min(valuesOf(model)), h.FirstReadyAt())
					delete(model, h.PopFirst())
				}
			}
			verifyHeap(t, h)
			require.Equal(t, len(model), h.Len())
			got, ok := h.ReadyAt(item)
			want, waiting := model[item]
			require.Equal(t, waiting, ok, "ReadyAt(%d) ok", item)
			require.Equal(t, want, got, "ReadyAt(%d)", item)
		}
	}
}

// TestDelayHeapSetLaterLeavesFirst: an item moved later than another stops
// being first, and an item moved to an equal time goes behind it.
func TestDelayHeapSetLaterLeavesFirst(t *testing.T) {
	h := New[string]()
	h.Add("a", 1)
	h.Add("b", 5)
	assert.False(t, h.Set("a", 9), "a moved after b is not first")
	assert.Equal(t, int64(5), h.FirstReadyAt())
	assert.False(t, h.Set("a", 5), "a moved to b's time goes behind b")
	assert.Equal(t, "b", h.PopFirst())
	assert.True(t, h.Set("a", 7), "alone, a is first")
	verifyHeap(t, h)
}
