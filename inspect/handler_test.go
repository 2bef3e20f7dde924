package inspect

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/go-workqueue/workqueue"
	"github.com/go-workqueue/workqueue/reconcile"
)

var t0 = time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)

// newQueue returns a rate-limiting queue on clock whose limiter waits 1 s,
// 2 s, 4 s, ... between failures.
func newQueue(clock *clocktesting.FakeClock) *workqueue.TypedRateLimitingQueue[string] {
	limiter := workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Second, time.Minute)
	return workqueue.NewTypedRateLimitingQueueWithConfig(limiter,
		workqueue.TypedRateLimitingQueueConfig[string]{Clock: clock})
}

func rate(r float64) *float64 { return &r }

// emptyQueueView is a queue with nothing in it, as of t0.
func emptyQueueView(name string) QueueView {
	return QueueView{Name: name, Taken: t0, Queued: []string{}, InFlight: []InFlightKey{}, Delayed: []DelayedKey{}, ParkedKeys: []ParkedKey{}, Groups: []GroupView{}, Failing: []FailedKey{}, Recent: []FailedKey{}}
}

// namespace is the group of a key namespace/name: its namespace, and no
// group for a key without one.
func namespace(key string) string {
	if ns, _, ok := strings.Cut(key, "/"); ok {
		return ns
	}
	return ""
}

// newGroupedQueue returns a queue on clock with at most one key of each
// namespace in flight, but any number of "batch", and the keys queued
// that the test of the groups shows.
func newGroupedQueue(t *testing.T, clock *clocktesting.FakeClock) *workqueue.Typed[string] {
	t.Helper()
	q := workqueue.NewTypedWithConfig(workqueue.TypedQueueConfig[string]{
		Clock: clock,
		GroupLimits: &workqueue.GroupLimits[string]{
			Group: namespace, Default: 1, Limits: map[string]int{"batch": 0},
		},
	})
	t.Cleanup(q.ShutDown)
	return q
}

// fillGroups adds keys of web (3), api (2), batch (1) and no group (1),
// then takes out web/1 and api/1, so that web and api have their one slot
// taken and their other keys wait for it.
func fillGroups(t *testing.T, q *workqueue.Typed[string]) {
	t.Helper()
	for _, key := range []string{"web/1", "web/2", "web/3", "api/1", "api/2", "batch/1", "loose"} {
		q.Add(key)
	}
	for _, want := range []string{"web/1", "api/1"} {
		got, _ := q.Get()
		require.Equal(t, want, got)
	}
}

