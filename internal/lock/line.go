package lock

import (
	"context"
	"fmt"

	"github.com/go-workqueue/workqueue/internal/list"
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
	woken bool
	// In the line, or among the spares.
	list.Elem[waiter]
}

// Links returns w's place in the line or among the spares.
func (w *waiter) Links() *list.Elem[waiter] { return &w.Elem }

// Line holds the sleeping Get callers that have not been woken yet,
// longest asleep first, and spare waiters to reuse, so that a Get that
// sleeps allocates nothing once the queue has run a while. It is guarded by
// the queue's lock.
type Line struct {
	asleep list.Ptrs[waiter, *waiter]
	spare  list.Ptrs[waiter, *waiter]
}

// Len returns the number of waiters asleep in the line.
func (l *Line) Len() int { return l.asleep.Len() }

// join puts a waiter, new or spare, at the end of the line and returns it.
func (l *Line) join() *waiter {
	w := l.spare.PopFront()
	if w != nil {
		w.woken = false
	} else {
		w = &waiter{wake: make(chan struct{}, 1)}
	}
	l.asleep.PushBack(w)
	return w
}

// WakeFirst wakes the waiter longest asleep, which must exist.
func (l *Line) WakeFirst() {
	w := l.asleep.PopFront()
	w.woken = true
	w.wake <- struct{}{}
}

// recycle keeps w, out of the line and with its wake channel empty, for a
// later join.
func (l *Line) recycle(w *waiter) { l.spare.PushBack(w) }

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
		// ctx's error, fixed once Done is closed, is read before mu is
		// taken again, so that no method of ctx runs with mu held.
		err := ctx.Err()
		mu.Lock()
		if !w.woken {
			line.asleep.Remove(w)
			line.recycle(w)
			return err
		}
		// Woken as the context ended: the wakeup is passed on to a
		// waiter that still wants an item.
		<-w.wake
		*pending--
		wakeOne()
		line.recycle(w)
		return err
	}
	line.recycle(w)
	return nil
}

// Verify checks that the line's links agree with its count and that
// no waiter in it is marked woken. It is for tests.
func (l *Line) Verify() error {
	asleep, err := list.VerifyPtrs(&l.asleep)
	if err != nil {
		return fmt.Errorf("line: %w", err)
	}
	for i, w := range asleep {
		if w.woken {
			return fmt.Errorf("waiter %d of the line is marked woken", i)
		}
	}
	if _, err := list.VerifyPtrs(&l.spare); err != nil {
		return fmt.Errorf("spare waiters: %w", err)
	}
	return nil
}
