package workqueue

import (
	"cmp"
	"slices"

	"github.com/go-workqueue/workqueue/internal/chunked"
	"github.com/go-workqueue/workqueue/internal/grouped"
	"github.com/go-workqueue/workqueue/internal/list"
	"github.com/go-workqueue/workqueue/internal/table"
)

// priorityOrder hands out the item of the highest priority first; within a
// priority, first in, first out, or in turns of the fairness keys; and,
// with MaxWait, an item ready for longer than that before any other.
//
// Invariant (verifyPriorityOrder checks it): each queued id is listed once,
// in the leaf of the level of its priority that its fairness keys name,
// and, with MaxWait, in the age list, in the order the ids became ready;
// no other id is listed.
type priorityOrder[T comparable] struct {
	items    *table.Table[T, record]
	fairness []func(T) string
	// weights gives, by dimension, the weights of the fairness keys; nil
	// or shorter than fairness for weights of 1.
	weights []func(key string) int

	// levels holds the levels, lowest priority first; the empty ones are
	// kept for reuse up to maxIdleLevels.
	levels     []*prioLevel
	idleLevels int
	// priorities holds by id the priority of each held item's pending add.
	priorities chunked.Array[int]
	// links holds the leaves' lists; with Fairness, leaves holds by id the
	// leaf that lists each queued item. Both live beside the records,
	// not in them, so that a queue without fairness pays nothing for it.
	links  list.Links
	leaves chunked.Array[*fairNode]

	// With MaxWait (in nanoseconds; 0 for none): the queued ids in the
	// order they became ready, each with the time it did, from now.
	maxWait    int64
	now        func() int64
	ages       list.IDs
	ageLinks   list.Links
	readySince chunked.Array[int64]

	// With group limits (groups not nil), each leaf lists its ids in a
	// groupedList, by the sequence number of their enqueue (seqs), and
	// with MaxWait so does groupedAges, by that of their queue
	// (ageSeqs), instead of ages.
	groups      *groupSet[T]
	seqs        chunked.Array[uint64]
	ageSeqs     chunked.Array[uint64]
	seq         uint64
	groupedAges *grouped.List
	unblocking  []*grouped.Sub // unblock's scratch
}

// maxIdleLevels is how many empty levels the queue keeps for reuse, so that
// a level that empties and fills again, as in an Add/Get/Done loop, costs
// no allocation and keeps its fairness keys.
const maxIdleLevels = 16

// prioLevel holds the queued items of one priority.
type prioLevel struct {
	priority int
	root     fairNode
}

// priority returns the priority of the held item with id.
func (o *priorityOrder[T]) priority(id int32) int { return *o.priorities.At(int(id)) }

// setPriority sets the priority of the held item with id, which is not
// queued.
func (o *priorityOrder[T]) setPriority(id int32, priority int) {
	for o.priorities.Len() <= int(id) {
		o.priorities.Push(0)
	}
	*o.priorities.At(int(id)) = priority
}

// queue puts id at the back of its level and, with MaxWait, of the age
// list, as ready since now: only then does it read the clock.
func (o *priorityOrder[T]) queue(id int32) {
	o.enqueue(id)
	if o.maxWait > 0 {
		for o.readySince.Len() <= int(id) {
			o.readySince.Push(0)
		}
		*o.readySince.At(int(id)) = o.now()
		if o.groups != nil {
			o.setSeq(&o.ageSeqs, id)
			o.groupedAges.Push(id, &o.groups.of(id).Group)
		} else {
			o.ages.PushBack(&o.ageLinks, id)
		}
	}
}

// setSeq gives id the next sequence number in seqs.
func (o *priorityOrder[T]) setSeq(seqs *chunked.Array[uint64], id int32) {
	for seqs.Len() <= int(id) {
		seqs.Push(0)
	}
	o.seq++
	*seqs.At(int(id)) = o.seq
}

// raise moves the queued id to the back of the level of priority, higher
// than its own; its place in the age list stays.
func (o *priorityOrder[T]) raise(id int32, priority int) {
	o.dequeue(id, o.leafOf(id)) // before the priority changes the leaf
	*o.priorities.At(int(id)) = priority
	o.enqueue(id)
}

func (o *priorityOrder[T]) next() int32 {
	id, leaf := o.nextID()
	o.unqueueFrom(id, leaf)
	return id
}

func (o *priorityOrder[T]) unqueue(id int32) { o.unqueueFrom(id, o.leafOf(id)) }

// empty lets go of the side arrays a burst made grow.
func (o *priorityOrder[T]) empty() {
	o.links.Shrink()
	o.ageLinks.Shrink()
	o.leaves.Shrink()
	o.priorities.Shrink()
	o.readySince.Shrink()
	if o.groups != nil {
		o.seqs.Shrink()
		o.ageSeqs.Shrink()
		o.groups.byID.Shrink()
	}
}

// block takes the queued items of g, whose slots are all taken, out of the
// running.
func (o *priorityOrder[T]) block(g *group) {
	for _, s := range g.Subs() {
		if leaf, _ := s.List().Owner.(*fairNode); leaf != nil {
			o.countLevel(leaf.count(0, -s.Len()))
		}
	}
	g.Close()
}