func TestView(t *testing.T) {
	errBoom := errors.New("boom")
	tests := []struct {
		name string
		// act runs on a queue registered with a handler that lists 2 keys
		// of each kind, both on clock, which reads t0.
		act  func(q *workqueue.TypedRateLimitingQueue[string], f *Failures, clock *clocktesting.FakeClock)
		want func(v *QueueView)
	}{
		{"empty", func(*workqueue.TypedRateLimitingQueue[string], *Failures, *clocktesting.FakeClock) {}, func(*QueueView) {}},
		{"queued, the first 2 listed", func(q *workqueue.TypedRateLimitingQueue[string], _ *Failures, _ *clocktesting.FakeClock) {
			q.Add("a")
			q.Add("b")
			q.Add("c")
		}, func(v *QueueView) {
			v.Depth, v.Adds, v.Queued = 3, 3, []string{"a", "b"}
		}},
		{"a stuck key, longest in flight first, and its rate", func(q *workqueue.TypedRateLimitingQueue[string], _ *Failures, clock *clocktesting.FakeClock) {
			q.Add("stuck")
			q.Get()
			clock.Step(time.Hour)
			q.Add("b")
			q.Get()
			q.Add("b")
			clock.Step(time.Second)
		}, func(v *QueueView) {
			v.Taken = t0.Add(time.Hour + time.Second)
			v.Processing, v.Adds, v.AddsPerSecond = 2, 3, rate(3/3601.0)
			v.InFlight = []InFlightKey{
				{Key: "stuck", Since: t0, AgeSeconds: 3601},
				{Key: "b", Since: t0.Add(time.Hour), AgeSeconds: 1, Requeue: true},
			}
		}},
		{"delayed, soonest first, with requeues", func(q *workqueue.TypedRateLimitingQueue[string], _ *Failures, _ *clocktesting.FakeClock) {
			q.AddAfter("later", time.Minute)
			q.AddRateLimited("retry") // 1 s
			q.AddRateLimited("retry") // 2 s: the earlier time wins
			q.AddAfter("latest", time.Hour)
		}, func(v *QueueView) {
			v.Waiting = 3
			v.Delayed = []DelayedKey{
				{Key: "retry", ReadyAt: t0.Add(time.Second), ReadyInSeconds: 1, Requeues: 2},
				{Key: "later", ReadyAt: t0.Add(time.Minute), ReadyInSeconds: 60},
			}
		}},
		{"a key waiting for its park backoff and a delayed add is counted and listed twice", func(q *workqueue.TypedRateLimitingQueue[string], _ *Failures, _ *clocktesting.FakeClock) {
			q.Add("p")
			got, _ := q.Get()
			q.Park(got, "e")
			q.Done(got)
			q.Wake("e") // p waits for its park backoff
			q.AddAfter("p", time.Minute)
		}, func(v *QueueView) {
			v.Adds, v.Waiting = 1, 2
			v.Delayed = []DelayedKey{
				{Key: "p", ReadyAt: t0.Add(5 * time.Millisecond), ReadyInSeconds: 0.005},
				{Key: "p", ReadyAt: t0.Add(time.Minute), ReadyInSeconds: 60},
			}
		}},
		{"parked, longest first, with their events", func(q *workqueue.TypedRateLimitingQueue[string], _ *Failures, clock *clocktesting.FakeClock) {
			for _, item := range []string{"first", "second", "third"} {
				q.Add(item)
				got, _ := q.Get()
				q.Park(got, "node-added", "pod-deleted")
				q.Done(got)
				clock.Step(time.Second)
			}
		}, func(v *QueueView) {
			v.Taken = t0.Add(3 * time.Second)
			v.Adds, v.AddsPerSecond, v.Parked = 3, rate(1), 3
			v.ParkedKeys = []ParkedKey{
				{Key: "first", Events: []string{"node-added", "pod-deleted"}, Since: t0, ParkedSeconds: 3},
				{Key: "second", Events: []string{"node-added", "pod-deleted"}, Since: t0.Add(time.Second), ParkedSeconds: 2},
			}
		}},
		{"failing, most failures first, then the latest", func(_ *workqueue.TypedRateLimitingQueue[string], f *Failures, clock *clocktesting.FakeClock) {
			f.ObserveError("once", errBoom, 1, true)
			clock.Step(time.Second)
			f.ObserveError("twice", errBoom, 1, true)
			f.ObserveError("twice", errors.New("bang"), 2, false)
			clock.Step(time.Second)
			f.ObserveError("once too", errBoom, 1, true)
		}, func(v *QueueView) {
			v.Taken = t0.Add(2 * time.Second)
			v.AddsPerSecond = rate(0)
			twice := FailedKey{Key: "twice", Failures: 2, LastError: "bang", LastFailed: t0.Add(time.Second), AgoSeconds: 1, State: GivenUp}
			onceToo := FailedKey{Key: "once too", Failures: 1, LastError: "boom", LastFailed: t0.Add(2 * time.Second), State: Retrying}
			v.Failing = []FailedKey{twice, onceToo}
			v.Recent = []FailedKey{onceToo, twice}
			v.FailuresLastMinute, v.Failures, v.GivenUp = 4, 4, 1
		}},
		{"a success takes the key out of the failing and shows in the recent", func(_ *workqueue.TypedRateLimitingQueue[string], f *Failures, _ *clocktesting.FakeClock) {
			f.ObserveError("a", errBoom, 1, true)
			f.ObserveError("b", errBoom, 1, true)
			f.ObserveSuccess("a")
			f.ObserveSuccess("never failed")
		}, func(v *QueueView) {
			b := FailedKey{Key: "b", Failures: 1, LastError: "boom", LastFailed: t0, State: Retrying}
			v.Failing = []FailedKey{b}
			v.Recent = []FailedKey{b, {Key: "a", Failures: 1, LastError: "boom", LastFailed: t0, State: Succeeded}}
			v.FailuresLastMinute, v.Failures = 2, 2
		}},
		// Regression: the page said "Failing: none reported" while the
		// queue controller's reconciles failed every 250 ms, as each retry
		// succeeded before the next load.
		{"a failure retried and fixed between two views still shows", func(_ *workqueue.TypedRateLimitingQueue[string], f *Failures, clock *clocktesting.FakeClock) {
			f.ObserveError("a", errBoom, 1, true)
			clock.Step(5 * time.Millisecond)
			f.ObserveSuccess("a")
		}, func(v *QueueView) {
			v.Taken = t0.Add(5 * time.Millisecond)
			v.Recent = []FailedKey{{Key: "a", Failures: 1, LastError: "boom", LastFailed: t0, AgoSeconds: 0.005, State: Succeeded}}
			v.FailuresLastMinute, v.Failures = 1, 1
		}},
		{"a key given up on shows as given up until it succeeds", func(_ *workqueue.TypedRateLimitingQueue[string], f *Failures, _ *clocktesting.FakeClock) {
			f.ObserveError("a", errBoom, 3, false)
			f.ObserveError("b", errBoom, 3, false)
			f.ObserveSuccess("b")
		}, func(v *QueueView) {
			a := FailedKey{Key: "a", Failures: 3, LastError: "boom", LastFailed: t0, State: GivenUp}
			v.Failing = []FailedKey{a}
			v.Recent = []FailedKey{{Key: "b", Failures: 3, LastError: "boom", LastFailed: t0, State: Succeeded}, a}
			v.FailuresLastMinute, v.Failures, v.GivenUp = 2, 2, 2
		}},
		{"the last minute counts whole seconds", func(_ *workqueue.TypedRateLimitingQueue[string], f *Failures, clock *clocktesting.FakeClock) {
			f.ObserveError("a", errBoom, 1, true)
			clock.Step(59 * time.Second)
			f.ObserveError("a", errBoom, 2, true)
			f.ObserveError("b", errBoom, 1, true)
			clock.Step(time.Second) // the first failure falls out
		}, func(v *QueueView) {
			v.Taken = t0.Add(time.Minute)
			v.AddsPerSecond = rate(0)
			a := FailedKey{Key: "a", Failures: 2, LastError: "boom", LastFailed: t0.Add(59 * time.Second), AgoSeconds: 1, State: Retrying}
			b := FailedKey{Key: "b", Failures: 1, LastError: "boom", LastFailed: t0.Add(59 * time.Second), AgoSeconds: 1, State: Retrying}
			v.Failing = []FailedKey{a, b}
			v.Recent = []FailedKey{b, a}
			v.FailuresLastMinute, v.Failures = 2, 3
		}},
		{"shutting down", func(q *workqueue.TypedRateLimitingQueue[string], _ *Failures, _ *clocktesting.FakeClock) {
			q.Add("a")
			q.ShutDown()
		}, func(v *QueueView) {
			v.ShuttingDown, v.Depth, v.Adds, v.Queued = true, 1, 1, []string{"a"}
		}},
		{"failing keys of a queue shutting down are not retried", func(q *workqueue.TypedRateLimitingQueue[string], f *Failures, _ *clocktesting.FakeClock) {
			f.ObserveError("a", errBoom, 1, true)
			q.ShutDown()
		}, func(v *QueueView) {
			v.ShuttingDown = true
			a := FailedKey{Key: "a", Failures: 1, LastError: "boom", LastFailed: t0, State: DroppedAtShutdown}
			v.Failing, v.Recent = []FailedKey{a}, []FailedKey{a}
			v.FailuresLastMinute, v.Failures = 1, 1
		}},
		{"a retry dropped at shutdown is not a give-up", func(q *workqueue.TypedRateLimitingQueue[string], f *Failures, _ *clocktesting.FakeClock) {
			q.ShutDown()
			f.ObserveError("a", errBoom, 1, false)
		}, func(v *QueueView) {
			v.ShuttingDown = true
			a := FailedKey{Key: "a", Failures: 1, LastError: "boom", LastFailed: t0, State: DroppedAtShutdown}
			v.Failing, v.Recent = []FailedKey{a}, []FailedKey{a}
			v.FailuresLastMinute, v.Failures = 1, 1
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				clock := clocktesting.NewFakeClock(t0)
				q := newQueue(clock)
				defer q.ShutDown()
				h := NewHandler(WithLimit(2), WithClock(clock))
				f := Register(h, "q", q)
				tt.act(q, f, clock)
				synctest.Wait()
				want := emptyQueueView("q")
				tt.want(&want)
				v := h.View()
				assert.Equal(t, clock.Now(), v.Time)
				assert.Equal(t, 2, v.Limit)
				require.Len(t, v.Queues, 1)
				assert.Equal(t, want, v.Queues[0])
			})
		})
	}
}

