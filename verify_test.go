package workqueue

import "fmt"

// The invariant checkers, one per concept, as container/heap's tests check
// a heap's. The model, fuzz and stress tests call them after every step.

// verifyQueue checks the invariants of q's core; see verifyCoreLocked. It
// takes the queue's lock.
func verifyQueue[T comparable](q *Typed[T]) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	return verifyCoreLocked(&q.core, func(*tableEntry[T, record]) bool { return false })
}

// verifyPriorityQueue checks the invariants of q: those of its core, of
// its hand-out order, and that an item waits in the delays if and only if
// its record says so, and none after a shutdown. It takes the queue's lock.
func verifyPriorityQueue[T comparable](q *TypedPriorityQueue[T]) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	heap := q.delays.heap
	if err := checkHeap(heap); err != nil {
		return fmt.Errorf("delay heap: %w", err)
	}
	inHeap := func(e *tableEntry[T, record]) bool {
		if heap.items.len() == 0 {
			return false
		}
		w, _ := heap.items.lookup(e.item, heap.items.hash(e.item))
		return w != nil
	}
	if err := verifyCoreLocked(&q.core, inHeap); err != nil {
		return err
	}
	waiting := 0
	for id := range int32(q.items.entries.len()) {
		if q.items.isLive(id) && q.items.at(id).val.pending == pendingDelay {
			waiting++
		}
	}
	if waiting != heap.len() {
		return fmt.Errorf("%d records wait for a delay, the heap holds %d", waiting, heap.len())
	}
	if q.shuttingDown.Load() && heap.len() > 0 {
		return fmt.Errorf("shut down with %d items waiting for a delay", heap.len())
	}
	return nil
}

// verifyCoreLocked checks a core, whose lock the caller holds: the item
// table is sound; every record is processing or has an add pending; the
// hand-out order lists exactly the queued records, each once, as the
// order's own checker says; an item waits for a delay (delayed says
// whether it is in the delays) if and only if its record says so; the
// counts match the records; enough sleeping Get callers are being woken
// for the queued items; and the in-flight list holds only items being
// processed.
func verifyCoreLocked[T comparable](c *core[T], delayed func(*tableEntry[T, record]) bool) error {
	if err := verifyTable(&c.items); err != nil {
		return err
	}
	queued, processing := map[int32]bool{}, 0
	for id := range int32(c.items.entries.len()) {
		if !c.items.isLive(id) {
			continue
		}
		e := c.items.at(id)
		r := e.val
		if !r.processing && r.pending == pendingNone {
			return fmt.Errorf("item %v: a record neither processing nor pending", e.item)
		}
		if r.processing {
			processing++
		}
		if !r.processing && r.pending == pendingReady {
			queued[id] = true
		}
		if delayed(e) != (r.pending == pendingDelay) {
			return fmt.Errorf("item %v: pending %d, waiting for a delay %v", e.item, r.pending, delayed(e))
		}
	}
	if len(queued) != c.queued || processing != c.processing {
		return fmt.Errorf("records: %d queued, %d processing; counts: %d, %d", len(queued), processing, c.queued, c.processing)
	}
	var err error
	switch o := c.order.(type) {
	case *fifoOrder:
		err = verifyListed(o.list, &o.links, queued, "the FIFO")
	case *storageOrder[T]:
		if stored := o.storage.Len() - len(o.removed); stored != c.queued {
			err = fmt.Errorf("storage holds %d items and %d removed ones, %d are queued", o.storage.Len(), len(o.removed), c.queued)
		}
		for item := range o.removed {
			if e, _ := c.items.lookup(item, c.items.hash(item)); e != nil && !e.val.processing && e.val.pending == pendingReady {
				err = fmt.Errorf("item %v is queued and marked removed in the storage", item)
			}
		}
	case *priorityOrder[T]:
		err = verifyPriorityOrder(o, queued)
	default:
		err = fmt.Errorf("unknown order %T", o)
	}
	if err != nil {
		return err
	}
	if err := verifyFlight(c); err != nil {
		return err
	}
	return verifySleepers(&c.sleepers, c.wakeupsPending, c.queued, c.shuttingDown.Load())
}

