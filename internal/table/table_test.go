package table

import (
	"math/rand/v2"
	"testing"

	"github.com/go-workqueue/workqueue/internal/chunked"
	"github.com/stretchr/testify/require"
)

// removeAndCheck removes id and checks Remove's report: the table let go
// of its memory exactly when it emptied after holding ids beyond a chunk.
func removeAndCheck(t *testing.T, tab *Table[int, int32], id int32) {
	t.Helper()
	limit := tab.IDLimit()
	shrunk := tab.Remove(id)
	require.Equal(t, tab.Len() == 0 && limit > chunked.Size, shrunk, "Remove's report with %d ids issued and %d items left", limit, tab.Len())
}

// TestItemTable checks the table against a map through random inserts and
// removals, including the release of memory once it empties.
func TestItemTable(t *testing.T) {
	tests := []struct {
		name  string
		items int
	}{
		{"within a chunk", 50},
		{"across chunks", 5000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, 2))
			tab := New[int, int32]()
			model := map[int]int32{}
			for step := range 20 * tt.items {
				item := rng.IntN(tt.items)
				e, id := tab.Lookup(item, tab.Hash(item))
				want, held := model[item]
				require.Equal(t, held, e != nil, "step %d: item %d held", step, item)
				if held {
					require.Equal(t, want, e.Val)
					removeAndCheck(t, &tab, id)
					delete(model, item)
				} else {
					tab.Insert(item, tab.Hash(item), int32(step))
					model[item] = int32(step)
				}
				if step%97 == 0 {
					require.NoError(t, Verify(&tab))
				}
			}
			require.NoError(t, Verify(&tab))
			for item := range model {
				_, id := tab.Lookup(item, tab.Hash(item))
				removeAndCheck(t, &tab, id)
			}
			require.Zero(t, tab.Len())
			require.LessOrEqual(t, tab.entries.Chunks(), 1, "memory kept after the table emptied")
		})
	}
}