// TestViewGroups checks the groups of a queue with group limits: those
// with keys waiting for a slot first, then by name, no more than the
// limit, and the keys waiting for a slot counted as queued, but those of
// groups at their limit not listed.
func TestViewGroups(t *testing.T) {
	tests := []struct {
		limit int
		want  []GroupView
	}{
		{2, []GroupView{
			{Group: "api", Limit: 1, InFlight: 1, Queued: 1, WaitingForSlot: 1},
			{Group: "web", Limit: 1, InFlight: 1, Queued: 2, WaitingForSlot: 2},
		}},
		{10, []GroupView{
			{Group: "api", Limit: 1, InFlight: 1, Queued: 1, WaitingForSlot: 1},
			{Group: "web", Limit: 1, InFlight: 1, Queued: 2, WaitingForSlot: 2},
			{Group: "", Queued: 1},
			{Group: "batch", Queued: 1},
		}},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint("limit ", tt.limit), func(t *testing.T) {
			clock := clocktesting.NewFakeClock(t0)
			q := newGroupedQueue(t, clock)
			h := NewHandler(WithLimit(tt.limit), WithClock(clock))
			Register(h, "q", q)
			fillGroups(t, q)
			got := h.View().Queues[0]
			assert.Equal(t, tt.want, got.Groups)
			assert.Equal(t, 4, got.GroupCount, "web, api, batch and no group")
			assert.Equal(t, 3, got.WaitingForSlot, "web/2, web/3 and api/2")
			assert.Equal(t, 5, got.Depth, "the keys waiting for a slot are queued")
			assert.Equal(t, 2, got.Processing)
			assert.Equal(t, []string{"batch/1", "loose"}, got.Queued, "only the keys of groups with a free slot are next")
		})
	}
}