// verifyListed checks that list is sound and lists exactly the ids in want.
func verifyListed(list idList, links *idLinks, want map[int32]bool, name string) error {
	ids, err := verifyIDList(list, links)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if len(ids) != len(want) {
		return fmt.Errorf("%s lists %d ids, %d are queued", name, len(ids), len(want))
	}
	for _, id := range ids {
		if !want[id] {
			return fmt.Errorf("%s lists id %d, which is not queued", name, id)
		}
	}
	return nil
}

// verifyIDList checks a list's links both ways and its count, and returns
// its ids in order.
func verifyIDList(l idList, links *idLinks) ([]int32, error) {
	var ids []int32
	prev := int32(-1)
	for id := l.head; id >= 0; id = links.next(id) {
		if int(id) >= links.links.len() {
			return nil, fmt.Errorf("id %d has no links", id)
		}
		if got := links.links.at(int(id)).prev; got != prev {
			return nil, fmt.Errorf("id %d links back to %d, want %d", id, got, prev)
		}
		if ids = append(ids, id); len(ids) > links.links.len() {
			return nil, fmt.Errorf("the list loops")
		}
		prev = id
	}
	if prev != l.tail || len(ids) != l.n {
		return nil, fmt.Errorf("the list holds %d ids ending at %d, its count says %d ending at %d", len(ids), prev, l.n, l.tail)
	}
	return ids, nil
}

// verifySleepers checks the Get callers of a queue with queued items:
// none asleep while an item waits for a wakeup, and none after a shutdown.
func verifySleepers(line *waiterLine, wakeupsPending, queued int, shuttingDown bool) error {
	if err := verifyLine(line); err != nil {
		return err
	}
	if wakeupsPending < 0 {
		return fmt.Errorf("%d wakeups pending", wakeupsPending)
	}
	if line.n > 0 && queued > wakeupsPending {
		return fmt.Errorf("%d items queued, only %d Get callers woken, %d more asleep", queued, wakeupsPending, line.n)
	}
	if shuttingDown && line.n > 0 {
		return fmt.Errorf("shutting down, yet %d sleeping Get callers not woken", line.n)
	}
	return nil
}

// isLive reports whether id is held, not free. For tests: it walks the free
// list.
func (t *itemTable[T, V]) isLive(id int32) bool {
	if int(id) >= t.entries.len() || id < 0 {
		return false
	}
	for next := t.freePlus1; next != 0; next = t.at(int32(next - 1)).hash {
		if int32(next-1) == id {
			return false
		}
	}
	return true
}

// verifyLine checks that the line's links agree with its count and that
// no waiter in it is marked woken.
func verifyLine(l *waiterLine) error {
	n := 0
	var prev *getWaiter
	for w := l.head; w != nil; w = w.next {
		if w.prev != prev {
			return fmt.Errorf("waiter %d of the line links back to the wrong waiter", n)
		}
		if w.woken {
			return fmt.Errorf("waiter %d of the line is marked woken", n)
		}
		prev = w
		n++
	}
	if prev != l.tail || n != l.n {
		return fmt.Errorf("line holds %d waiters ending at %p, its count says %d ending at %p", n, prev, l.n, l.tail)
	}
	return nil
}

// verifyFlight checks the list of items in flight: it is sound, and it
// holds only items being processed, each once, oldest first, each marked
// linked, and no other id is marked linked.
func verifyFlight[T comparable](c *core[T]) error {
	f := &c.flight
	ids, err := verifyIDList(f.list, &f.links)
	if err != nil {
		return fmt.Errorf("in-flight list: %w", err)
	}
	for i, id := range ids {
		if !c.items.isLive(id) || !c.items.at(id).val.processing {
			return fmt.Errorf("in-flight id %d is not being processed", id)
		}
		if int(id) >= f.handouts.len() || !f.handouts.at(int(id)).linked {
			return fmt.Errorf("in-flight id %d is not marked linked", id)
		}
		if i > 0 && f.since(id).Before(f.since(ids[i-1])) {
			return fmt.Errorf("in-flight id %d was handed out before the one ahead of it", id)
		}
	}
	linked := 0
	for i := range f.handouts.len() {
		if f.handouts.at(i).linked {
			linked++
		}
	}
	if linked != len(ids) {
		return fmt.Errorf("%d ids marked linked, %d in the in-flight list", linked, len(ids))
	}
	if !f.tracking && len(ids) > 0 {
		return fmt.Errorf("%d items in flight listed without tracking", len(ids))
	}
	return nil
}

