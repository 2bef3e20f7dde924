package workqueue

import (
	"github.com/go-workqueue/workqueue/internal/grouped"
	"github.com/go-workqueue/workqueue/internal/list"
)

// fairNode is one node of a priority level's fairness tree. A level with no
// fairness dimensions is a single leaf; with d dimensions, the nodes at
// depth i < d have one child per key of dimension i+1 that has, or lately
// had, items queued, and the leaves, at depth d, list their items.
//
// A leaf lists its queued items, oldest first, by their ids in the queue's
// item table. An inner node keeps its active children (those with items
// that can be handed out) in a rotation: the first is next in turn, and a
// child joins at the back when it becomes active and moves there when it
// has had its turn. Children with nothing queued stay in children for
// reuse, until more than maxIdleKeys + the others pile up and are dropped
// together.
//
// Invariant: total is the number of items queued below the node and n the
// number of those that can be handed out: all of them, unless the queue has
// group limits and some wait for a slot; a child is in its parent's
// rotation if and only if its n is positive, and counts as idle if and
// only if its total is zero.
type fairNode struct {
	n, total int
	leaf     bool

	// A leaf's list of queued items; with group limits, grouped lists
	// them instead, by group.
	items   list.IDs
	grouped *grouped.List

	// An inner node's children by key, its rotation, and how many of its
	// children have nothing queued; weight gives its children's weights,
	// nil for all 1.
	children map[string]*fairNode
	rotation list.Ptrs[fairNode, *fairNode]
	idle     int
	weight   func(key string) int
	// As a child in its parent's rotation: the turns it has left before
	// it moves to the back.
	turnsLeft int

	// As a child: its parent, its key and its place in the parent's
	// rotation.
	parent *fairNode
	key    string
	list.Elem[fairNode]
}

// Links returns n's place in its parent's rotation.
func (n *fairNode) Links() *list.Elem[fairNode] { return &n.Elem }

// maxIdleKeys is how many children without queued items an inner node keeps
// beyond its active ones, so that a key that empties and fills again, as
// in an Add/Get/Done loop, costs no allocation.
const maxIdleKeys = 1024

// child returns the child of n for key, making it if needed; the caller is
// about to queue an item below it and count it. leaf says whether children
// are leaves, and weight gives the weights of the child's own children.
func (n *fairNode) child(key string, leaf bool, weight func(string) int) *fairNode {
	c := n.children[key]
	if c == nil {
		if n.children == nil {
			n.children = make(map[string]*fairNode)
		}
		c = &fairNode{leaf: leaf, items: list.New(), parent: n, key: key, weight: weight}
		n.children[key] = c
		n.idle++
	}
	return c
}

// count adds dTotal queued items below leaf, dReady of them items that can
// be handed out, to the counts of leaf and of the nodes above it: a node
// joins its parent's rotation, at the back, when it gets items that can be
// handed out, and leaves it when it has none; an emptied child counts as
// idle, and the idle children are dropped once too many pile up. It returns
// the root's change of total from or to zero: +1 if it held nothing
// before, -1 if it holds nothing now.
func (leaf *fairNode) count(dTotal, dReady int) (rootChange int) {
	for n := leaf; ; n = n.parent {
		wasReady, wasTotal := n.n, n.total
		n.n += dReady
		n.total += dTotal
		p := n.parent
		if p == nil {
			switch {
			case wasTotal == 0 && n.total > 0:
				return 1
			case wasTotal > 0 && n.total == 0:
				return -1
			}
			return 0
		}
		switch {
		case wasReady == 0 && n.n > 0:
			p.rotation.PushBack(n)
			if p.weight != nil {
				n.turnsLeft = p.weightOf(n.key)
			}
		case wasReady > 0 && n.n == 0:
			p.rotation.Remove(n)
		}
		switch {
		case wasTotal == 0 && n.total > 0:
			p.idle--
		case wasTotal > 0 && n.total == 0:
			p.idle++
			p.dropIdle()
		}
	}
}

// countReady is count(d, d) for a queue without group limits, where every
// queued item can be handed out, so n and total are equal: the hot path of
// a fair queue's add and Get, with one test per node instead of two.
func (leaf *fairNode) countReady(d int) (rootChange int) {
	for n := leaf; ; n = n.parent {
		n.n += d
		n.total = n.n
		p := n.parent
		switch {
		case p == nil && n.n == 0:
			return -1
		case p == nil && n.n == d:
			return 1
		case p == nil:
			return 0
		case n.n == d: // it had nothing: it joins the rotation
			p.rotation.PushBack(n)
			if p.weight != nil {
				n.turnsLeft = p.weightOf(n.key)
			}
			p.idle--
		case n.n == 0:
			p.rotation.Remove(n)
			if p.idle++; p.idle > maxIdleKeys+len(p.children)-p.idle {
				p.dropIdle()
			}
		}
	}
}

// dropIdle drops the idle children once more than maxIdleKeys plus the
// others pile up.
func (n *fairNode) dropIdle() {
	if n.idle <= maxIdleKeys+len(n.children)-n.idle {
		return
	}
	for key, child := range n.children {
		if child.total == 0 {
			delete(n.children, key)
		}
	}
	n.idle = 0
}

// turn takes a turn of every node on the path from the root to the leaf n,
// which is about to hand out an item: a node whose turns are used up moves
// to the back of its parent's rotation, with its weight's turns again.
func (n *fairNode) turn() {
	for c := n; c.parent != nil; c = c.parent {
		p := c.parent
		if p.weight != nil {
			if c.turnsLeft--; c.turnsLeft > 0 {
				continue
			}
			c.turnsLeft = p.weightOf(c.key)
		}
		p.rotation.MoveToBack(c)
	}
}

// weightOf returns the weight of n's child key: 1 without weights, and for
// a weight below 1.
func (n *fairNode) weightOf(key string) int {
	if n.weight == nil {
		return 1
	}
	return max(n.weight(key), 1)
}
