package crqueue_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/go-workqueue/workqueue"
	crqueue "github.com/go-workqueue/workqueue/controllerruntime"
)

func TestShutDownRules(t *testing.T) {
	for _, tc := range []struct {
		name  string
		drain bool
		// handed: items Get hands out after ShutDown with a, b, c queued.
		handed []string
	}{
		{"stop", false, nil},
		{"drain on shutdown", true, []string{"a", "b", "c"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var opts []crqueue.Option[string]
			if tc.drain {
				opts = append(opts, crqueue.WithDrainOnShutDown[string]())
			}
			q := crqueue.New("", nil, opts...)
			q.Add("a")
			q.Add("b")
			q.Add("c")
			q.ShutDown()
			q.Add("d")
			assert.Equal(t, tc.handed, handOutAll(q))
			_, err := q.GetContext(context.Background())
			assert.ErrorIs(t, err, workqueue.ErrShutDown)
		})
	}
}

// A Get blocked on an empty queue returns shutdown at ShutDown, and an
// item being processed may still be marked done.
func TestShutDownReleasesBlockedGet(t *testing.T) {
	q := crqueue.New[string]("", nil)
	q.Add("busy")
	item, _ := q.Get()
	got := make(chan bool, 1)
	go func() { _, shutdown := q.Get(); got <- shutdown }()
	// Give the Get a chance to block; the check holds either way.
	time.Sleep(time.Millisecond)
	q.ShutDown()
	select {
	case shutdown := <-got:
		assert.True(t, shutdown)
	case <-time.After(2 * time.Second):
		t.Fatal("Get still blocked 2s after ShutDown")
	}
	q.Done(item)
	assert.Zero(t, q.Len())
}

// ShutDownWithDrain keeps handing out items until all are done, including
// one re-added while processed.
func TestShutDownWithDrainHandsOutTheRest(t *testing.T) {
	q := crqueue.New[string]("", nil)
	q.Add("a")
	q.Add("b")
	first, _ := q.Get()
	q.Add(first)
	drained := make(chan struct{})
	go func() { q.ShutDownWithDrain(); close(drained) }()
	require.Eventually(t, q.ShuttingDown, 2*time.Second, time.Millisecond)
	q.Done(first)
	got := handOutAll(q)
	<-drained
	assert.Equal(t, []string{"b", "a"}, got)
}

// handOutAll gets and marks done items until Get reports shutdown,
// returning them in order.
func handOutAll(q *crqueue.Queue[string]) (got []string) {
	for {
		item, shutdown := q.Get()
		if shutdown {
			return got
		}
		got = append(got, item)
		q.Done(item)
	}
}

// TestShutDownWithAllQueuedWaitingForASlot checks WithGroupLimits' doc: a
// Get asleep when ShutDown comes, while every queued item waits for a slot,
// returns shutdown at the Done that frees a slot, not at once.
func TestShutDownWithAllQueuedWaitingForASlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := crqueue.New("", nil, crqueue.WithGroupLimits(workqueue.GroupLimits[string]{
			Group: func(s string) string { return s[:1] }, Default: 1}))
		q.Add("a1")
		q.Add("a2")
		first, _ := q.Get()
		type got struct {
			item     string
			shutdown bool
		}
		asleep := make(chan got, 1)
		go func() {
			item, shutdown := q.Get()
			asleep <- got{item, shutdown}
		}()
		synctest.Wait()
		q.ShutDown()
		synctest.Wait()
		select {
		case g := <-asleep:
			t.Fatalf("Get returned %+v at ShutDown, before the Done that frees a slot", g)
		default:
		}
		q.Done(first)
		synctest.Wait()
		assert.Equal(t, got{"", true}, <-asleep)
		assert.Zero(t, q.Len()+q.Unwrap().Snapshot(0).Processing, "a2, handed back, is not held")
	})
}
