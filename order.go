package workqueue

import (
	"github.com/go-workqueue/workqueue/internal/ring"

	"github.com/go-workqueue/workqueue/internal/chunked"
	"github.com/go-workqueue/workqueue/internal/grouped"
	"github.com/go-workqueue/workqueue/internal/list"
	"github.com/go-workqueue/workqueue/internal/table"
)

// The hand-out orders of Typed: first in, first out (fifoOrder), custom
// storage (storageOrder), and first in, first out past the groups at their
// limit (groupedFIFO). The priority queue's order, with its fairness tree,
// is in priority_order.go and fair.go. The core's interfaces to an order,
// handOutOrder and groupedOrder, are in core.go.

// Queue is custom storage for [Typed], called under its lock: Push for
// an item not stored, Touch for a stored one added again, Pop only when Len is
// positive. Pop must return an item pushed and not popped, or Get panics.
// Items it holds at construction are added in the order it pops them.
type Queue[T comparable] interface {
	Touch(item T)
	Push(item T)
	Len() int
	Pop() (item T)
}

// DefaultQueue returns FIFO storage; it is not safe for concurrent use.
func DefaultQueue[T comparable]() Queue[T] {
	return new(ring.Ring[T])
}

// fifoOrder hands out items first in, first out.
type fifoOrder struct {
	list  list.IDs
	links list.Links
}

func (o *fifoOrder) queue(id int32)   { o.list.PushBack(&o.links, id) }
func (o *fifoOrder) next() int32      { return o.list.PopFront(&o.links) }
func (o *fifoOrder) unqueue(id int32) { o.list.Remove(&o.links, id) }
func (o *fifoOrder) empty()           { o.links.Shrink() }

func (o *fifoOrder) first(n int) []int32 {
	var ids []int32
	for id := o.list.Head(); id >= 0 && len(ids) < n; id = o.links.Next(id) {
		ids = append(ids, id)
	}
	return ids
}

// storageOrder hands out items in the order of the user's storage. The
// storage cannot take an item out of its middle, so an item the core
// unqueues stays stored, in removed, until Pop returns it and it is
// skipped, or until it is queued again and keeps its place.
type storageOrder[T comparable] struct {
	storage Queue[T]
	items   *table.Table[T, record]
	removed map[T]struct{}
}

func (o *storageOrder[T]) queue(id int32) { o.store(o.items.At(id).Item) }

// store puts item in the storage, or, if it is still there, removed,
// takes it back where it is.
func (o *storageOrder[T]) store(item T) {
	if _, ok := o.removed[item]; ok {
		o.storage.Touch(item)
		delete(o.removed, item)
		return
	}
	o.storage.Push(item)
}

func (o *storageOrder[T]) next() int32 {
	for {
		item := o.storage.Pop()
		if _, ok := o.removed[item]; ok {
			delete(o.removed, item)
			continue
		}
		entry, id := o.items.Lookup(item, o.items.Hash(item))
		if entry == nil || entry.Val.processing || entry.Val.pending != pendingReady {
			panic("workqueue: the queue's storage popped an item that was not queued in it")
		}
		return id
	}
}

func (o *storageOrder[T]) unqueue(id int32) {
	if o.removed == nil {
		o.removed = make(map[T]struct{})
	}
	o.removed[o.items.At(id).Item] = struct{}{}
}

// touch tells the storage that the queued id was added again.
func (o *storageOrder[T]) touch(id int32) { o.storage.Touch(o.items.At(id).Item) }

func (o *storageOrder[T]) first(int) []int32 { return nil }
func (o *storageOrder[T]) empty()            {}

// groupedFIFO hands out items first in, first out, passing over the groups
// without a free slot.
type groupedFIFO[T comparable] struct {
	groups *groupSet[T]
	list   *grouped.List
	links  list.Links
	seqs   chunked.Array[uint64] // by id: when it was queued
	seq    uint64
}

func newGroupedFIFO[T comparable](groups *groupSet[T]) *groupedFIFO[T] {
	o := &groupedFIFO[T]{groups: groups}
	o.list = newGroupedList(&o.links, &o.seqs, nil)
	return o
}

func (o *groupedFIFO[T]) queue(id int32) {
	for o.seqs.Len() <= int(id) {
		o.seqs.Push(0)
	}
	o.seq++
	*o.seqs.At(int(id)) = o.seq
	o.list.Push(id, &o.groups.of(id).Group)
}

func (o *groupedFIFO[T]) next() int32 {
	id := o.list.First()
	o.list.Remove(id, &o.groups.of(id).Group)
	return id
}

func (o *groupedFIFO[T]) unqueue(id int32)    { o.list.Remove(id, &o.groups.of(id).Group) }
func (o *groupedFIFO[T]) first(n int) []int32 { return o.list.Walk(n) }

func (o *groupedFIFO[T]) empty() {
	o.links.Shrink()
	o.seqs.Shrink()
	o.groups.byID.Shrink()
}

func (o *groupedFIFO[T]) block(g *group)   { g.Close() }
func (o *groupedFIFO[T]) unblock(g *group) { g.Reopen() }
