//go:build !workqueue_plainmutex

// Package lock provides the queues' lock, a mutex that yields before it
// parks, and the line in which Get callers sleep until an item is queued.
//
// Built with the tag workqueue_plainmutex, Mutex is a plain sync.Mutex
// instead, so that the benchmarks can weigh the yielding one against it:
//
//	go run -tags workqueue_plainmutex ./bench/cmd/compare -run controller
package lock

import (
	"runtime"
	"sync"
	"time"
)

// Mutex is a mutual exclusion lock whose Lock, when the mutex is held,
// retries for a while, then yields its processor and retries, and parks
// only after that. The zero value is an unlocked mutex.
type Mutex struct{ mu sync.Mutex }

const (
	// lockRetries is how many times Lock retries before its first yield.
	lockRetries = 64
	// lockYields is how many times Lock yields before it parks.
	lockYields = 32
	// maxYielding is how long Lock goes on yielding.
	maxYielding = time.Millisecond
)

// Lock locks m, waiting until it is free. With its slow path's call it is
// too large for the compiler to inline, so the queues' hottest paths write
// it out: TryLock, and LockSlow if that fails.
func (m *Mutex) Lock() {
	if !m.mu.TryLock() {
		m.LockSlow()
	}
}

// TryLock locks m if it is free and reports whether it did.
func (m *Mutex) TryLock() bool { return m.mu.TryLock() }

// LockSlow is Lock after a TryLock that failed: on a held mutex. The queues hold their lock for tens
// of nanoseconds. sync.Mutex spins only while its processor has nothing
// else to run, so on a machine with more runnable goroutines than cores,
// the shape of a controller manager, a contended Lock parks at once, and
// the park and wakeup cost many times the critical section: callers queue
// on the scheduler rather than on the lock. A goroutine that yields goes
// to the global run queue instead and usually finds the lock free when it
// runs again. The retries before the first yield keep one producer and one
// worker, where sync.Mutex's own spinning serves well, as fast as on it.
//
// A yield takes a turn of the run queue, which on a machine busy with
// CPU-bound goroutines can last milliseconds. So the yields stop after
// lockYields or maxYielding, whichever comes first: a waiter behind a
// holder that blocks (in a user's metrics provider or custom storage, say)
// or on a loaded machine parks after about 1 ms and one turn of the run
// queue, and is then woken as from sync.Mutex. While sync.Mutex is in its
// starvation mode TryLock fails even on a free lock, so a newcomer takes
// the same bounded path to the mutex's queue. docs/bench.md has the
// measurements behind the constants.
func (m *Mutex) LockSlow() {
	for range lockRetries {
		if m.mu.TryLock() {
			return
		}
	}
	start := time.Now()
	for range lockYields {
		runtime.Gosched()
		if m.mu.TryLock() {
			return
		}
		if time.Since(start) > maxYielding {
			break
		}
	}
	m.mu.Lock()
}

// Unlock unlocks m. Like sync.Mutex, it is a run-time error if m is not
// locked.
func (m *Mutex) Unlock() { m.mu.Unlock() }