// TestViewGroupsDone checks that the Done that frees a group's slot shows:
// the group's next key no longer waits, and a group that holds no key
// drops out.
func TestViewGroupsDone(t *testing.T) {
	clock := clocktesting.NewFakeClock(t0)
	q := newGroupedQueue(t, clock)
	h := NewHandler(WithLimit(2), WithClock(clock))
	Register(h, "q", q)
	q.Add("api/1")
	q.Add("api/2")
	got, _ := q.Get()
	assert.Equal(t, []GroupView{{Group: "api", Limit: 1, InFlight: 1, Queued: 1, WaitingForSlot: 1}}, h.View().Queues[0].Groups)
	q.Done(got)
	v := h.View().Queues[0]
	assert.Equal(t, []GroupView{{Group: "api", Limit: 1, Queued: 1}}, v.Groups)
	assert.Zero(t, v.WaitingForSlot)
	got, _ = q.Get()
	q.Done(got)
	v = h.View().Queues[0]
	assert.Equal(t, []GroupView{}, v.Groups)
	assert.Zero(t, v.GroupCount)
}

// groupsSnapshotter is a Snapshotter of another module, whose groups come
// in no particular order.
type groupsSnapshotter []workqueue.GroupState

func (g groupsSnapshotter) Snapshot(int) workqueue.Snapshot[string] {
	return workqueue.Snapshot[string]{Taken: t0, Groups: g}
}

func TestViewSortsGroups(t *testing.T) {
	h := NewHandler(WithLimit(2))
	Register(h, "q", groupsSnapshotter{
		{Group: "b", Limit: 1, Queued: 1},
		{Group: "c", Limit: 1, InFlight: 1, Queued: 1, Waiting: 1},
		{Group: "a", Limit: 1, Queued: 1},
	})
	assert.Equal(t, []GroupView{
		{Group: "c", Limit: 1, InFlight: 1, Queued: 1, WaitingForSlot: 1},
		{Group: "a", Limit: 1, Queued: 1},
	}, h.View().Queues[0].Groups)
}

// TestAddsPerSecond checks the rate over a sequence of views: none until a
// second after registration, then the rate since the previous view at
// least a second before.
func TestAddsPerSecond(t *testing.T) {
	clock := clocktesting.NewFakeClock(t0)
	q := workqueue.NewTypedWithConfig(workqueue.TypedQueueConfig[int]{Clock: clock})
	defer q.ShutDown()
	h := NewHandler(WithClock(clock))
	Register(h, "q", q)
	steps := []struct {
		adds    int
		advance time.Duration
		want    *float64
	}{
		{adds: 5, advance: 500 * time.Millisecond, want: nil},
		{adds: 5, advance: 500 * time.Millisecond, want: rate(10)}, // 10 adds in the first second
		{adds: 3, advance: 500 * time.Millisecond, want: rate(10)}, // too soon: the last rate
		{adds: 0, advance: time.Second, want: rate(2)},             // 3 adds in 1.5 s
		{adds: 0, advance: 2 * time.Second, want: rate(0)},
	}
	next := 0
	for i, step := range steps {
		for range step.adds {
			q.Add(next)
			next++
		}
		clock.Step(step.advance)
		assert.Equal(t, step.want, h.View().Queues[0].AddsPerSecond, "view %d", i)
	}
}

