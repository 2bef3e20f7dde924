// Package table provides the item table of the queues: a small integer id
// and a value for each item held, found by the item's hash.
package table

import (
	"fmt"
	"hash/maphash"

	"github.com/go-workqueue/workqueue/internal/chunked"
)

// Table gives each item it holds a small integer id and a value of type
// V. Entries live in a chunked array, found through a slotIndex by the
// item's 32-bit hash, which the entry keeps so that removing an item never
// hashes it again. Compared with a Go map keyed by the item, a lookup
// followed by an insert or a removal hashes the item once instead of twice,
// and growth never rehashes or copies much. Freed entries are cleared at
// once, so the table never keeps an item alive, and are reused.
//
// The queue's core keeps its item records in one (V: the item's record)
// and the delay heap its waiting items (V: the position in the heap). An id stays
// valid until its item is removed; a pointer to an entry only until the
// next insert. The zero value is not usable: call New. It is not
// safe for concurrent use; Hash reads only the seed, so callers may hash
// before they take the lock that guards the rest.
type Table[T comparable, V any] struct {
	index   slotIndex
	entries chunked.Array[Entry[T, V]]
	// freePlus1 is the id plus one of the first free entry, 0 if none; a
	// free entry's hash holds the next one the same way.
	freePlus1 uint32
	seed      maphash.Seed
}

// Entry is an item held, with the hash it is filed under and its value.
type Entry[T comparable, V any] struct {
	Item T
	Hash uint32
	Val  V
}

// New returns an empty table with a seed of its own.
func New[T comparable, V any]() Table[T, V] {
	return Table[T, V]{seed: maphash.MakeSeed()}
}

// Hash returns the hash under which the table files item.
func (t *Table[T, V]) Hash(item T) uint32 { return hashItem(t.seed, item) }

// Len returns the number of items held.
func (t *Table[T, V]) Len() int { return t.index.count }

// Lookup returns the entry of item, whose hash is hash, and its id, or nil.
func (t *Table[T, V]) Lookup(item T, hash uint32) (*Entry[T, V], int32) {
	// The index's probe run is walked here rather than through a
	// callback per entry: this is the queues' hottest path.
	entries, start := t.index.run(hash)
	mask := uint32(len(entries) - 1)
	for i := start; entries != nil; i = (i + 1) & mask {
		e := entries[i]
		if e.slotPlus1 == 0 {
			break
		}
		if e.Hash == hash {
			if entry := t.entries.At(int(e.slotPlus1 - 1)); entry.Item == item {
				return entry, e.slotPlus1 - 1
			}
		}
	}
	return nil, -1
}

// At returns the entry with id, which must be held.
func (t *Table[T, V]) At(id int32) *Entry[T, V] { return t.entries.At(int(id)) }

// Insert files item, which the table must not hold, under hash with val and
// returns its entry and id.
func (t *Table[T, V]) Insert(item T, hash uint32, val V) (*Entry[T, V], int32) {
	var id int32
	var entry *Entry[T, V]
	if t.freePlus1 > 0 {
		id = int32(t.freePlus1 - 1)
		entry = t.entries.At(int(id))
		t.freePlus1 = entry.Hash
	} else {
		id = int32(t.entries.Len())
		t.entries.Push(Entry[T, V]{})
		entry = t.entries.At(int(id))
	}
	*entry = Entry[T, V]{Item: item, Hash: hash, Val: val}
	t.index.Insert(hash, id)
	return entry, id
}

// Remove forgets the item with id. It reports whether the table emptied
// after a burst and let go of its memory: only then can an array indexed
// by id, which is never longer than the table once was, have grown beyond
// a chunk, so only then need its owner shrink it.
func (t *Table[T, V]) Remove(id int32) (shrunk bool) {
	entry := t.entries.At(int(id))
	t.index.Remove(entry.Hash, id)
	// The entry is cleared for the garbage collector and put on the free
	// list. Once the table is empty it lets go of its memory if it held
	// more than a chunk, so that a burst does not pin its memory. A table
	// that holds a few items at a time allocates nothing, and keeps its
	// entries on the free list when it empties rather than truncating
	// them: an Add/Get/Done cycle, which empties the table every time,
	// then refiles its item from the free list instead of appending it.
	*entry = Entry[T, V]{Hash: t.freePlus1}
	t.freePlus1 = uint32(id) + 1
	if t.index.count == 0 && t.entries.Len() > chunked.Size {
		t.Clear()
		return true
	}
	return false
}

// Clear empties the table and lets go of its memory.
func (t *Table[T, V]) Clear() {
	t.index.Reset()
	t.entries.Reset()
	t.freePlus1 = 0
}

// hashItem returns the 32-bit hash under which a slotIndex files item.
func hashItem[T comparable](seed maphash.Seed, item T) uint32 {
	sum := maphash.Comparable(seed, item)
	return uint32(sum ^ sum>>32)
}

// Verify checks an item table: every live entry is found by lookup
// under the hash of its item, free entries hold nothing but their link, and
// every entry is either live or free. It returns the first fault found.
// It is for tests, which call it after every step.
func Verify[T comparable, V comparable](t *Table[T, V]) error {
	free := map[int32]bool{}
	for next := t.freePlus1; next != 0; next = t.At(int32(next - 1)).Hash {
		id := int32(next - 1)
		if free[id] {
			return fmt.Errorf("free list loops at entry %d", id)
		}
		free[id] = true
		var zero T
		var zeroVal V
		if e := t.At(id); e.Item != zero || e.Val != zeroVal {
			return fmt.Errorf("free entry %d still holds %v, %v", id, e.Item, e.Val)
		}
	}
	live := 0
	for i := range t.entries.Len() {
		id := int32(i)
		if free[id] {
			continue
		}
		e := t.At(id)
		if e.Hash != t.Hash(e.Item) {
			return fmt.Errorf("entry %d has hash %x, its item %x", id, e.Hash, t.Hash(e.Item))
		}
		if _, got := t.Lookup(e.Item, e.Hash); got != id {
			return fmt.Errorf("entry %d is not found under its item %v", id, e.Item)
		}
		live++
	}
	if live != t.Len() {
		return fmt.Errorf("%d entries live, the table counts %d", live, t.Len())
	}
	return nil
}

// IsLive reports whether id is held, not free. It walks the free list: it
// is for tests.
func (t *Table[T, V]) IsLive(id int32) bool {
	if int(id) >= t.entries.Len() || id < 0 {
		return false
	}
	for next := t.freePlus1; next != 0; next = t.At(int32(next - 1)).Hash {
		if int32(next-1) == id {
			return false
		}
	}
	return true
}

// Chunks returns the number of chunks of entries the table holds memory
// for; it lets go of them all once it empties after a burst.
func (t *Table[T, V]) Chunks() int { return t.entries.Chunks() }

// IDLimit returns a bound on the ids: every id held is below it.
func (t *Table[T, V]) IDLimit() int32 { return int32(t.entries.Len()) }
