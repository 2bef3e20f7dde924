package workqueue

import (
	"context"
)

// getWaiter is a Get caller asleep until an item is queued or a shutdown
// begins. It waits on a channel of its own rather than on a sync.Cond so
// that GetContext can also wait for its context, and so that a waiter whose
// context ends can leave the line without taking a wakeup from the others.
type getWaiter struct {
	// wake receives one value when the waiter is woken. It is buffered, so
	// the waker, which holds the queue's lock, never blocks on it.
	wake chan struct{}
	// woken is set, under the queue's lock, when the waiter leaves the line
	// to be woken; a value is then in wake or about to be received.
	woken      bool
	prev, next *getWaiter
}

// waiterLine holds the sleeping Get callers that have not been woken yet,
// longest asleep first, and spare waiters to reuse, so that a Get that
// sleeps allocates nothing once the queue has run a while. It is guarded by
// the queue's lock.
type waiterLine struct {
	head, tail *getWaiter
	n          int
	spare      *getWaiter // a list through next
}

// join puts a waiter, new or spare, at the end of the line and returns it.
func (l *waiterLine) join() *getWaiter {
	w := l.spare
	if w != nil {
		l.spare = w.next
		*w = getWaiter{wake: w.wake}
	} else {
		w = &getWaiter{wake: make(chan struct{}, 1)}
	}
	w.prev = l.tail
	if l.tail != nil {
		l.tail.next = w
	} else {
		l.head = w
	}
	l.tail = w
	l.n++
	return w
}

// leave takes w, which must be in the line, out of it.
func (l *waiterLine) leave(w *getWaiter) {
	if w.prev != nil {
		w.prev.next = w.next
	} else {
		l.head = w.next
	}
	if w.next != nil {
		w.next.prev = w.prev
	} else {
		l.tail = w.prev
	}
	w.prev, w.next = nil, nil
	l.n--
}

// wakeFirst wakes the waiter longest asleep, which must exist.
func (l *waiterLine) wakeFirst() {
	w := l.head
	l.leave(w)
	w.woken = true
	w.wake <- struct{}{}
}

// recycle keeps w, out of the line and with its wake channel empty, for a
// later join.
func (l *waiterLine) recycle(w *getWaiter) {
	w.next = l.spare
	l.spare = w
}

// sleepInLine waits in line, with mu released, until a push or a shutdown
// wakes the caller, or ctx ends; then it returns ctx's error. pending
// counts the woken waiters not yet running, and wakeOne passes a wakeup
// that arrives as ctx ends on to another waiter. The caller holds mu, which
// guards line and pending, and holds it again when sleepInLine returns.
func sleepInLine(ctx context.Context, mu *yieldingMutex, line *waiterLine, pending *int, wakeOne func()) error {
	w := line.join()
	mu.Unlock()
	select {
	case <-w.wake:
		mu.Lock()
		*pending--
	case <-ctx.Done(): // nil, never ready, for context.Background()
		mu.Lock()
		if !w.woken {
			line.leave(w)
			line.recycle(w)
			return ctx.Err()
		}
		// Woken as the context ended: the wakeup is passed on to a
		// waiter that still wants an item.
		<-w.wake
		*pending--
		wakeOne()
		line.recycle(w)
		return ctx.Err()
	}
	line.recycle(w)
	return nil
}
