package workqueue

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestSnapshot(t *testing.T) {
	t0 := time.Unix(1000, 0)
	tests := []struct {
		name string
		n    int
		// act runs on a rate-limiting queue whose clock reads t0; the
		// queue has taken one snapshot already.
		act  func(q rateLimitingQueue[string], clock *clocktesting.FakeClock)
		want Snapshot[string]
	}{
		{"empty", 5, func(rateLimitingQueue[string], *clocktesting.FakeClock) {}, Snapshot[string]{Taken: t0}},
		{"queued, first n in order", 2, func(q rateLimitingQueue[string], _ *clocktesting.FakeClock) {
			q.Add("a")
			q.Add("b")
			q.Add("a")
			q.Add("c")
		}, Snapshot[string]{Taken: t0, Depth: 3, Queued: []string{"a", "b"}, Adds: 3}},
		{"removed items are not listed", 5, func(q rateLimitingQueue[string], _ *clocktesting.FakeClock) {
			q.Add("a")
			q.Add("b")
			q.Remove("a")
		}, Snapshot[string]{Taken: t0, Depth: 1, Queued: []string{"b"}, Adds: 2}},
		{"in flight, longest first, with requeues", 5, func(q rateLimitingQueue[string], clock *clocktesting.FakeClock) {
			q.Add("a")
			q.Add("b")
			q.Get()
			clock.Step(time.Second)
			q.Get()
			q.Add("b")
			clock.Step(time.Second)
		}, Snapshot[string]{Taken: t0.Add(2 * time.Second), Processing: 2, Adds: 3, InFlight: []InFlightItem[string]{
			{Item: "a", Since: t0}, {Item: "b", Since: t0.Add(time.Second), Requeue: true},
		}}},
		{"done items leave the flight", 5, func(q rateLimitingQueue[string], _ *clocktesting.FakeClock) {
			q.Add("a")
			q.Add("b")
			q.Get()
			q.Get()
			q.Done("a")
		}, Snapshot[string]{Taken: t0, Processing: 1, Adds: 2, InFlight: []InFlightItem[string]{{Item: "b", Since: t0}}}},
		{"delayed, soonest first, with failures", 2, func(q rateLimitingQueue[string], _ *clocktesting.FakeClock) {
			q.AddAfter("x", 3*time.Second)
			q.AddAfter("y", time.Second)
			q.AddAfter("z", 2*time.Second)
			q.AddRateLimited("w") // 1 ms
			q.AddRateLimited("w") // 2 ms: the earlier ready time wins
		}, Snapshot[string]{Taken: t0, Waiting: 4, Delayed: []DelayedItem[string]{
			{Item: "w", ReadyAt: t0.Add(time.Millisecond)}, {Item: "y", ReadyAt: t0.Add(time.Second)},
		}, Failures: map[string]int{"w": 2}}},
		{"counts only, n = 0", 0, func(q rateLimitingQueue[string], _ *clocktesting.FakeClock) {
			q.Add("a")
			q.Add("b")
			q.Get()
			q.AddAfter("x", time.Second)
		}, Snapshot[string]{Taken: t0, Depth: 1, Processing: 1, Waiting: 1, Adds: 2}},
		{"counts only, n < 0", -1, func(q rateLimitingQueue[string], _ *clocktesting.FakeClock) {
			q.Add("a")
			q.AddAfter("x", time.Second)
			q.Add("p")
			q.Get()
			item, _ := q.Get()
			q.Park(item, "e")
			q.Done(item)
			q.Wake("e") // p waits for its 1 ms backoff, in the core's delays
		}, Snapshot[string]{Taken: t0, Processing: 1, Waiting: 2, Adds: 2}},
		{"an item waiting for a park's backoff and a delayed add counts twice", 5, func(q rateLimitingQueue[string], _ *clocktesting.FakeClock) {
			q.Add("p")
			item, _ := q.Get()
			q.Park(item, "e")
			q.Done(item)
			q.Wake("e") // p waits for its 5 ms park backoff
			q.AddAfter("p", time.Second)
		}, Snapshot[string]{Taken: t0, Waiting: 2, Adds: 1, Delayed: []DelayedItem[string]{
			{Item: "p", ReadyAt: t0.Add(5 * time.Millisecond)}, {Item: "p", ReadyAt: t0.Add(time.Second)},
		}}},
		{"parked, longest first; parks are not failures", 1, func(q rateLimitingQueue[string], clock *clocktesting.FakeClock) {
			for _, item := range []string{"a", "b"} {
				q.Add(item)
				got, _ := q.Get()
				q.Park(got, "node-added", "pod-deleted")
				q.Done(got)
				clock.Step(time.Second)
			}
		}, Snapshot[string]{Taken: t0.Add(2 * time.Second), Adds: 2, Parked: 2, ParkedItems: []ParkedItem[string]{
			{Item: "a", Events: []string{"node-added", "pod-deleted"}, Since: t0},
		}}},
		{"shutting down", 5, func(q rateLimitingQueue[string], _ *clocktesting.FakeClock) {
			q.Add("a")
			q.ShutDown()
		}, Snapshot[string]{Taken: t0, ShuttingDown: true, Depth: 1, Queued: []string{"a"}, Adds: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				clock := clocktesting.NewFakeClock(t0)
				limiter := NewTypedItemExponentialFailureRateLimiter[string](time.Millisecond, time.Minute)
				q := NewTypedRateLimitingQueueWithConfig[string](limiter, TypedRateLimitingQueueConfig[string]{Clock: clock})
				defer q.ShutDown()
				snap := q
				snap.Snapshot(0) // starts recording hand-out times
				tt.act(q, clock)
				synctest.Wait()
				assert.Equal(t, tt.want, snap.Snapshot(tt.n))
			})
		})
	}
}

// TestSnapshotInFlightBeforeFirst checks that items handed out before the
// first snapshot are counted but not listed, and that Done of such an item
// leaves the list alone.
func TestSnapshotInFlightBeforeFirst(t *testing.T) {
	q := NewTyped[string]()
	defer q.ShutDown()
	q.Add("early")
	q.Add("late")
	q.Get()
	s := q.Snapshot(5)
	assert.Equal(t, 1, s.Processing)
	assert.Empty(t, s.InFlight)
	q.Get()
	q.Done("early")
	s = q.Snapshot(5)
	require.Len(t, s.InFlight, 1)
	assert.Equal(t, "late", s.InFlight[0].Item)
	require.NoError(t, verifyQueue(q))
}