// unblock puts the queued items of g, which has a free slot again, back in
// the running. Keys that join a rotation at once join in the order of their
// oldest item of g, so that the order does not depend on the order of g's
// lists.
func (o *priorityOrder[T]) unblock(g *group) {
	g.Reopen()
	subs := g.Subs()
	if len(subs) > 1 {
		o.unblocking = append(o.unblocking[:0], subs...) // the order must not depend on that of g's lists
		slices.SortFunc(o.unblocking, func(a, b *grouped.Sub) int {
			return cmp.Compare(a.FirstKey(), b.FirstKey())
		})
		subs = o.unblocking
		defer clear(o.unblocking)
	}
	for _, s := range subs {
		if leaf, _ := s.List().Owner.(*fairNode); leaf != nil {
			o.countLevel(leaf.count(0, s.Len()))
		}
	}
}

// enqueue puts id at the back of its priority's level: of its leaf's list,
// whose fairness keys join their rotations at the back if they had
// nothing queued.
func (o *priorityOrder[T]) enqueue(id int32) {
	level := o.level(o.priority(id))
	node := &level.root
	for d, key := range o.fairness {
		node = node.child(key(o.items.At(id).Item), d+1 == len(o.fairness), o.weightsAt(d+1))
	}
	if len(o.fairness) > 0 {
		for o.leaves.Len() <= int(id) {
			o.leaves.Push(nil)
		}
		*o.leaves.At(int(id)) = node
	}
	if o.groups == nil {
		node.items.PushBack(&o.links, id)
		if node.parent == nil { // no fairness: the root is the leaf, and no rotation turns
			node.n++
			if node.total++; node.total == 1 {
				o.idleLevels--
			}
			return
		}
		o.countLevel(node.countReady(1))
		return
	}
	if node.grouped == nil {
		node.grouped = newGroupedList(&o.links, &o.seqs, node)
	}
	g := o.groups.of(id)
	o.setSeq(&o.seqs, id)
	node.grouped.Push(id, &g.Group)
	o.countLevel(node.count(1, readyCount(g)))
}

// weightsAt returns the weights of the keys of dimension d, nil for none.
func (o *priorityOrder[T]) weightsAt(d int) func(string) int {
	if d < len(o.weights) {
		return o.weights[d]
	}
	return nil
}

// readyCount is 1 if g has a free slot, 0 if not: what an item of g adds
// to the items that can be handed out.
func readyCount(g *group) int {
	if g.open() {
		return 1
	}
	return 0
}

// countLevel counts a level that began or ceased to hold items, and drops
// the empty levels once too many pile up.
func (o *priorityOrder[T]) countLevel(change int) {
	switch change {
	case 1:
		o.idleLevels--
	case -1:
		o.idleLevels++
		o.dropIdleLevels()
	}
}

// leafOf returns the leaf whose list holds the queued id.
func (o *priorityOrder[T]) leafOf(id int32) *fairNode {
	if len(o.fairness) > 0 {
		return *o.leaves.At(int(id))
	}
	return &o.level(o.priority(id)).root
}

// dequeue takes the queued id out of leaf, the leaf that lists it; keys
// left with nothing queued leave their rotations.
func (o *priorityOrder[T]) dequeue(id int32, leaf *fairNode) {
	if len(o.fairness) > 0 {
		*o.leaves.At(int(id)) = nil
	}
	if o.groups == nil {
		leaf.items.Remove(&o.links, id)
		if leaf.parent == nil {
			leaf.n--
			if leaf.total--; leaf.total == 0 {
				o.countLevel(-1)
			}
			return
		}
		o.countLevel(leaf.countReady(-1))
		return
	}
	g := o.groups.of(id)
	leaf.grouped.Remove(id, &g.Group)
	o.countLevel(leaf.count(-1, -readyCount(g)))
}

// unqueueFrom takes the queued id out of leaf, the leaf that lists it, and
// out of the age list.
func (o *priorityOrder[T]) unqueueFrom(id int32, leaf *fairNode) {
	o.dequeue(id, leaf)
	switch {
	case o.maxWait == 0:
	case o.groups != nil:
		o.groupedAges.Remove(id, &o.groups.of(id).Group)
	default:
		o.ages.Remove(&o.ageLinks, id)
	}
}

