package workqueue

import "github.com/go-workqueue/workqueue/internal/list"

// fairNode is one node of a priority level's fairness tree. A level with no
// fairness dimensions is a single leaf; with d dimensions, the nodes at
// depth i < d have one child per key of dimension i+1 that has, or lately
// had, items queued, and the leaves, at depth d, list their items.
//
// A leaf lists its queued items, oldest first, by their ids in the queue's
// item table. An inner
// node keeps its active children (those with items queued) in a rotation,
// a doubly linked list: the first is next in turn, and a child joins at the
// back when it becomes active and moves there when it has had its turn.
// Children with nothing queued stay in children for reuse, until more than
// maxIdleKeys + active of them pile up and are dropped together.
//
// Invariant: n is the number of items queued below the node; a child is in
// its parent's rotation if and only if its n is positive.
type fairNode struct {
	n    int
	leaf bool

	// A leaf's list of queued items.
	list list.IDs

	// An inner node's children by key, and its rotation.
	children     map[string]*fairNode
	first, last  *fairNode
	active, idle int

	// As a child: its parent, key and neighbours in the parent's rotation.
	parent     *fairNode
	key        string
	prev, next *fairNode
}

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
		c = &fairNode{leaf: leaf, list: list.New(), parent: n, key: key}
		n.children[key] = c
		n.idle++
	}
	if c.n == 0 {
		n.idle--
		n.active++
		n.append(c)
	}
	return c
}

// append puts c at the back of the rotation.
func (n *fairNode) append(c *fairNode) {
	c.prev, c.next = n.last, nil
	if n.last != nil {
		n.last.next = c
	} else {
		n.first = c
	}
	n.last = c
}

// detach takes c out of the rotation.
func (n *fairNode) detach(c *fairNode) {
	if c.prev != nil {
		c.prev.next = c.next
	} else {
		n.first = c.next
	}
	if c.next != nil {
		c.next.prev = c.prev
	} else {
		n.last = c.prev
	}
	c.prev, c.next = nil, nil
}

// deactivate takes c, whose last queued item has left, out of the rotation,
// and drops the idle children once too many pile up.
func (n *fairNode) deactivate(c *fairNode) {
	n.detach(c)
	n.active--
	n.idle++
	if n.idle > maxIdleKeys+n.active {
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
		if p := c.parent; p.last != c {
			p.detach(c)
			p.append(c)
		}
	}
}
