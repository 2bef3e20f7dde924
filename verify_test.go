package workqueue

import (
	"fmt"
	"maps"
	"slices"

	"github.com/go-workqueue/workqueue/internal/delayheap"
	"github.com/go-workqueue/workqueue/internal/list"
	"github.com/go-workqueue/workqueue/internal/lock"
	"github.com/go-workqueue/workqueue/internal/table"
)

// The invariant checkers, one per concept, as container/heap's tests check
// a heap's. The model, fuzz and stress tests call them after every step.

// verifyQueue checks the invariants of q's core; see verifyCoreLocked. It
// takes the queue's lock.
func verifyQueue[T comparable](q *Typed[T]) error {
	q.core.mu.Lock()
	defer q.core.mu.Unlock()
	return verifyCoreLocked(&q.core)
}

// verifyPriorityQueue checks the invariants of q's core; see
// verifyCoreLocked. It takes the queue's lock.
func verifyPriorityQueue[T comparable](q *TypedPriorityQueue[T]) error {
	q.core.mu.Lock()
	defer q.core.mu.Unlock()
	return verifyCoreLocked(&q.core)
}

// verifyCoreLocked checks a core, whose lock the caller holds: the item
// table is sound; every record is processing or has something pending;
// the hand-out order lists exactly the queued records, each once, as the
// order's own checker says; an item is in the delays' heap if and only if
// its record waits for a delay, and in the parking if and only if it
// waits for an event, and neither after a shutdown; the counts match the
// records; enough sleeping Get callers are being woken for the queued
// items; and the in-flight list holds only items being processed.
func verifyCoreLocked[T comparable](c *core[T]) error {
	if err := table.Verify(&c.items); err != nil {
		return err
	}
	delayed := func(e *table.Entry[T, record]) bool {
		return c.delays != nil && c.delays.heap.Contains(ownDelay(e.Item))
	}
	if c.delays != nil {
		if err := delayheap.Verify(c.delays.heap); err != nil {
			return fmt.Errorf("delay heap: %w", err)
		}
	}
	queued, processing, waiting, parked := map[int32]bool{}, 0, 0, map[int32]bool{}
	for id := range c.items.IDLimit() {
		if !c.items.IsLive(id) {
			continue
		}
		e := c.items.At(id)
		r := e.Val
		if !r.processing && r.pending == pendingNone {
			return fmt.Errorf("item %v: a record neither processing nor pending", e.Item)
		}
		if r.processing {
			processing++
		}
		if !r.processing && r.pending == pendingReady {
			queued[id] = true
		}
		if delayed(e) != (r.pending == pendingDelay) {
			return fmt.Errorf("item %v: pending %d, waiting for a delay %v", e.Item, r.pending, delayed(e))
		}
		switch r.pending {
		case pendingDelay:
			waiting++
		case pendingParked:
			parked[id] = true
		}
	}
	if c.delays != nil {
		own, added := 0, 0
		for _, w := range c.delays.heap.First(c.delays.heap.Len()) {
			if w.Item.added {
				added++
			} else {
				own++
			}
		}
		if waiting != own {
			return fmt.Errorf("%d records wait for a delay, the heap holds %d", waiting, own)
		}
		if c.shuttingDown.Load() && added > 0 {
			return fmt.Errorf("shut down with %d delayed adds", added)
		}
	}
	if c.shuttingDown.Load() && (waiting > 0 || len(parked) > 0) {
		return fmt.Errorf("shut down with %d items waiting for a delay and %d parked", waiting, len(parked))
	}
	if err := verifyParking(c, parked); err != nil {
		return err
	}
	if err := verifyTrace(c); err != nil {
		return err
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
			if e, _ := c.items.Lookup(item, c.items.Hash(item)); e != nil && !e.Val.processing && e.Val.pending == pendingReady {
				err = fmt.Errorf("item %v is queued and marked removed in the storage", item)
			}
		}
	case *priorityOrder[T]:
		err = verifyPriorityOrder(o, queued)
	case *groupedFIFO[T]:
		var listed map[int32]bool
		if listed, err = verifyGroupedList(o.list, "the FIFO"); err == nil && !maps.Equal(listed, queued) {
			err = fmt.Errorf("the FIFO lists %d ids, %d are queued", len(listed), len(queued))
		}
	default:
		err = fmt.Errorf("unknown order %T", o)
	}
	if err != nil {
		return err
	}
	if err := verifyFlight(c); err != nil {
		return err
	}
	if err := verifyGroups(c, queued); err != nil {
		return err
	}
	return verifySleepers(&c.sleepers, c.wakeupsPending, c.queued-c.slotWaits, c.shuttingDown.Load() && c.queued == 0)
}

