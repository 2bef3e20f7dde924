package workqueue

import (
	"fmt"
)

// verifyPriorityQueue checks the priority queue's invariant: an item is in
// a level's lists if and only if its record is ready and not processing,
// at the level of its priority; it is in the delay heap if and only if its
// record waits for a delay; every count matches what it counts; and the
// fairness trees and the age list are well formed.
func verifyPriorityQueue[T comparable](q *TypedPriorityQueue[T]) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if err := verifyTable(&q.items); err != nil {
		return err
	}
	if err := checkHeap(q.waiting); err != nil {
		return fmt.Errorf("delay heap: %w", err)
	}
	if q.items.detached != 0 {
		return fmt.Errorf("%d detached records", q.items.detached)
	}
	queued, processing, delayed := 0, 0, 0
	for id := range int32(q.items.entries.len()) {
		if !q.items.isLive(id) {
			continue
		}
		e := q.items.at(id)
		r := &e.val
		if r.processing {
			processing++
		}
		inHeap := q.waiting.items.len() > 0
		if inHeap {
			w, _ := q.waiting.items.lookup(e.item, q.waiting.items.hash(e.item))
			inHeap = w != nil
		}
		if inHeap != (r.pending == pendingDelay) {
			return fmt.Errorf("item %v: pending %d, in the delay heap %v", e.item, r.pending, inHeap)
		}
		switch {
		case r.pending == pendingDelay:
			delayed++
		case !r.processing && r.pending == pendingNone:
			return fmt.Errorf("item %v: a record neither processing nor pending", e.item)
		case !r.processing && r.pending == pendingReady:
			queued++
			if len(q.fairness) > 0 && storedLeaf(q, id) == nil {
				return fmt.Errorf("item %v: queued without a leaf", e.item)
			}
		}
		if (r.processing || r.pending != pendingReady) && (storedLeaf(q, id) != nil || r.prev >= 0 || r.next >= 0 || ageLinked(q, id)) {
			return fmt.Errorf("item %v: linked, yet not queued", e.item)
		}
	}
	if q.leaves.len() > q.items.entries.len() || q.ages.len() > q.items.entries.len() {
		return fmt.Errorf("%d leaves and %d age links kept for %d records", q.leaves.len(), q.ages.len(), q.items.entries.len())
	}
	if len(q.fairness) == 0 && q.leaves.len() > 0 || q.maxWait == 0 && q.ages.len() > 0 {
		return fmt.Errorf("%d leaves and %d age links kept without the options", q.leaves.len(), q.ages.len())
	}
	if delayed != q.waiting.len() {
		return fmt.Errorf("%d records wait for a delay, the heap holds %d", delayed, q.waiting.len())
	}
	if queued != q.queued || processing != q.processing {
		return fmt.Errorf("records: %d queued, %d processing; counts: %d, %d", queued, processing, q.queued, q.processing)
	}
	if q.shuttingDown.Load() && q.waiting.len() > 0 {
		return fmt.Errorf("shut down with %d items waiting for a delay", q.waiting.len())
	}
	listed, idle := 0, 0
	for i, level := range q.levels {
		if i > 0 && q.levels[i-1].priority >= level.priority {
			return fmt.Errorf("levels out of order: %d before %d", q.levels[i-1].priority, level.priority)
		}
		if level.root.n == 0 {
			idle++
		}
		n, err := verifyFairNode(q, &level.root, level.priority, 0)
		if err != nil {
			return fmt.Errorf("level %d: %w", level.priority, err)
		}
		listed += n
	}
	if listed != queued || idle != q.idleLevels || idle > maxIdleLevels {
		return fmt.Errorf("levels list %d items, %d queued; %d empty levels, counted %d", listed, queued, idle, q.idleLevels)
	}
	if q.maxWait > 0 {
		n, prev, last := 0, int32(-1), int64(-1<<63)
		for id := q.ageHead; id >= 0; id = q.ages.at(int(id)).next {
			r, link := &q.items.at(id).val, q.ages.at(int(id))
			if link.prev != prev || link.readySince < last || r.processing || r.pending != pendingReady {
				return fmt.Errorf("age list broken at id %d", id)
			}
			n, prev, last = n+1, id, link.readySince
		}
		if n != queued || q.ageTail != prev {
			return fmt.Errorf("age list holds %d items, %d queued", n, queued)
		}
	} else if q.ageHead >= 0 || q.ageTail >= 0 {
		return fmt.Errorf("age list used without MaxWait")
	}
	return verifySleepers(&q.sleepers, q.wakeupsPending, queued, q.shuttingDown.Load())
}

// verifyFairNode checks the subtree of node at depth and returns how many
// items its leaves list.
func verifyFairNode[T comparable](q *TypedPriorityQueue[T], node *fairNode, priority, depth int) (int, error) {
	if node.leaf != (depth == len(q.fairness)) {
		return 0, fmt.Errorf("node at depth %d of %d: leaf %v", depth, len(q.fairness), node.leaf)
	}
	if node.leaf {
		n, prev := 0, int32(-1)
		for id := node.head; id >= 0; id = q.items.at(id).val.next {
			r := &q.items.at(id).val
			if r.prev != prev || len(q.fairness) > 0 && storedLeaf(q, id) != node || r.priority != priority || r.processing || r.pending != pendingReady {
				return 0, fmt.Errorf("leaf %q: list broken at id %d", node.key, id)
			}
			if d := len(q.fairness) - 1; d >= 0 && q.fairness[d](q.items.at(id).item) != node.key {
				return 0, fmt.Errorf("leaf %q lists %v", node.key, q.items.at(id).item)
			}
			n, prev = n+1, id
		}
		if node.tail != prev || node.n != n {
			return 0, fmt.Errorf("leaf %q: lists %d items, counts %d", node.key, n, node.n)
		}
		return n, nil
	}
	total, active := 0, 0
	var prev *fairNode
	for c := node.first; c != nil; c = c.next {
		if c.prev != prev || c.parent != node || c.n == 0 || node.children[c.key] != c {
			return 0, fmt.Errorf("node %q: rotation broken at %q", node.key, c.key)
		}
		active++
		prev = c
	}
	if node.last != prev || active != node.active {
		return 0, fmt.Errorf("node %q: rotation of %d, counted %d", node.key, active, node.active)
	}
	idle := 0
	for key, c := range node.children {
		if c.key != key {
			return 0, fmt.Errorf("node %q: child %q filed under %q", node.key, c.key, key)
		}
		if c.n == 0 {
			idle++
			if c.prev != nil || c.next != nil || node.first == c {
				return 0, fmt.Errorf("node %q: idle child %q in the rotation", node.key, key)
			}
		}
		n, err := verifyFairNode(q, c, priority, depth+1)
		if err != nil {
			return 0, err
		}
		total += n
	}
	if idle != node.idle || total != node.n {
		return 0, fmt.Errorf("node %q: %d idle children, counted %d; %d items, counted %d", node.key, idle, node.idle, total, node.n)
	}
	return total, nil
}

// storedLeaf returns the leaf the queue keeps for the item with id, nil if
// none.
func storedLeaf[T comparable](q *TypedPriorityQueue[T], id int32) *fairNode {
	if int(id) >= q.leaves.len() {
		return nil
	}
	return *q.leaves.at(int(id))
}

// ageLinked reports whether the item with id has neighbours in the age
// list.
func ageLinked[T comparable](q *TypedPriorityQueue[T], id int32) bool {
	if int(id) >= q.ages.len() {
		return false
	}
	link := q.ages.at(int(id))
	return link.prev >= 0 || link.next >= 0
}
