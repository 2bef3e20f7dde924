package workqueue

import "hash/maphash"

// itemTable gives each item it holds a small integer id and a value of type
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
// next insert. The zero value is not usable: call newItemTable. It is not
// safe for concurrent use; hash reads only the seed, so callers may hash
// before they take the lock that guards the rest.
type itemTable[T comparable, V any] struct {
	index   slotIndex
	entries chunked[tableEntry[T, V]]
	// freePlus1 is the id plus one of the first free entry, 0 if none; a
	// free entry's hash holds the next one the same way.
	freePlus1 uint32
	seed      maphash.Seed
}

type tableEntry[T comparable, V any] struct {
	item T
	hash uint32
	val  V
}

func newItemTable[T comparable, V any]() itemTable[T, V] {
	return itemTable[T, V]{seed: maphash.MakeSeed()}
}

// hash returns the hash under which the table files item.
func (t *itemTable[T, V]) hash(item T) uint32 { return hashItem(t.seed, item) }

// len returns the number of items held.
func (t *itemTable[T, V]) len() int { return t.index.count }

// lookup returns the entry of item, whose hash is hash, and its id, or nil.
func (t *itemTable[T, V]) lookup(item T, hash uint32) (*tableEntry[T, V], int32) {
	// The index's probe run, walked here rather than through a callback
	// per entry, which made the Add/Get/Done cycle 2.7 ns (4%) slower
	// (medians of 5 runs, 72.4 vs 69.6 ns).
	entries, start := t.index.run(hash)
	mask := uint32(len(entries) - 1)
	for i := start; entries != nil; i = (i + 1) & mask {
		e := entries[i]
		if e.slotPlus1 == 0 {
			break
		}
		if e.hash == hash {
			if entry := t.entries.at(int(e.slotPlus1 - 1)); entry.item == item {
				return entry, e.slotPlus1 - 1
			}
		}
	}
	return nil, -1
}

// at returns the entry with id, which must be held.
func (t *itemTable[T, V]) at(id int32) *tableEntry[T, V] { return t.entries.at(int(id)) }

// insert files item, which the table must not hold, under hash with val and
// returns its entry and id.
func (t *itemTable[T, V]) insert(item T, hash uint32, val V) (*tableEntry[T, V], int32) {
	entry := tableEntry[T, V]{item: item, hash: hash, val: val}
	var id int32
	if t.freePlus1 > 0 {
		id = int32(t.freePlus1 - 1)
		t.freePlus1 = t.entries.at(int(id)).hash
		*t.entries.at(int(id)) = entry
	} else {
		id = int32(t.entries.len())
		t.entries.push(entry)
	}
	t.index.insert(hash, id)
	return t.entries.at(int(id)), id
}

// remove forgets the item with id.
func (t *itemTable[T, V]) remove(id int32) {
	t.index.remove(t.entries.at(int(id)).hash, id)
	t.free(id)
}

// free clears the entry with id, which is in no index, and puts it on the
// free list. Once the table is empty it lets go of memory beyond the first
// chunk, so that a burst does not pin its memory, while a table that holds
// a few items at a time allocates nothing.
func (t *itemTable[T, V]) free(id int32) {
	*t.entries.at(int(id)) = tableEntry[T, V]{hash: t.freePlus1} // cleared for the garbage collector
	t.freePlus1 = uint32(id) + 1
	if t.index.count == 0 {
		t.freePlus1 = 0
		if t.entries.len() > chunkSize {
			t.clear()
		} else {
			t.entries.empty()
		}
	}
}

// clear empties the table and lets go of its memory.
func (t *itemTable[T, V]) clear() {
	t.index.reset()
	t.entries.reset()
	t.freePlus1 = 0
}

// hashItem returns the 32-bit hash under which a slotIndex files item.
func hashItem[T comparable](seed maphash.Seed, item T) uint32 {
	sum := maphash.Comparable(seed, item)
	return uint32(sum ^ sum>>32)
}