func TestFormatKeys(t *testing.T) {
	type key struct{ namespace, name string }
	q := workqueue.NewTyped[key]()
	defer q.ShutDown()
	h := NewHandler()
	f := Register(h, "pods", q, FormatKeys(func(k key) string { return k.namespace + "/" + k.name }))
	q.Add(key{"default", "web"})
	f.ObserveError(key{"kube-system", "dns"}, errors.New("boom"), 2, true)
	f.ObserveError("not a key", errors.New("boom"), 1, true) // from a Runner of another queue
	v := h.View().Queues[0]
	assert.Equal(t, []string{"default/web"}, v.Queued)
	require.Len(t, v.Failing, 2)
	assert.Equal(t, "kube-system/dns", v.Failing[0].Key)
	assert.Equal(t, "not a key", v.Failing[1].Key, "an item of another type is shown by fmt.Sprint")
	require.Len(t, v.Recent, 2)
	assert.Equal(t, []string{"not a key", "kube-system/dns"}, []string{v.Recent[0].Key, v.Recent[1].Key})
}

func TestQueuesInRegistrationOrder(t *testing.T) {
	h := &Handler{} // the zero value works
	for _, name := range []string{"zeta", "alpha", "mid"} {
		q := workqueue.NewTyped[string]()
		defer q.ShutDown()
		Register(h, name, q)
	}
	var names []string
	for _, q := range h.View().Queues {
		names = append(names, q.Name)
	}
	assert.Equal(t, []string{"zeta", "alpha", "mid"}, names)
	assert.Equal(t, DefaultLimit, h.View().Limit)
}

func TestFailuresTable(t *testing.T) {
	type call struct {
		item     string
		failures int // 0 for a success
	}
	tests := []struct {
		name        string
		calls       []call   // a second apart, on a record of 2 keys
		wantFailing []string // most failures first
		wantRecent  []string // latest first
	}{
		{"fills up", []call{{"a", 1}, {"b", 3}}, []string{"b 3", "a 1"}, []string{"b 3", "a 1"}},
		{"a key counts once", []call{{"a", 1}, {"a", 2}, {"a", 3}}, []string{"a 3"}, []string{"a 3"}},
		{"the fewest failures make room", []call{{"a", 5}, {"b", 2}, {"c", 3}}, []string{"a 5", "c 3"}, []string{"c 3", "b 2"}},
		{"the oldest of equals makes room", []call{{"a", 1}, {"b", 1}, {"c", 1}}, []string{"c 1", "b 1"}, []string{"c 1", "b 1"}},
		{"more failures keep their place", []call{{"a", 5}, {"b", 4}, {"c", 1}}, []string{"a 5", "b 4"}, []string{"c 1", "b 4"}},
		{"a key with few failures climbs", []call{{"a", 5}, {"b", 4}, {"c", 1}, {"c", 2}, {"c", 4}}, []string{"a 5", "c 4"}, []string{"c 4", "b 4"}},
		{"a success makes room", []call{{"a", 5}, {"b", 4}, {"a", 0}, {"c", 1}}, []string{"b 4", "c 1"}, []string{"c 1", "b 4"}},
		{"a success stays recent", []call{{"a", 1}, {"b", 1}, {"a", 0}}, []string{"b 1"}, []string{"b 1", "a 1 succeeded"}},
		{"a failure after a success is recent again", []call{{"a", 1}, {"a", 0}, {"a", 1}}, []string{"a 1"}, []string{"a 1"}},
		{"a count that starts over is taken as it is", []call{{"a", 5}, {"a", 1}}, []string{"a 1"}, []string{"a 1"}},
	}
	rows := func(keys []FailedKey) []string {
		var got []string
		for _, k := range keys {
			row := fmt.Sprintf("%s %d", k.Key, k.Failures)
			if k.State != Retrying {
				row += " " + string(k.State)
			}
			got = append(got, row)
		}
		return got
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := clocktesting.NewFakeClock(t0)
			f := newFailures(2, clock, func(item any) string { return item.(string) }, nil)
			for _, c := range tt.calls {
				if c.failures == 0 {
					f.ObserveSuccess(c.item)
				} else {
					f.ObserveError(c.item, errors.New("boom"), c.failures, true)
				}
				clock.Step(time.Second)
				verifyFailures(t, f)
			}
			var v QueueView
			f.fill(&v, clock.Now())
			assert.Equal(t, tt.wantFailing, rows(v.Failing), "failing")
			assert.Equal(t, tt.wantRecent, rows(v.Recent), "recent")
		})
	}
}

