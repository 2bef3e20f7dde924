package workqueue

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"
)

// removeStep is one step of a scripted Remove test: runQueueOps's steps
// plus "remove", whose want is what Remove reports.
type removeStep struct {
	queueOp
	removed bool
}

func runRemoveSteps(t *testing.T, q *Typed[string], steps []removeStep) {
	t.Helper()
	for i, step := range steps {
		if step.op == "remove" {
			require.Equalf(t, step.removed, q.Remove(step.item), "step %d: Remove(%q)", i, step.item)
		} else {
			runQueueOps(t, q, []queueOp{step.queueOp})
		}
		require.NoErrorf(t, verifyQueue(q), "step %d", i)
	}
}

func TestRemove(t *testing.T) {
	op := func(op, item string, want any) removeStep {
		return removeStep{queueOp: queueOp{op: op, item: item, want: want}}
	}
	remove := func(item string, removed bool) removeStep {
		return removeStep{queueOp: queueOp{op: "remove", item: item}, removed: removed}
	}
	tests := []struct {
		name string
		// custom runs the steps on custom FIFO storage instead of the
		// default storage, where they differ.
		custom bool
		steps  []removeStep
	}{
		{"a queued item leaves the queue", false, []removeStep{
			op("add", "a", nil), op("add", "b", nil), op("add", "c", nil),
			remove("b", true), op("len", "", 2),
			op("get", "", "a"), op("get", "", "c"), op("len", "", 0),
		}},
		{"an unknown item", false, []removeStep{
			op("add", "a", nil), remove("x", false), op("len", "", 1),
		}},
		{"removed twice", false, []removeStep{
			op("add", "a", nil), remove("a", true), remove("a", false), op("len", "", 0),
		}},
		{"a processing item keeps being processed", false, []removeStep{
			op("add", "a", nil), op("get", "", "a"), remove("a", false),
			op("add", "a", nil), op("done", "a", nil), op("get", "", "a"),
		}},
		{"a dirty item is not queued again by Done", false, []removeStep{
			op("add", "a", nil), op("get", "", "a"), op("add", "a", nil),
			remove("a", true), op("done", "a", nil), op("len", "", 0),
			op("add", "b", nil), op("get", "", "b"),
		}},
		{"added again after removal, it goes to the back", false, []removeStep{
			op("add", "a", nil), op("add", "b", nil), remove("a", true), op("add", "a", nil),
			op("len", "", 2), op("get", "", "b"), op("get", "", "a"), op("len", "", 0),
		}},
		{"added again and removed again", false, []removeStep{
			op("add", "a", nil), remove("a", true), op("add", "a", nil), remove("a", true),
			op("add", "a", nil), op("len", "", 1), op("get", "", "a"), op("len", "", 0),
		}},
		{"custom storage: a queued item leaves the queue", true, []removeStep{
			op("add", "a", nil), op("add", "b", nil), op("add", "c", nil),
			remove("b", true), op("len", "", 2),
			op("get", "", "a"), op("get", "", "c"), op("len", "", 0),
		}},
		{"custom storage: added again, it keeps its old place", true, []removeStep{
			op("add", "a", nil), op("add", "b", nil), remove("a", true), op("add", "a", nil),
			op("len", "", 2), op("get", "", "a"), op("get", "", "b"),
		}},
		{"custom storage: Done of a removed item does nothing", true, []removeStep{
			op("add", "a", nil), remove("a", true), op("done", "a", nil), op("len", "", 0),
			op("add", "b", nil), op("get", "", "b"), op("len", "", 0),
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			config := TypedQueueConfig[string]{}
			if tt.custom {
				config.Queue = DefaultQueue[string]()
			}
			q := NewTypedWithConfig(config)
			defer q.ShutDown()
			runRemoveSteps(t, q, tt.steps)
		})
	}
}

