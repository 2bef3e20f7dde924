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

// TestItemTableReusesIDsWhenIdle checks that a table that empties after
// holding a few items refiles the next ones under the ids it freed, most
// recently freed first, rather than issuing new ones: the ids that arrays
// indexed by id must cover do not grow.
func TestItemTableReusesIDsWhenIdle(t *testing.T) {
	tests := []struct {
		name  string
		burst int
	}{
		{"one item at a time", 1},
		{"a few", 3},
		{"a full chunk", chunked.Size},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tab := New[int, int32]()
			for round := range 5 {
				var ids []int32
				for i := range tt.burst {
					_, id := tab.Insert(round*tt.burst+i, tab.Hash(round*tt.burst+i), int32(i))
					ids = append(ids, id)
				}
				require.NoError(t, Verify(&tab))
				require.EqualValues(t, tt.burst, tab.IDLimit(), "round %d: ids issued", round)
				for _, id := range ids {
					removeAndCheck(t, &tab, id)
				}
				require.Zero(t, tab.Len())
				require.NoError(t, Verify(&tab))
				if round > 0 || tt.burst == 1 {
					continue
				}
				// The next insert takes the id freed last.
				_, id := tab.Insert(-1, tab.Hash(-1), 0)
				require.Equal(t, ids[len(ids)-1], id)
				removeAndCheck(t, &tab, id)
			}
		})
	}
}