// verifyGroups checks a core's group limits: every queued or in-flight
// item has its group, whose counts match the records, and no other group
// is kept; the items waiting for a slot and the groups at their limit are
// counted right; a group's lists hold its queued items.
func verifyGroups[T comparable](c *core[T], queued map[int32]bool) error {
	if c.groups == nil {
		if c.slotWaits != 0 {
			return fmt.Errorf("%d items wait for a slot without group limits", c.slotWaits)
		}
		return nil
	}
	type counts struct{ inFlight, queued, held int }
	want := map[*group]*counts{}
	for id := range c.items.IDLimit() {
		var g *group
		if int(id) < c.groups.byID.Len() {
			g = *c.groups.byID.At(int(id))
		}
		if !c.items.IsLive(id) {
			if g != nil {
				return fmt.Errorf("id %d: not held, yet in group %q", id, g.name)
			}
			continue
		}
		e := c.items.At(id)
		if g == nil {
			if e.Val.processing || queued[id] {
				return fmt.Errorf("item %v: queued or in flight without a group", e.Item)
			}
			continue
		}
		if name := c.groups.groupOf(e.Item); name != g.name {
			return fmt.Errorf("item %v: in group %q, its group is %q", e.Item, g.name, name)
		}
		if want[g] == nil {
			want[g] = &counts{}
		}
		want[g].held++
		if e.Val.processing {
			want[g].inFlight++
		}
		if queued[id] {
			want[g].queued++
		}
	}
	if len(want) != len(c.groups.byName) {
		return fmt.Errorf("%d groups hold items, %d are kept", len(want), len(c.groups.byName))
	}
	waiting, atLimit := 0, 0
	for name, g := range c.groups.byName {
		w := want[g]
		if w == nil || g.name != name {
			return fmt.Errorf("group %q: kept without items, or under another name", name)
		}
		if *w != (counts{g.inFlight, g.queued, g.held}) {
			return fmt.Errorf("group %q: %+v, counted %d in flight, %d queued, %d held", name, *w, g.inFlight, g.queued, g.held)
		}
		if g.limit != c.groups.limitOf(name) {
			return fmt.Errorf("group %q: limit %d, set %d", name, g.limit, c.groups.limitOf(name))
		}
		waiting += g.waiting()
		if g.waiting() > 0 {
			atLimit++
		}
		for i, s := range g.subs {
			if s.g != g || s.groupAt != i || s.owner.subs[g] != s {
				return fmt.Errorf("group %q: list %d filed wrong", name, i)
			}
		}
	}
	if waiting != c.slotWaits || atLimit != c.groups.atLimit {
		return fmt.Errorf("%d items wait for a slot in %d groups, counted %d in %d", waiting, atLimit, c.slotWaits, c.groups.atLimit)
	}
	return nil
}

