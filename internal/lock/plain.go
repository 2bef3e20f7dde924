//go:build workqueue_plainmutex

package lock

import "sync"

// Mutex is a plain sync.Mutex in this build, for the benchmarks that weigh
// the yielding mutex of the default build against it. The zero value is
// an unlocked mutex.
type Mutex struct{ sync.Mutex }

// LockSlow is Lock, which the queues call after a TryLock that failed.
func (m *Mutex) LockSlow() { m.Lock() }