// verifyFailures checks the invariant of a Failures: each map holds at
// most limit keys, open counts the recent entries not Succeeded, and
// watched is len(failing) + open.
func verifyFailures(t *testing.T, f *Failures) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	open := 0
	for _, e := range f.recent {
		if e.state != Succeeded {
			open++
		}
	}
	assert.LessOrEqual(t, len(f.failing), f.limit, "failing keys")
	assert.LessOrEqual(t, len(f.recent), f.limit, "recent failures")
	assert.Equal(t, open, f.open, "open")
	assert.Equal(t, int64(len(f.failing)+open), f.watched.Load(), "watched")
}

func TestFailuresKeepsErrorTextBounded(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"short", errors.New("boom"), "boom"},
		{"nil", nil, ""},
		{"long", errors.New(strings.Repeat("x", 2000)), strings.Repeat("x", maxErrorText-len("…")) + "…"},
		{"cut at a rune", errors.New(strings.Repeat("é", 1000)), strings.Repeat("é", (maxErrorText-len("…"))/2) + "…"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFailures(1, clocktesting.NewFakeClock(t0), func(item any) string { return fmt.Sprint(item) }, nil)
			f.ObserveError("a", tt.err, 1, true)
			var v QueueView
			f.fill(&v, t0)
			rows := v.Failing
			require.Len(t, rows, 1)
			assert.Equal(t, tt.want, rows[0].LastError)
			assert.LessOrEqual(t, len(rows[0].LastError), maxErrorText)
		})
	}
}

func TestPanics(t *testing.T) {
	q := workqueue.NewTyped[string]()
	defer q.ShutDown()
	h := NewHandler()
	Register(h, "taken", q)
	tests := []struct {
		name string
		call func()
		want string
	}{
		{"WithLimit 0", func() { WithLimit(0) }, "inspect: WithLimit(0): need at least 1"},
		{"nil Handler option", func() { NewHandler(nil) }, "inspect: NewHandler got a nil option at position 0"},
		{"nil Handler", func() { Register(nil, "q", q) }, "inspect: Register needs a Handler, got nil"},
		{"empty name", func() { Register(h, "", q) }, "inspect: Register needs a queue name, got an empty one"},
		{"duplicate name", func() { Register(h, "taken", q) }, `inspect: Register("taken"): a queue of that name is registered already`},
		{"nil queue", func() { Register[string](h, "q", nil) }, `inspect: Register("q") needs a queue, got nil`},
		{"typed nil queue", func() { Register[string](h, "q", (*workqueue.Typed[string])(nil)) }, `inspect: Register("q") needs a queue, got nil`},
		{"nil key option", func() { Register(h, "q", q, nil) }, `inspect: Register("q") got a nil option at position 0`},
		{"nil format", func() { FormatKeys[string](nil) }, "inspect: FormatKeys needs a function, got nil"},
		{"zero Failures", func() { new(Failures).ObserveError("a", nil, 1, true) }, "inspect: a Failures not made by Register"},
		{"nil Failures", func() { (*Failures)(nil).ObserveSuccess("a") }, "inspect: a Failures not made by Register"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.PanicsWithValue(t, tt.want, tt.call)
		})
	}
	assert.Len(t, h.View().Queues, 1, "a Register that panicked registers nothing")
}

func serve(h http.Handler, method, target string) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, target, nil))
	return rec
}

