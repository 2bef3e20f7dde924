package workqueue

import "fmt"

// verifyQueue checks the invariants of q, as container/heap's tests check a
// heap's, and returns the first fault found: the item table is sound; the
// storage holds exactly the queued and the removed items, each once; enough sleeping Get callers are being
// woken for the queued items; and a drain waiter is not left waiting on an
// idle queue. It takes the queue's lock.
func verifyQueue[T comparable](q *Typed[T]) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if err := verifyTable(&q.items); err != nil {
		return err
	}
	queued, removed := 0, 0
	for id := range int32(q.items.entries.len()) {
		if !q.items.isLive(id) {
			continue
		}
		switch q.items.at(id).val {
		case stateQueued:
			queued++
		case stateRemoved:
			removed++
		}
	}
	if q.queued() != queued || q.removed != removed {
		return fmt.Errorf("storage holds %d items and %d removed ones, the records say %d and %d", q.queued(), q.removed, queued, removed)
	}
	if q.custom == nil && q.items.detached != removed {
		return fmt.Errorf("%d removed records, %d detached from the index", removed, q.items.detached)
	}
	if q.custom != nil && q.items.detached != 0 {
		return fmt.Errorf("%d records detached from the index of a queue with custom storage", q.items.detached)
	}
	if q.custom == nil {
		seen := map[int32]bool{}
		for i := range q.order.n {
			id := q.order.buf[(q.order.head+i)&(len(q.order.buf)-1)]
			if !q.items.isLive(id) {
				return fmt.Errorf("storage position %d holds id %d, which is free", i, id)
			}
			if state := q.items.at(id).val; state != stateQueued && state != stateRemoved {
				return fmt.Errorf("storage position %d holds id %d, which is neither queued nor removed", i, id)
			}
			if seen[id] {
				return fmt.Errorf("storage holds id %d twice", id)
			}
			seen[id] = true
		}
	}
	if err := verifyFlight(q); err != nil {
		return err
	}
	return verifySleepers(&q.sleepers, q.wakeupsPending, queued, q.shuttingDown.Load())
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

// verifyFlight checks the list of items in flight: its links agree both
// ways, and it holds only items being processed, each once, oldest first.
func verifyFlight[T comparable](q *Typed[T]) error {
	l := &q.flight
	prev, linked := int32(-1), 0
	for id := l.head; id >= 0; id = l.links.at(int(id)).next {
		link := l.links.at(int(id))
		if !link.linked || link.prev != prev {
			return fmt.Errorf("in-flight entry %d: linked %v, links back to %d, want %d", id, link.linked, link.prev, prev)
		}
		if !q.items.isLive(id) {
			return fmt.Errorf("in-flight entry %d is not in the table", id)
		}
		if state := q.items.at(id).val; state != stateProcessing && state != stateDirty {
			return fmt.Errorf("in-flight entry %d is in state %d", id, state)
		}
		if prev >= 0 && link.since.Before(l.links.at(int(prev)).since) {
			return fmt.Errorf("in-flight entry %d was handed out before the one ahead of it", id)
		}
		if linked++; linked > l.links.len() {
			return fmt.Errorf("the in-flight list loops")
		}
		prev = id
	}
	if prev != l.tail {
		return fmt.Errorf("the in-flight list ends at %d, its tail is %d", prev, l.tail)
	}
	for i := range l.links.len() {
		if l.links.at(i).linked {
			linked--
		}
	}
	if linked != 0 {
		return fmt.Errorf("%d entries marked linked are not in the in-flight list", -linked)
	}
	return nil
}
