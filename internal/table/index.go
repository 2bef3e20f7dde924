package table

// slotIndex finds the slot of an item by the item's 32-bit hash. It is an
// extendible hash table: a directory, indexed by the top bits of the hash,
// points to tables of at most maxIndexTable entries probed linearly from
// the low bits. Each entry keeps the hash it was filed under, so growing or
// splitting a table never reads or rehashes an item; the stored hash also
// filters out almost every non-matching entry before the caller compares
// items. A table that fills up is split in two, so an insert moves at most
// maxIndexTable entries: no caller stalls behind a rehash of the whole
// index, which is what a flat table would do when it doubles.
//
// Compared with a Go map keyed by the item, an insert after a failed lookup
// hashes the item once instead of twice, and growth hashes nothing.
//
// The zero value is an empty index. It is not safe for concurrent use.
type slotIndex struct {
	dir   []*indexTable // 1 << depth entries; several may share a table
	depth uint8         // bits of the hash that pick a directory entry
	count int
}

const (
	minIndexTable = 8
	maxIndexTable = 1024
	// maxIndexDepth is the most hash bits a directory uses: the rest pick
	// the position in a full-sized table.
	maxIndexDepth = 32 - 10
)

// indexTable holds the entries whose hashes share their top depth bits.
type indexTable struct {
	depth   uint8 // bits of the hash that all entries share
	used    int
	entries []indexEntry // power-of-two length
}

// indexEntry files slot+1 (0 marks an empty entry) under hash.
type indexEntry struct {
	Hash      uint32
	slotPlus1 int32
}

// table returns the table that holds hash.
func (x *slotIndex) table(hash uint32) *indexTable {
	return x.dir[x.dirIndex(hash)]
}

func (x *slotIndex) dirIndex(hash uint32) uint32 {
	if x.depth == 0 {
		return 0
	}
	return hash >> (32 - x.depth)
}

// run returns the entries of the table that holds hash and the position
// where hash's probe run starts, or nil if the index is empty. Callers
// walk the run: entries from start on, wrapping around, up to the first
// empty one (slotPlus1 0).
func (x *slotIndex) run(hash uint32) (entries []indexEntry, start uint32) {
	if x.count == 0 {
		return nil, 0
	}
	entries = x.table(hash).entries
	return entries, hash & uint32(len(entries)-1)
}

// Insert files slot under hash. The caller makes sure that slot is not
// filed already.
func (x *slotIndex) Insert(hash uint32, slot int32) {
	if x.dir == nil {
		x.dir = []*indexTable{newIndexTable(0, minIndexTable)}
	}
	t := x.table(hash)
	for (t.used+1)*8 > len(t.entries)*7 { // keep tables at most 7/8 full
		// A split may leave every entry on one side: try again.
		x.grow(t, hash)
		t = x.table(hash)
	}
	t.put(indexEntry{Hash: hash, slotPlus1: slot + 1})
	x.count++
}

// Remove takes slot, filed under hash, out of the index. It does nothing if
// the slot is not filed.
func (x *slotIndex) Remove(hash uint32, slot int32) {
	if x.count == 0 {
		return
	}
	t := x.table(hash)
	mask := uint32(len(t.entries) - 1)
	i := hash & mask
	for {
		e := t.entries[i]
		if e.slotPlus1 == 0 {
			return
		}
		if e.slotPlus1 == slot+1 {
			break
		}
		i = (i + 1) & mask
	}
	// Backward-shift deletion: move later entries of the probe run into the
	// hole when the hole lies between their home and where they are, so
	// that no lookup stops early at it.
	for j := (i + 1) & mask; ; j = (j + 1) & mask {
		e := t.entries[j]
		if e.slotPlus1 == 0 {
			break
		}
		home := e.Hash & mask
		if (j-home)&mask >= (j-i)&mask {
			t.entries[i] = e
			i = j
		}
	}
	t.entries[i] = indexEntry{}
	t.used--
	x.count--
}

// Reset empties the index and lets go of its memory.
func (x *slotIndex) Reset() {
	*x = slotIndex{}
}

// grow makes room in t, the table that holds hash: it doubles a table
// below the full size and splits a full-sized one in two by the next bit of
// the hash. Once a table's depth uses every hash bit above a full table's
// probe bits, it can only double.
func (x *slotIndex) grow(t *indexTable, hash uint32) {
	if len(t.entries) < maxIndexTable || t.depth == maxIndexDepth {
		bigger := newIndexTable(t.depth, 2*len(t.entries))
		bigger.moveFrom(t)
		x.replace(t, hash, bigger, bigger)
		return
	}
	if t.depth == x.depth {
		doubled := make([]*indexTable, 2*len(x.dir))
		for i, table := range x.dir {
			doubled[2*i], doubled[2*i+1] = table, table
		}
		x.dir = doubled
		x.depth++
	}
	low, high := newIndexTable(t.depth+1, maxIndexTable), newIndexTable(t.depth+1, maxIndexTable)
	bit := uint32(1) << (31 - t.depth)
	for _, e := range t.entries {
		if e.slotPlus1 == 0 {
			continue
		}
		if e.Hash&bit == 0 {
			low.put(e)
		} else {
			high.put(e)
		}
	}
	x.replace(t, hash, low, high)
}

// replace points the directory entries of old, the table that held hash,
// at low and high: the first half of them at low, the second at high.
func (x *slotIndex) replace(old *indexTable, hash uint32, low, high *indexTable) {
	span := uint32(1) << (x.depth - old.depth)
	first := x.dirIndex(hash) &^ (span - 1)
	for i := range span {
		if i < span/2 || low == high {
			x.dir[first+i] = low
		} else {
			x.dir[first+i] = high
		}
	}
}

func newIndexTable(depth uint8, size int) *indexTable {
	return &indexTable{depth: depth, entries: make([]indexEntry, size)}
}

func (t *indexTable) moveFrom(old *indexTable) {
	for _, e := range old.entries {
		if e.slotPlus1 != 0 {
			t.put(e)
		}
	}
}

func (t *indexTable) put(e indexEntry) {
	mask := uint32(len(t.entries) - 1)
	i := e.Hash & mask
	for t.entries[i].slotPlus1 != 0 {
		i = (i + 1) & mask
	}
	t.entries[i] = e
	t.used++
}