func TestServeHTTP(t *testing.T) {
	q := workqueue.NewTyped[string]()
	defer q.ShutDown()
	h := NewHandler(WithLimit(1))
	Register(h, "pods", q)
	q.Add("default/web")
	q.Add("default/db")
	tests := []struct {
		method, target string
		wantStatus     int
		wantType       string
		wantBody       []string // substrings
		notBody        []string
	}{
		{"GET", "/debug/queues", 200, "text/html; charset=utf-8", []string{
			`<section class="queue" data-queue="pods">`, `<li class="key">default/web</li>`, `href="?refresh=5"`,
			`Queued, next first <span class="muted">(1 of 2 listed)</span>`,
			`In flight, longest first: <span class="muted">none</span>`,
			`Failing now, most failures first: <span class="muted">none</span>`,
			`Failed recently, latest first: <span class="muted">none</span>`,
		}, []string{`http-equiv="refresh"`, "default/db"}},
		{"GET", "/debug/queues?format=html&refresh=0", 200, "text/html; charset=utf-8", []string{"default/web"}, []string{`http-equiv="refresh"`}},
		{"GET", "/debug/queues?refresh=5", 200, "text/html; charset=utf-8", []string{`<meta http-equiv="refresh" content="5">`, `<b>5 s</b>`, `<a href="?">off</a>`}, nil},
		{"GET", "/debug/queues?format=json", 200, "application/json", []string{`"name": "pods"`, `"queued": [`, `"default/web"`}, nil},
		{"HEAD", "/debug/queues", 200, "text/html; charset=utf-8", nil, nil},
		{"GET", "/debug/queues?format=xml", 400, "text/plain; charset=utf-8", []string{`format="xml": want html or json`}, nil},
		{"GET", "/debug/queues?refresh=soon", 400, "text/plain; charset=utf-8", []string{`refresh="soon": want seconds from 0 (off) to 3600`}, nil},
		{"GET", "/debug/queues?refresh=3601", 400, "text/plain; charset=utf-8", []string{`refresh="3601"`}, nil},
		{"POST", "/debug/queues", 405, "text/plain; charset=utf-8", []string{"read-only"}, nil},
		{"PUT", "/debug/queues?format=json", 405, "text/plain; charset=utf-8", []string{"read-only"}, nil},
		{"DELETE", "/debug/queues", 405, "text/plain; charset=utf-8", []string{"read-only"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.target, func(t *testing.T) {
			rec := serve(h, tt.method, tt.target)
			assert.Equal(t, tt.wantStatus, rec.Code)
			assert.Equal(t, tt.wantType, rec.Header().Get("Content-Type"))
			for _, want := range tt.wantBody {
				assert.Contains(t, rec.Body.String(), want)
			}
			for _, unwanted := range tt.notBody {
				assert.NotContains(t, rec.Body.String(), unwanted)
			}
			if tt.wantStatus == 405 {
				assert.Equal(t, "GET, HEAD", rec.Header().Get("Allow"))
			}
			if tt.wantStatus == 200 {
				assert.Equal(t, "no-store", rec.Header().Get("Cache-Control"))
			}
		})
	}
	assert.Equal(t, 2, q.Len(), "serving changed nothing")
}

// TestEscaping puts markup in every place user data reaches: keys of each
// list, a queue name and an error text.
func TestEscaping(t *testing.T) {
	const key = `<script>alert(1)</script>`
	const errText = `<img src=x onerror=alert(2)> & "quoted"`
	clock := clocktesting.NewFakeClock(t0)
	q := newQueue(clock)
	defer q.ShutDown()
	h := NewHandler(WithClock(clock))
	f := Register(h, `<b>"name"</b>`, q)
	q.Add(key)
	q.Get()
	q.Add(key)
	q.AddAfter(key+"later", time.Minute)
	q.Add(key + "parked")
	parked, _ := q.Get()
	q.Park(parked, key+"event")
	q.Done(parked)
	q.Add(key + "queued")
	f.ObserveError(key, errors.New(errText), 1, true)

	page := serve(h, "GET", "/?refresh=2").Body.String()
	for _, raw := range []string{"<script", "<img", "<b>\"name", `"quoted"`} {
		assert.NotContains(t, page, raw)
	}
	assert.Equal(t, 7, strings.Count(page, "&lt;script&gt;alert(1)&lt;/script&gt;"), "in flight, failing, failed recently, waiting, parked with its event, and queued")
	assert.Contains(t, page, "&lt;img src=x onerror=alert(2)&gt; &amp; &#34;quoted&#34;")
	assert.Contains(t, page, `data-queue="&lt;b&gt;&#34;name&#34;&lt;/b&gt;"`)

	body := serve(h, "GET", "/?format=json").Body.String()
	assert.NotContains(t, body, "<", "JSON escapes markup")
	var v View
	require.NoError(t, json.Unmarshal([]byte(body), &v))
	require.Len(t, v.Queues, 1)
	got := v.Queues[0]
	assert.Equal(t, `<b>"name"</b>`, got.Name)
	assert.Equal(t, []string{key + "queued"}, got.Queued)
	assert.Equal(t, key, got.InFlight[0].Key)
	assert.Equal(t, key+"later", got.Delayed[0].Key)
	assert.Equal(t, ParkedKey{Key: key + "parked", Events: []string{key + "event"}, Since: t0}, got.ParkedKeys[0])
	assert.Equal(t, errText, got.Failing[0].LastError)
}

// TestRunnerReportsToFailures wires a Runner to a registration, as a user
// would, and checks the failing keys it reports.
func TestRunnerReportsToFailures(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := workqueue.NewTypedRateLimitingQueue(workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Second, time.Minute))
		h := NewHandler()
		failures := Register(h, "q", q)
		var fixed sync.Map
		runner := reconcile.NewRunner(q, func(_ context.Context, key string) (reconcile.Result, error) {
			if _, ok := fixed.Load(key); ok {
				return reconcile.Result{}, nil
			}
			return reconcile.Result{}, fmt.Errorf("cannot reconcile %s", key)
		}, reconcile.WithErrorObserver(failures), reconcile.WithMaxRetries(3), reconcile.WithLogger(nopLogger))
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() {
			runner.Run(ctx, 2)
			close(done)
		}()
		q.Add("flaky")
		q.Add("broken")
		time.Sleep(1500 * time.Millisecond) // both failed twice: at 0 s and 1 s
		synctest.Wait()
		failing := h.View().Queues[0].Failing
		require.Len(t, failing, 2)
		for _, f := range failing {
			assert.Equal(t, 2, f.Failures, f.Key)
			assert.Equal(t, Retrying, f.State, f.Key)
			assert.Equal(t, "cannot reconcile "+f.Key, f.LastError)
		}

		fixed.Store("flaky", true)
		time.Sleep(time.Hour)
		synctest.Wait()
		v := h.View().Queues[0]
		require.Len(t, v.Failing, 1, "flaky succeeded")
		assert.Equal(t, "broken", v.Failing[0].Key)
		assert.Equal(t, 4, v.Failing[0].Failures, "given up after 3 retries")
		assert.Equal(t, GivenUp, v.Failing[0].State)
		require.Len(t, v.Recent, 2)
		assert.Equal(t, v.Failing[0], v.Recent[0], "broken failed last")
		assert.Equal(t, "flaky", v.Recent[1].Key)
		assert.Equal(t, 2, v.Recent[1].Failures)
		assert.Equal(t, Succeeded, v.Recent[1].State)
		assert.EqualValues(t, 6, v.Failures, "flaky twice, broken 4 times")
		assert.EqualValues(t, 1, v.GivenUp)
		cancel()
		<-done
	})
}