// level returns the level of priority, making it if needed.
func (o *priorityOrder[T]) level(priority int) *prioLevel {
	// A binary search written out: slices.BinarySearchFunc calls its
	// comparison closure at every step, and a raise looks up two levels.
	lo, hi := 0, len(o.levels)
	for lo < hi {
		if m := int(uint(lo+hi) >> 1); o.levels[m].priority < priority {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo < len(o.levels) && o.levels[lo].priority == priority {
		return o.levels[lo]
	}
	i := lo
	l := &prioLevel{priority: priority, root: fairNode{leaf: len(o.fairness) == 0, items: list.New(), weight: o.weightsAt(0)}}
	o.levels = slices.Insert(o.levels, i, l)
	o.idleLevels++
	return l
}

// dropIdleLevels forgets the empty levels once more than maxIdleLevels are
// kept, so that many distinct priorities do not pin memory.
func (o *priorityOrder[T]) dropIdleLevels() {
	if o.idleLevels <= maxIdleLevels {
		return
	}
	o.levels = slices.DeleteFunc(o.levels, func(l *prioLevel) bool { return l.root.total == 0 })
	o.idleLevels = 0
}

// nextID returns the id to hand out next, at least one being queued, and
// the leaf that lists it, and turns the fairness rotations it passes,
// unless the item is overdue.
func (o *priorityOrder[T]) nextID() (int32, *fairNode) {
	if o.maxWait > 0 {
		if oldest := o.oldest(); oldest >= 0 && o.now()-*o.readySince.At(int(oldest)) >= o.maxWait {
			return oldest, o.leafOf(oldest) // out of turn: the rotations stay as they are
		}
	}
	var level *prioLevel
	for i := len(o.levels) - 1; ; i-- {
		if level = o.levels[i]; level.root.n > 0 {
			break
		}
	}
	node := &level.root
	for !node.leaf {
		node = node.rotation.Front()
	}
	if len(o.weights) == 0 {
		for c := node; c.parent != nil; c = c.parent { // turn, without weights: the loop inlines
			c.parent.rotation.MoveToBack(c)
		}
	} else {
		node.turn()
	}
	if node.grouped != nil {
		return node.grouped.First(), node
	}
	return node.items.Head(), node
}

// oldest returns, with MaxWait, the id that became ready first among those
// that can be handed out; -1 with none.
func (o *priorityOrder[T]) oldest() int32 {
	switch {
	case o.groups == nil:
		return o.ages.Head()
	case o.groupedAges.Eligible() > 0:
		return o.groupedAges.First()
	}
	return -1
}

// first returns the first n queued ids in the order next would return them
// if called again and again now: with MaxWait, the overdue ones first,
// then each priority from the highest, each in turn of its fairness keys.
// It takes O(n log n) steps without fairness, and O(n²) at most with it,
// plus one step per overdue item skipped.
func (o *priorityOrder[T]) first(n int) []int32 {
	var out []int32
	overdue := func(int32) bool { return false }
	if o.maxWait > 0 {
		cutoff := o.now() - o.maxWait
		overdue = func(id int32) bool { return *o.readySince.At(int(id)) <= cutoff }
		if o.groups != nil {
			for _, id := range o.groupedAges.Walk(n) {
				if !overdue(id) {
					break
				}
				out = append(out, id)
			}
		} else {
			for id := o.ages.Head(); id >= 0 && len(out) < n && overdue(id); id = o.ageLinks.Next(id) {
				out = append(out, id)
			}
		}
	}
	for i := len(o.levels) - 1; i >= 0 && len(out) < n; i-- {
		c := &fairCursor{node: &o.levels[i].root, id: -1}
		for len(out) < n {
			id := o.step(c, n, overdue)
			if id < 0 {
				break
			}
			out = append(out, id)
		}
	}
	return out
}

// fairCursor walks a fairness tree in hand-out order without changing it.
type fairCursor struct {
	node      *fairNode
	turnsLeft int // as the node's, in the walk
	started   bool
	id        int32           // a leaf's next item
	walker    *grouped.Walker // with group limits, a leaf's items instead
	turns     []*fairCursor   // an inner node's children, next in turn first
}

// step returns the id of the next item below c.node in hand-out order that
// skip does not reject, or -1 when there is none. budget bounds how many
// children in turn it considers: the caller stops after n items, and the
// children that have only items to skip have overdue items listed before.
func (o *priorityOrder[T]) step(c *fairCursor, budget int, skip func(id int32) bool) int32 {
	if !c.started {
		c.started = true
		c.id = c.node.items.Head()
		if c.node.grouped != nil {
			c.walker, c.id = c.node.grouped.Walker(), -1
		}
		for child := c.node.rotation.Front(); child != nil && len(c.turns) < budget; child = c.node.rotation.Next(child) {
			c.turns = append(c.turns, &fairCursor{node: child, turnsLeft: child.turnsLeft, id: -1})
		}
	}
	if c.node.leaf {
		for c.walker != nil {
			id := c.walker.Next()
			if id < 0 {
				break
			}
			if !skip(id) {
				return id
			}
		}
		for c.id >= 0 {
			id := c.id
			c.id = o.links.Next(id)
			if !skip(id) {
				return id
			}
		}
		return -1
	}
	for len(c.turns) > 0 {
		child := c.turns[0]
		id := o.step(child, budget, skip)
		if id < 0 { // an emptied child drops out at its next turn
			c.turns = c.turns[1:]
			continue
		}
		if child.turnsLeft--; child.turnsLeft <= 0 {
			c.turns = append(c.turns[1:], child)
			child.turnsLeft = c.node.weightOf(child.node.key)
		}
		return id
	}
	return -1
}