// TestRemoveReleasesMemory checks that removed items do not pin the
// queue's memory: once nothing is held, the table and the FIFO's links have
// let go of what the burst made them grow to.
func TestRemoveReleasesMemory(t *testing.T) {
	q := NewTyped[int]()
	defer q.ShutDown()
	for i := range 5000 {
		q.Add(i)
	}
	for i := range 4999 {
		require.True(t, q.Remove(i))
	}
	got, _ := q.Get()
	assert.Equal(t, 4999, got)
	q.Done(got)
	require.NoError(t, verifyQueue(q))
	assert.Zero(t, q.core.items.IDLimit(), "entries held after every item left")
	assert.Zero(t, q.core.order.(*fifoOrder).links.Size(), "links kept after every item left")
}

func TestRemoveEndsADrain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := NewTyped[string]()
		q.Add("a")
		drained := make(chan struct{})
		go func() {
			q.ShutDownWithDrain()
			close(drained)
		}()
		synctest.Wait()
		select {
		case <-drained:
			t.Fatal("drain returned with an item queued")
		default:
		}
		require.True(t, q.Remove("a"))
		synctest.Wait()
		select {
		case <-drained:
		default:
			t.Fatal("drain still waits after the last item was removed")
		}
	})
}

func TestRemoveMetrics(t *testing.T) {
	provider := &recordingProvider{}
	q := NewTypedWithConfig(TypedQueueConfig[string]{Name: "q", MetricsProvider: provider})
	defer q.ShutDown()
	q.Add("a")
	q.Add("b")
	q.Remove("a")
	assert.Equal(t, 1.0, provider.value("q", "depth"))
	got, _ := q.Get()
	require.Equal(t, "b", got)
	q.Add("b") // dirty: counted in the depth until removed
	assert.Equal(t, 1.0, provider.value("q", "depth"))
	q.Remove("b")
	assert.Equal(t, 0.0, provider.value("q", "depth"))
	q.Done("b")
	assert.Equal(t, 0.0, provider.value("q", "depth"))
	assert.Len(t, provider.observations("q", "latency"), 1, "only b's Get waited")
}

// TestRemoveLayers checks Remove on the delaying and rate-limiting layers:
// it takes an item back from the heap and the queue, and the rate-limiting
// layer forgets its failures.
func TestRemoveLayers(t *testing.T) {
	tests := []struct {
		name        string
		setup       func(q rateLimitingQueue[string])
		removed     bool
		wantLen     int
		wantRequeue int
	}{
		{"waiting for its delay", func(q rateLimitingQueue[string]) { q.AddAfter("a", time.Second) }, true, 0, 0},
		{"queued", func(q rateLimitingQueue[string]) { q.Add("a") }, true, 0, 0},
		{"waiting and queued", func(q rateLimitingQueue[string]) {
			q.Add("a")
			q.AddAfter("a", time.Second)
		}, true, 0, 0},
		{"retrying", func(q rateLimitingQueue[string]) {
			q.AddRateLimited("a")
			q.AddRateLimited("a")
		}, true, 0, 0},
		{"only failures", func(q rateLimitingQueue[string]) {
			q.AddRateLimited("a")
			q.Remove("a")
			q.AddRateLimited("b") // so the limiter holds something else
		}, false, 0, 0},
		{"another item", func(q rateLimitingQueue[string]) { q.AddAfter("b", time.Second) }, false, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				clock := clocktesting.NewFakeClock(time.Unix(0, 0))
				limiter := NewTypedItemExponentialFailureRateLimiter[string](time.Millisecond, time.Minute)
				q := NewTypedRateLimitingQueueWithConfig[string](limiter, TypedRateLimitingQueueConfig[string]{Clock: clock})
				defer q.ShutDown()
				tt.setup(q)
				synctest.Wait()
				assert.Equal(t, tt.removed, q.Remove("a"))
				assert.Equal(t, tt.wantRequeue, q.NumRequeues("a"))
				clock.Step(time.Hour) // whatever still waits is now ready
				synctest.Wait()
				for q.Len() > 0 {
					item, _ := q.Get()
					assert.NotEqual(t, "a", item, "a was handed out after Remove")
					q.Done(item)
				}
				assert.Equal(t, tt.wantLen, q.Len())
			})
		})
	}
}
