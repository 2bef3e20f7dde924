package table

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSlotIndexAgainstMap runs random inserts, removes and lookups on a
// slotIndex and on a map, with hash distributions that stress each part of
// the index: spread hashes, few distinct hashes (equal hashes in one probe
// run), equal top bits (the directory cannot split by them) and equal low
// bits (every entry of a table has the same home).
func TestSlotIndexAgainstMap(t *testing.T) {
	tests := []struct {
		name string
		hash func(r *rand.Rand) uint32
		ops  int
	}{
		{"spread", func(r *rand.Rand) uint32 { return r.Uint32() }, 200_000},
		{"16 distinct hashes", func(r *rand.Rand) uint32 { return r.Uint32N(16) * 0x9e3779b9 }, 20_000},
		{"equal top bits", func(r *rand.Rand) uint32 { return r.Uint32() & 0xffff }, 100_000},
		{"equal low bits", func(r *rand.Rand) uint32 { return r.Uint32() &^ 0xffff }, 100_000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(1, 2))
			var x slotIndex
			filed := map[int32]uint32{} // slot -> hash
			var slots []int32           // the keys of filed, to pick from
			nextSlot := int32(0)
			lookup := func(hash uint32, slot int32) bool {
				got, found := x.find(hash, func(s int32) bool { return s == slot })
				if found {
					assert.Equal(t, slot, got)
				}
				return found
			}
			for op := range tt.ops {
				switch k := r.IntN(10); {
				case k < 5 || len(slots) == 0: // insert; the index grows to about a quarter of ops
					hash := tt.hash(r)
					x.Insert(hash, nextSlot)
					filed[nextSlot] = hash
					slots = append(slots, nextSlot)
					nextSlot++
				case k < 8: // remove a filed slot
					i := r.IntN(len(slots))
					slot := slots[i]
					x.Remove(filed[slot], slot)
					delete(filed, slot)
					slots[i] = slots[len(slots)-1]
					slots = slots[:len(slots)-1]
					require.False(t, lookup(filed[slot], slot), "op %d: slot %d found after removal", op, slot)
				case k < 9: // remove a slot that is not filed: nothing happens
					x.Remove(tt.hash(r), nextSlot+1)
				default: // look up a filed slot
					slot := slots[r.IntN(len(slots))]
					require.True(t, lookup(filed[slot], slot), "op %d: slot %d lost", op, slot)
				}
				require.Equal(t, len(filed), x.count)
			}
			for slot, hash := range filed {
				require.True(t, lookup(hash, slot), "slot %d lost", slot)
			}
			for slot, hash := range filed {
				x.Remove(hash, slot)
			}
			assert.Zero(t, x.count)
			for _, table := range x.dir {
				assert.Zero(t, table.used)
			}
		})
	}
}

func TestSlotIndexEmptyAndReset(t *testing.T) {
	var x slotIndex
	_, found := x.find(7, func(int32) bool { return true })
	assert.False(t, found)
	x.Remove(7, 0) // nothing filed: no-op
	x.Insert(7, 3)
	slot, found := x.find(7, func(int32) bool { return true })
	assert.True(t, found)
	assert.Equal(t, int32(3), slot)
	_, found = x.find(7, func(int32) bool { return false })
	assert.False(t, found, "a hash match alone is not a find")
	x.Reset()
	assert.Nil(t, x.dir)
	_, found = x.find(7, func(int32) bool { return true })
	assert.False(t, found)
}

// find returns the slot filed under hash for which matches is true: the
// walk of Table.lookup, with the comparison passed in.
func (x *slotIndex) find(hash uint32, matches func(slot int32) bool) (slot int32, found bool) {
	entries, start := x.run(hash)
	mask := uint32(len(entries) - 1)
	for i := start; entries != nil; i = (i + 1) & mask {
		e := entries[i]
		if e.slotPlus1 == 0 {
			break
		}
		if e.Hash == hash && matches(e.slotPlus1-1) {
			return e.slotPlus1 - 1, true
		}
	}
	return 0, false
}