// verifyGroupedList checks a groupedList and returns the ids it lists:
// each group's list is sound, in key order, and filed under its group; the
// heap holds exactly the lists of open groups, in heap order; eligible
// counts their ids.
func verifyGroupedList(l *groupedList, name string) (map[int32]bool, error) {
	listed := map[int32]bool{}
	eligible := 0
	for g, s := range l.subs {
		ids, err := list.Verify(s.ids, l.links)
		if err != nil {
			return nil, fmt.Errorf("%s, group %q: %w", name, g.name, err)
		}
		if len(ids) == 0 || s.g != g || s.owner != l {
			return nil, fmt.Errorf("%s, group %q: an empty list, or filed wrong", name, g.name)
		}
		for i, id := range ids {
			if listed[id] {
				return nil, fmt.Errorf("%s: id %d listed twice", name, id)
			}
			listed[id] = true
			if i > 0 && *l.keys.At(int(id)) <= *l.keys.At(int(ids[i-1])) {
				return nil, fmt.Errorf("%s, group %q: out of order at id %d", name, g.name, id)
			}
		}
		if (s.heapAt >= 0) != g.open() || s.heapAt >= len(l.heap) || s.heapAt >= 0 && l.heap[s.heapAt] != s {
			return nil, fmt.Errorf("%s, group %q: open %v, at %d in the heap", name, g.name, g.open(), s.heapAt)
		}
		if g.open() {
			eligible += len(ids)
		}
	}
	for i := 1; i < len(l.heap); i++ {
		if l.less(i, (i-1)/2) {
			return nil, fmt.Errorf("%s: heap out of order at %d", name, i)
		}
	}
	open := 0
	for _, s := range l.subs {
		if s.heapAt >= 0 {
			open++
		}
	}
	if open != len(l.heap) || eligible != l.eligible {
		return nil, fmt.Errorf("%s: %d open lists, heap holds %d; %d eligible ids, counted %d", name, open, len(l.heap), eligible, l.eligible)
	}
	return listed, nil
}

// verifyListed checks that list is sound and lists exactly the ids in want.
func verifyListed(ids list.IDs, links *list.Links, want map[int32]bool, name string) error {
	listed, err := list.Verify(ids, links)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if len(listed) != len(want) {
		return fmt.Errorf("%s lists %d ids, %d are queued", name, len(listed), len(want))
	}
	for _, id := range listed {
		if !want[id] {
			return fmt.Errorf("%s lists id %d, which is not queued", name, id)
		}
	}
	return nil
}

// verifySleepers checks the Get callers of a queue with queued items:
// none asleep while an item waits for a wakeup, and none after a shutdown.
func verifySleepers(line *lock.Line, wakeupsPending, queued int, shuttingDown bool) error {
	if err := line.Verify(); err != nil {
		return err
	}
	if wakeupsPending < 0 {
		return fmt.Errorf("%d wakeups pending", wakeupsPending)
	}
	if line.Len() > 0 && queued > wakeupsPending {
		return fmt.Errorf("%d items queued, only %d Get callers woken, %d more asleep", queued, wakeupsPending, line.Len())
	}
	if shuttingDown && line.Len() > 0 {
		return fmt.Errorf("shutting down, yet %d sleeping Get callers not woken", line.Len())
	}
	return nil
}

