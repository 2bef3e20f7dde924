package workqueue

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// verifyTable checks an item table: every live entry is found by lookup
// under the hash of its item, free entries hold nothing but their link, and
// every entry is either live or free. It returns the first fault found.
func verifyTable[T comparable, V comparable](t *itemTable[T, V]) error {
	free := map[int32]bool{}
	for next := t.freePlus1; next != 0; next = t.at(int32(next - 1)).hash {
		id := int32(next - 1)
		if free[id] {
			return fmt.Errorf("free list loops at entry %d", id)
		}
		free[id] = true
		var zero T
		var zeroVal V
		if e := t.at(id); e.item != zero || e.val != zeroVal {
			return fmt.Errorf("free entry %d still holds %v, %v", id, e.item, e.val)
		}
	}
	live := 0
	for i := range t.entries.len() {
		id := int32(i)
		if free[id] {
			continue
		}
		e := t.at(id)
		if e.hash != t.hash(e.item) {
			return fmt.Errorf("entry %d has hash %x, its item %x", id, e.hash, t.hash(e.item))
		}
		if _, got := t.lookup(e.item, e.hash); got != id {
			return fmt.Errorf("entry %d is not found under its item %v", id, e.item)
		}
		live++
	}
	if live != t.len() {
		return fmt.Errorf("%d entries live, the table counts %d", live, t.len())
	}
	return nil
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
			tab := newItemTable[int, int32]()
			model := map[int]int32{}
			for step := range 20 * tt.items {
				item := rng.IntN(tt.items)
				e, id := tab.lookup(item, tab.hash(item))
				want, held := model[item]
				require.Equal(t, held, e != nil, "step %d: item %d held", step, item)
				if held {
					require.Equal(t, want, e.val)
					tab.remove(id)
					delete(model, item)
				} else {
					tab.insert(item, tab.hash(item), int32(step))
					model[item] = int32(step)
				}
				if step%97 == 0 {
					require.NoError(t, verifyTable(&tab))
				}
			}
			require.NoError(t, verifyTable(&tab))
			for item := range model {
				_, id := tab.lookup(item, tab.hash(item))
				tab.remove(id)
			}
			require.Zero(t, tab.len())
			require.LessOrEqual(t, len(tab.entries.chunks), 1, "memory kept after the table emptied")
		})
	}
}