// TestConcurrentUse serves, registers, observes and changes queues from
// many goroutines at once, for the race detector.
func TestConcurrentUse(t *testing.T) {
	h := NewHandler(WithLimit(5))
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[int]())
	defer q.ShutDown()
	failures := Register(h, "shared", q)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() { // a worker
			for i := range 200 {
				q.Add(i % 17)
				ctx, cancel := context.WithTimeout(t.Context(), 10*time.Millisecond)
				item, err := q.GetContext(ctx) // another worker may have taken the key
				cancel()
				if err == nil {
					if i%3 == 0 {
						failures.ObserveError(item, errors.New("boom"), i, true)
						q.AddRateLimited(item)
					} else {
						failures.ObserveSuccess(item)
						q.Forget(item)
					}
					q.Done(item)
				}
			}
		})
		wg.Go(func() { // a reader
			for range 50 {
				assert.Equal(t, 200, serve(h, "GET", "/").Code)
				assert.Equal(t, 200, serve(h, "GET", "/?format=json").Code)
			}
		})
		wg.Go(func() { // a registration
			other := workqueue.NewTyped[string]()
			defer other.ShutDown()
			Register(h, fmt.Sprint("other-", g), other).ObserveError("x", errors.New("boom"), 1, false)
		})
	}
	wg.Wait()
	v := h.View()
	assert.Len(t, v.Queues, 5)
	assert.LessOrEqual(t, len(v.Queues[0].Failing), 5)
	assert.LessOrEqual(t, len(v.Queues[0].Recent), 5)
	verifyFailures(t, failures)
}