// verifyFlight checks the list of items in flight: it is sound, and it
// holds only items being processed, each once, oldest first, each marked
// linked, and no other id is marked linked.
func verifyFlight[T comparable](c *core[T]) error {
	f := &c.flight
	ids, err := list.Verify(f.list, &f.links)
	if err != nil {
		return fmt.Errorf("in-flight list: %w", err)
	}
	for i, id := range ids {
		if !c.items.IsLive(id) || !c.items.At(id).Val.processing {
			return fmt.Errorf("in-flight id %d is not being processed", id)
		}
		if int(id) >= f.handouts.Len() || !f.handouts.At(int(id)).linked {
			return fmt.Errorf("in-flight id %d is not marked linked", id)
		}
		if i > 0 && f.since(id).Before(f.since(ids[i-1])) {
			return fmt.Errorf("in-flight id %d was handed out before the one ahead of it", id)
		}
	}
	linked := 0
	for i := range f.handouts.Len() {
		if f.handouts.At(i).linked {
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
		if level.root.total == 0 {
			idle++
		}
		if _, _, err := verifyFairNode(o, &level.root, level.priority, 0, listed); err != nil {
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
	if len(o.fairness) == 0 && o.leaves.Len() > 0 {
		return fmt.Errorf("%d leaves kept without fairness", o.leaves.Len())
	}
	for id := range o.leaves.Len() {
		if leaf := *o.leaves.At(id); (leaf != nil) != queued[int32(id)] {
			return fmt.Errorf("id %d: leaf kept %v, queued %v", id, leaf != nil, queued[int32(id)])
		}
	}
	if o.maxWait == 0 {
		if o.ages.Len() > 0 || o.ageLinks.Size() > 0 || o.readySince.Len() > 0 || o.groupedAges != nil && len(o.groupedAges.subs) > 0 {
			return fmt.Errorf("age list used without MaxWait")
		}
		return nil
	}
	if o.groups != nil {
		ages, err := verifyGroupedList(o.groupedAges, "the age list")
		if err != nil {
			return err
		}
		if !maps.Equal(ages, queued) || o.ages.Len() > 0 {
			return fmt.Errorf("the age lists list %d and %d ids, %d are queued", len(ages), o.ages.Len(), len(queued))
		}
		for id := range ages { // a later sequence number is never ready earlier
			for other := range ages {
				if *o.ageSeqs.At(int(id)) < *o.ageSeqs.At(int(other)) && *o.readySince.At(int(id)) > *o.readySince.At(int(other)) {
					return fmt.Errorf("age list out of order at id %d", id)
				}
			}
		}
		return nil
	}
	if err := verifyListed(o.ages, &o.ageLinks, queued, "the age list"); err != nil {
		return err
	}
	last := int64(-1 << 63)
	for id := o.ages.Head(); id >= 0; id = o.ageLinks.Next(id) {
		since := *o.readySince.At(int(id))
		if since < last {
			return fmt.Errorf("age list out of order at id %d", id)
		}
		last = since
	}
	return nil
}

// verifyFairNode checks the subtree of node at depth, adds the ids its
// leaves list to listed, and returns how many they are and how many of
// them can be handed out.
func verifyFairNode[T comparable](o *priorityOrder[T], node *fairNode, priority, depth int, listed map[int32]bool) (total, ready int, err error) {
	if node.leaf != (depth == len(o.fairness)) {
		return 0, 0, fmt.Errorf("node at depth %d of %d: leaf %v", depth, len(o.fairness), node.leaf)
	}
	if node.leaf {
		ids, err := list.Verify(node.items, &o.links)
		if err != nil {
			return 0, 0, fmt.Errorf("leaf %q: %w", node.key, err)
		}
		ready := len(ids)
		if node.grouped != nil {
			if len(ids) > 0 || node.grouped.leaf != node {
				return 0, 0, fmt.Errorf("leaf %q: lists ids in both lists, or a list of another leaf", node.key)
			}
			grouped, err := verifyGroupedList(node.grouped, fmt.Sprintf("leaf %q", node.key))
			if err != nil {
				return 0, 0, err
			}
			ids = slices.Collect(maps.Keys(grouped))
			ready = node.grouped.eligible
		}
		for _, id := range ids {
			if listed[id] {
				return 0, 0, fmt.Errorf("leaf %q: id %d listed twice", node.key, id)
			}
			listed[id] = true
			if o.priority(id) != priority || len(o.fairness) > 0 && *o.leaves.At(int(id)) != node {
				return 0, 0, fmt.Errorf("leaf %q: id %d of priority %d, or kept in another leaf", node.key, id, o.priority(id))
			}
			if d := len(o.fairness) - 1; d >= 0 && o.fairness[d](o.items.At(id).Item) != node.key {
				return 0, 0, fmt.Errorf("leaf %q lists %v", node.key, o.items.At(id).Item)
			}
		}
		if node.total != len(ids) || node.n != ready {
			return 0, 0, fmt.Errorf("leaf %q: lists %d items, %d ready; counts %d, %d", node.key, len(ids), ready, node.total, node.n)
		}
		return len(ids), ready, nil
	}
	rotation, err := list.VerifyPtrs(&node.rotation)
	if err != nil {
		return 0, 0, fmt.Errorf("node %q: rotation: %w", node.key, err)
	}
	for _, c := range rotation {
		if c.parent != node || c.n == 0 || node.children[c.key] != c {
			return 0, 0, fmt.Errorf("node %q: rotation holds %q, idle or not its child", node.key, c.key)
		}
	}
	idle := 0
	for key, c := range node.children {
		if c.key != key {
			return 0, 0, fmt.Errorf("node %q: child %q filed under %q", node.key, c.key, key)
		}
		if c.total == 0 {
			idle++
		}
		if c.n == 0 && node.rotation.Contains(c) {
			return 0, 0, fmt.Errorf("node %q: child %q in the rotation with nothing to hand out", node.key, key)
		}
		n, r, err := verifyFairNode(o, c, priority, depth+1, listed)
		if err != nil {
			return 0, 0, err
		}
		total += n
		ready += r
	}
	if idle != node.idle || total != node.total || ready != node.n {
		return 0, 0, fmt.Errorf("node %q: %d idle children, counted %d; %d items, %d ready, counted %d, %d", node.key, idle, node.idle, total, ready, node.total, node.n)
	}
	return total, ready, nil
}

// verifyParking checks a core's parking against the ids of the records
// that say they are parked: it holds exactly those, each under each of its
// events and no other (an event's set may be empty); the parks that took effect are exactly those of
// items no longer processed, listed oldest first; and no item is parked
// without the delays whose goroutine ends parks.
func verifyParking[T comparable](c *core[T], parked map[int32]bool) error {
	p := c.parking
	if p == nil {
		if len(parked) > 0 {
			return fmt.Errorf("%d records parked, no parking", len(parked))
		}
		return nil
	}
	if len(p.byID) != len(parked) {
		return fmt.Errorf("%d records parked, the parking holds %d", len(parked), len(p.byID))
	}
	if len(parked) > 0 && c.delays == nil {
		return fmt.Errorf("%d items parked without the delays' goroutine", len(parked))
	}
	listed := 0
	for id, r := range p.byID {
		if !parked[id] || r.id != id {
			return fmt.Errorf("the parking holds id %d, whose record is not parked", id)
		}
		if r.settledIn == c.items.At(id).Val.processing {
			return fmt.Errorf("item %v: processing %v, park in effect %v", c.items.At(id).Item, c.items.At(id).Val.processing, r.settledIn)
		}
		for _, e := range r.events {
			if p.byEvent[e][id] != r {
				return fmt.Errorf("item %v is not filed under its event %q", c.items.At(id).Item, e)
			}
		}
		listed += len(r.events)
	}
	for _, set := range p.byEvent {
		listed -= len(set)
	}
	if listed != 0 {
		return fmt.Errorf("the events file %d more items than the parks name", -listed)
	}
	settled, err := list.VerifyPtrs(&p.settled)
	if err != nil {
		return fmt.Errorf("parks in effect: %w", err)
	}
	for i, r := range settled {
		if !r.settledIn || p.byID[r.id] != r {
			return fmt.Errorf("the parks in effect list item %v, which is not parked", c.items.At(r.id).Item)
		}
		if i > 0 && settled[i-1].since > r.since {
			return fmt.Errorf("the parks in effect are not oldest first")
		}
	}
	inEffect := 0
	for _, r := range p.byID {
		if r.settledIn {
			inEffect++
		}
	}
	if inEffect != len(settled) {
		return fmt.Errorf("%d parks in effect, %d listed", inEffect, len(settled))
	}
	return nil
}

// verifyTrace checks the core's links: each entry is of a held item, not
// empty, with at most MaxTraceLinks links per set, and links of a hand-out
// only while it is processed; each delayed add's links have a delayed add
// in the delays.
func verifyTrace[T comparable](c *core[T]) error {
	if c.trace == nil {
		return nil
	}
	for id, t := range c.trace.items {
		if !c.items.IsLive(id) {
			return fmt.Errorf("links of id %d, which holds no item", id)
		}
		e := c.items.At(id)
		switch {
		case t.next.empty() && t.served.empty():
			return fmt.Errorf("item %v: an empty links entry", e.Item)
		case len(t.next.links) > MaxTraceLinks || len(t.served.links) > MaxTraceLinks:
			return fmt.Errorf("item %v: %d and %d links", e.Item, len(t.next.links), len(t.served.links))
		case !t.served.empty() && !e.Val.processing:
			return fmt.Errorf("item %v: links of a hand-out, not processing", e.Item)
		case !t.next.empty() && e.Val.pending == pendingNone:
			return fmt.Errorf("item %v: links of a next hand-out, none pending", e.Item)
		}
	}
	for item := range c.trace.delayed {
		if c.delays == nil || !c.delays.heap.Contains(delayedAdd(item)) {
			return fmt.Errorf("item %v: links of a delayed add that is not waiting", item)
		}
	}
	return nil
}
