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

// Mutex is a sync.Mutex whose Lock, when the mutex is held, first
// retries for a while, then yields its processor to other goroutines and
// retries, and parks only after that, as sync.Mutex does almost at once.
//
// The queues hold their lock for some tens of nanoseconds. sync.Mutex
// spins a few times before it parks a contended Lock, and only while its
// processor has nothing else queued to run and another is running; on a
// machine with more runnable goroutines than cores, the shape of a
// controller manager, it parks at once. The park, the wakeup and the
// rescheduling cost microseconds, many times the critical section, so the
// callers end up queueing on the scheduler rather than on the lock. A
// goroutine that yields goes to the global run queue instead and usually
// finds the lock free when it runs again. Measured on the 2-core VM before
// the time bound below was added, medians of 3 runs side by side against
// the same queues on sync.Mutex (bench module): 8 producers and 8 workers
// 1.43x faster, 8 and 64 1.95x, 64 and 64 1.70x; the controller cases
// with 10k keys and 4 producers and 8 workers 1.56x (no reconcile cost)
// and 2.26x (1 µs); one producer and one worker, where sync.Mutex's own
// spinning serves well, no slower (490 vs 586 ns). The retries before the
// first yield keep that case so: yielding at once made it up to 1.3x
// slower.
//
// A yield takes a turn of the run queue, which on a machine busy with
// CPU-bound goroutines can last milliseconds, and a yielding waiter sees
// the lock freed only when its turn comes. So the yields stop after
// maxYielding as well as after lockYields, whichever comes first: a waiter
// behind a holder that blocks (in a user's metrics provider or custom
// storage, say) or on a loaded machine parks after at most some 1 ms and
// one turn of the run queue, and is then woken as from sync.Mutex. While
// sync.Mutex is in its starvation mode TryLock fails even on a free lock,
// so a newcomer takes the same bounded path to the mutex's queue. A
// bound of 100 µs instead gave up much of the gain with 64 producers and
// 64 workers (1635 against 1238 ns unbounded; 1442 with 1 ms). The zero
// value is an unlocked mutex.
type Mutex struct{ mu sync.Mutex }

const (
	// lockRetries is how many times Lock retries before its first yield.
	lockRetries = 64
	// lockYields is how many times Lock yields before it parks.
	lockYields = 32
	// maxYielding is how long Lock goes on yielding.
	maxYielding = time.Millisecond
)

// Lock locks m, waiting until it is free.
func (m *Mutex) Lock() {
	if m.mu.TryLock() {
		return
	}
	m.lockSlow()
}

func (m *Mutex) lockSlow() {
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
