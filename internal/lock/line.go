package lock

import (
	"context"
	"fmt"
)

// waiter is a Get caller asleep until an item is queued or a shutdown
// begins. It waits on a channel of its own rather than on a sync.Cond so
// that GetContext can also wait for its context, and so that a waiter whose
// context ends can leave the line without taking a wakeup from the others.
type waiter struct {
	// wake receives one value when the waiter is woken. It is buffered, so
	// the waker, which holds the queue's lock, never blocks on it.
	wake chan struct{}
	// woken is set, under the queue's lock, when the waiter leaves the line
	// to be woken; a value is then in wake or about to be received.
	woken      bool
	prev, next *waiter
}

// Line holds the sleeping Get callers that have not been woken yet,
// longest asleep first, and spare waiters to reuse, so that a Get that
// sleeps allocates nothing once the queue has run a while. It is guarded by
// the queue's lock.
type Line struct {
	head, tail *waiter
	n          int
	spare      *waiter // a list through next
}

// Len returns the number of waiters asleep in the line.
func (l *Line) Len() int { return l.n }

// join puts a waiter, new or spare, at the end of the line and returns it.
func (l *Line) join() *waiter {
	w := l.spare
	if w != nil {
		l.spare = w.next
		*w = waiter{wake: w.wake}
	} else {
		w = &waiter{wake: make(chan struct{}, 1)}
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
func (l *Line) leave(w *waiter) {
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

// WakeFirst wakes the waiter longest asleep, which must exist.
func (l *Line) WakeFirst() {
	w := l.head
	l.leave(w)
	w.woken = true
	w.wake <- struct{}{}
}

// recycle keeps w, out of the line and with its wake channel empty, for a
// later join.
func (l *Line) recycle(w *waiter) {
	w.next = l.spare
	l.spare = w
}

// Sleep waits in line, with mu released, until a push or a shutdown
// wakes the caller, or ctx ends; then it returns ctx's error. pending
// counts the woken waiters not yet running, and wakeOne passes a wakeup
// that arrives as ctx ends on to another waiter. The caller holds mu, which
// guards line and pending, and holds it again when Sleep returns.
func Sleep(ctx context.Context, mu *Mutex, line *Line, pending *int, wakeOne func()) error {
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

// Verify checks that the line's links agree with its count and that
// no waiter in it is marked woken. It is for tests.
func (l *Line) Verify() error {
	n := 0
	var prev *waiter
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
