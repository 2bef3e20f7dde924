package workqueue

import (
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/go-workqueue/workqueue/internal/ring"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The tests in this file pin what an adversarial review of the one-lock
// queue found: user code that panics under a queue's lock (custom storage,
// a metric, an item that cannot be hashed) must leave the queue consistent
// and unlocked, and the retries metric counts only accepted adds.

// panickyStorage is FIFO storage whose Push panics while fail is set.
type panickyStorage struct {
	ring.Ring[string]
	fail bool
}

func (s *panickyStorage) Push(item string) {
	if s.fail {
		panic("storage full")
	}
	s.Ring.Push(item)
}

// returnsWithin reports whether f returns within d: a bound that only a
// hang reaches, so it costs nothing when the test passes.
func returnsWithin(d time.Duration, f func()) bool {
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
		return true
	case <-time.After(d):
		return false
	}
}

// A Push that panics in Add must not leave a record of an item that is not
// stored: it would never be handed out, later Adds of it would collapse into
// it, and a drain would wait for it for ever.
func TestStoragePushPanicInAdd(t *testing.T) {
	storage := &panickyStorage{fail: true}
	q := NewTypedWithConfig(TypedQueueConfig[string]{Queue: storage})
	assert.Panics(t, func() { q.Add("x") })
	storage.fail = false
	assert.NoError(t, verifyQueue(q), "invariant broken after the panic")
	q.Add("x") // a caller retries: collapsed into the ghost record
	assert.Equal(t, 1, q.Len(), "x was added twice and is not queued")
	assert.True(t, returnsWithin(10*time.Second, func() {
		go func() { item, _ := q.Get(); q.Done(item) }()
		q.ShutDownWithDrain()
	}), "drain waits for a ghost for ever")
	q.ShutDown()
}

// The same through Done, which queues a dirty item again: a Done that
// panics has not happened, so the item is still processing, and a Done that
// succeeds later queues it again.
func TestStoragePushPanicInDone(t *testing.T) {
	storage := &panickyStorage{}
	q := NewTypedWithConfig(TypedQueueConfig[string]{Queue: storage})
	q.Add("x")
	item, _ := q.Get()
	q.Add("x") // dirty
	storage.fail = true
	assert.Panics(t, func() { q.Done(item) })
	storage.fail = false
	assert.NoError(t, verifyQueue(q))
	assert.Equal(t, 0, q.Len(), "x is still processing")
	q.Done(item)
	assert.Equal(t, 1, q.Len(), "x queued again by the Done that succeeded")
	assert.True(t, returnsWithin(10*time.Second, func() {
		go func() { item, _ := q.Get(); q.Done(item) }()
		q.ShutDownWithDrain()
	}), "the drain did not return once x was done")
	q.ShutDown()
}

// A Push that panics while a parked item is queued again (by an Add, a
// Wake or WakeItem) has not happened: the item stays parked, and a later
// attempt queues it.
func TestStoragePushPanicEndingAPark(t *testing.T) {
	for name, end := range map[string]func(q *Typed[string]){
		"Add":      func(q *Typed[string]) { q.Add("x") },
		"Wake":     func(q *Typed[string]) { q.Wake("e") },
		"WakeItem": func(q *Typed[string]) { q.WakeItem("x") },
	} {
		t.Run(name, func(t *testing.T) {
			storage := &panickyStorage{}
			q := NewTypedWithConfig(TypedQueueConfig[string]{Queue: storage, Logger: discardLogger})
			defer q.ShutDown()
			q.Add("x")
			item, _ := q.Get()
			q.Park(item, "e")
			q.Done(item)
			storage.fail = true
			assert.Panics(t, func() { end(q) })
			storage.fail = false
			require.NoError(t, verifyQueue(q))
			assert.Equal(t, 1, q.Snapshot(0).Parked, "x is still parked")
			end(q)
			assert.Equal(t, 1, q.Len(), "x queued by the attempt that succeeded")
			require.NoError(t, verifyQueue(q))
		})
	}
}

// panickyGaugeProvider's delayed-items gauge panics on its first Set with a
// non-zero value.
type panickyGaugeProvider struct {
	recordingProvider
	once sync.Once
}

type panickyGauge struct{ p *panickyGaugeProvider }

func (g panickyGauge) Set(v float64) {
	if v != 0 {
		g.p.once.Do(func() { panic("gauge") })
	}
}

func (p *panickyGaugeProvider) NewDelayedItemsMetric(string) SettableGaugeMetric {
	return panickyGauge{p}
}

// A panic under the delaying queue's lock (an interface item holding a value
// that cannot be hashed, or a metric's Set) must not leave the lock held:
// every later AddAfter and ShutDown would hang.
func TestAddAfterPanicReleasesLock(t *testing.T) {
	t.Run("unhashable item", func(t *testing.T) {
		q := NewTypedDelayingQueue[any]()
		assert.Panics(t, func() { q.AddAfter([]int{1}, time.Hour) })
		assert.True(t, returnsWithin(10*time.Second, func() { q.AddAfter("y", time.Hour) }), "AddAfter hangs")
		assert.True(t, returnsWithin(10*time.Second, q.ShutDown), "ShutDown hangs")
	})
	t.Run("gauge panics", func(t *testing.T) {
		q := NewTypedDelayingQueueWithConfig(TypedDelayingQueueConfig[string]{Name: "q", MetricsProvider: &panickyGaugeProvider{}})
		assert.Panics(t, func() { q.AddAfter("x", time.Hour) })
		assert.True(t, returnsWithin(10*time.Second, q.ShutDown), "ShutDown hangs")
	})
	// For contrast: Typed.Add hashes before the lock and defers Unlock.
	t.Run("Typed.Add is fine", func(t *testing.T) {
		q := NewTyped[any]()
		assert.Panics(t, func() { q.Add([]int{1}) })
		assert.True(t, returnsWithin(10*time.Second, q.ShutDown))
	})
}

// AddAfter(item, d <= 0) racing a shutdown counts a retry only if its add
// was accepted.
func TestRetriesCountOnlyAcceptedAdds(t *testing.T) {
	bad := 0
	rounds := regressionRounds() * 3
	for range rounds {
		p := &recordingProvider{}
		q := NewTypedDelayingQueueWithConfig(TypedDelayingQueueConfig[string]{Name: "q", MetricsProvider: p})
		var wg sync.WaitGroup
		start := make(chan struct{})
		wg.Go(func() {
			<-start
			for i := 0; !q.ShuttingDown() || i < 50; i++ {
				q.AddAfter(strconv.Itoa(i), 0)
			}
		})
		close(start)
		runtime.Gosched()
		q.ShutDown()
		wg.Wait()
		if d := p.value("q", "retries") - p.value("q", "adds"); d != 0 {
			if bad < 3 {
				t.Logf("retries - adds = %v", d)
			}
			bad++
		}
	}
	t.Logf("%d of %d rounds counted a retry for a dropped AddAfter(x, 0)", bad, rounds)
	assert.Zero(t, bad)
}
