package workqueue

import "github.com/go-workqueue/workqueue/internal/list"

// fairNode is one node of a priority level's fairness tree. A level with no
// fairness dimensions is a single leaf; with d dimensions, the nodes at
// depth i < d have one child per key of dimension i+1 that has, or lately
// had, items queued, and the leaves, at depth d, list their items.
//
// A leaf lists its queued items, oldest first, by their ids in the queue's
// item table. An inner node keeps its active children (those with items
// queued) in a rotation: the first is next in turn, and a child joins at
// the back when it becomes active and moves there when it has had its
// turn. Children with nothing queued stay in children for reuse, until
// more than maxIdleKeys + active of them pile up and are dropped together.
//
// Invariant: n is the number of items queued below the node; a child is in
// its parent's rotation if and only if its n is positive.
type fairNode struct {
	n    int
	leaf bool

	// A leaf's list of queued items.
	items list.IDs

	// An inner node's children by key, its rotation, and how many of its
	// children have nothing queued.
	children map[string]*fairNode
	rotation list.Ptrs[fairNode, *fairNode]
	idle     int

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

// child returns the child of n for key, making it if needed, and puts it in
// the rotation, at the back, if it is not there; the caller is about to
// queue an item below it. leaf says whether children are leaves.
func (n *fairNode) child(key string, leaf bool) *fairNode {
	c := n.children[key]
	if c == nil {
		if n.children == nil {
			n.children = make(map[string]*fairNode)
		}
		c = &fairNode{leaf: leaf, items: list.New(), parent: n, key: key}
		n.children[key] = c
		n.idle++
	}
	if c.n == 0 {
		n.idle--
		n.rotation.PushBack(c)
	}
	return c
}

// deactivate takes c, whose last queued item has left, out of the rotation,
// and drops the idle children once too many pile up.
func (n *fairNode) deactivate(c *fairNode) {
	n.rotation.Remove(c)
	n.idle++
	if n.idle > maxIdleKeys+n.rotation.Len() {
		for key, child := range n.children {
			if child.n == 0 {
				delete(n.children, key)
			}
		}
		n.idle = 0
	}
}

// turn moves every node on the path from the root to the leaf n to the back
// of its parent's rotation: the leaf is about to hand out an item.
func (n *fairNode) turn() {
	for c := n; c.parent != nil; c = c.parent {
		c.parent.rotation.MoveToBack(c)
	}
}