// verifyPriorityOrder checks o's invariant: every id in queued, and no
// other, is listed once, in the leaf its priority and fairness keys name;
// the levels are sorted, their fairness trees well formed and their counts
// right; and with MaxWait the age list holds the queued ids in the order
// they became ready.
func verifyPriorityOrder[T comparable](o *priorityOrder[T], queued map[int32]bool) error {
	listed, idle := map[int32]bool{}, 0
	for i, level := range o.levels {
		if i > 0 && o.levels[i-1].priority >= level.priority {
			return fmt.Errorf("levels out of order: %d before %d", o.levels[i-1].priority, level.priority)
		}
		if level.root.n == 0 {
			idle++
		}
		if _, err := verifyFairNode(o, &level.root, level.priority, 0, listed); err != nil {
			return fmt.Errorf("level %d: %w", level.priority, err)
		}
	}
	if len(listed) != len(queued) || idle != o.idleLevels || idle > maxIdleLevels {
		return fmt.Errorf("levels list %d items, %d queued; %d empty levels, counted %d", len(listed), len(queued), idle, o.idleLevels)
	}
	for id := range listed {
		if !queued[id] {
			return fmt.Errorf("id %d listed, yet not queued", id)
		}
	}
	if len(o.fairness) == 0 && o.leaves.len() > 0 {
		return fmt.Errorf("%d leaves kept without fairness", o.leaves.len())
	}
	for id := range o.leaves.len() {
		if leaf := *o.leaves.at(id); (leaf != nil) != queued[int32(id)] {
			return fmt.Errorf("id %d: leaf kept %v, queued %v", id, leaf != nil, queued[int32(id)])
		}
	}
	if o.maxWait == 0 {
		if o.ages.n > 0 || o.ageLinks.links.len() > 0 || o.readySince.len() > 0 {
			return fmt.Errorf("age list used without MaxWait")
		}
		return nil
	}
	if err := verifyListed(o.ages, &o.ageLinks, queued, "the age list"); err != nil {
		return err
	}
	last := int64(-1 << 63)
	for id := o.ages.head; id >= 0; id = o.ageLinks.next(id) {
		since := *o.readySince.at(int(id))
		if since < last {
			return fmt.Errorf("age list out of order at id %d", id)
		}
		last = since
	}
	return nil
}

// verifyFairNode checks the subtree of node at depth, adds the ids its
// leaves list to listed, and returns how many they are.
func verifyFairNode[T comparable](o *priorityOrder[T], node *fairNode, priority, depth int, listed map[int32]bool) (int, error) {
	if node.leaf != (depth == len(o.fairness)) {
		return 0, fmt.Errorf("node at depth %d of %d: leaf %v", depth, len(o.fairness), node.leaf)
	}
	if node.leaf {
		ids, err := verifyIDList(node.list, &o.links)
		if err != nil {
			return 0, fmt.Errorf("leaf %q: %w", node.key, err)
		}
		for _, id := range ids {
			if listed[id] {
				return 0, fmt.Errorf("leaf %q: id %d listed twice", node.key, id)
			}
			listed[id] = true
			if o.priority(id) != priority || len(o.fairness) > 0 && *o.leaves.at(int(id)) != node {
				return 0, fmt.Errorf("leaf %q: id %d of priority %d, or kept in another leaf", node.key, id, o.priority(id))
			}
			if d := len(o.fairness) - 1; d >= 0 && o.fairness[d](o.items.at(id).item) != node.key {
				return 0, fmt.Errorf("leaf %q lists %v", node.key, o.items.at(id).item)
			}
		}
		if node.n != len(ids) {
			return 0, fmt.Errorf("leaf %q: lists %d items, counts %d", node.key, len(ids), node.n)
		}
		return len(ids), nil
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
		n, err := verifyFairNode(o, c, priority, depth+1, listed)
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
