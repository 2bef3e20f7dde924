package workqueue

import "fmt"

// verifyQueue checks the invariants of q, as container/heap's tests check a
// heap's, and returns the first fault found: the item table is sound; the
// storage holds exactly the queued items, each once; enough sleeping Get callers are being
// woken for the queued items; and a drain waiter is not left waiting on an
// idle queue. It takes the queue's lock.
func verifyQueue[T comparable](q *Typed[T]) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if err := verifyTable(&q.items); err != nil {
		return err
	}
	queued := 0
	for id := range int32(q.items.entries.len()) {
		if !q.items.isLive(id) {
			continue
		}
		if q.items.at(id).val == stateQueued {
			queued++
		}
	}
	if q.queued() != queued {
		return fmt.Errorf("storage holds %d items, %d records are queued", q.queued(), queued)
	}
	if q.custom == nil {
		seen := map[int32]bool{}
		for i := range q.order.n {
			id := q.order.buf[(q.order.head+i)&(len(q.order.buf)-1)]
			if !q.items.isLive(id) || q.items.at(id).val != stateQueued {
				return fmt.Errorf("storage position %d holds id %d, which is not queued", i, id)
			}
			if seen[id] {
				return fmt.Errorf("storage holds id %d twice", id)
			}
			seen[id] = true
		}
	}
	if q.wakeupsPending < 0 || q.wakeupsPending > q.sleepingGets {
		return fmt.Errorf("%d wakeups pending for %d sleeping Get callers", q.wakeupsPending, q.sleepingGets)
	}
	if min(queued, q.sleepingGets) > q.wakeupsPending {
		return fmt.Errorf("%d items queued, %d Get callers sleep, only %d woken", queued, q.sleepingGets, q.wakeupsPending)
	}
	if q.shuttingDown.Load() && q.sleepingGets > q.wakeupsPending {
		return fmt.Errorf("shutting down, yet %d of %d sleeping Get callers not woken", q.sleepingGets-q.wakeupsPending, q.sleepingGets)
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
