package crqueue_test

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	ctrlworkqueue "k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"

	"github.com/go-workqueue/workqueue"
	crqueue "github.com/go-workqueue/workqueue/controllerruntime"
)

// step is one operation of a behaviour case.
type step struct {
	add      []string // items to add with the options below
	priority *int
	after    time.Duration
	limited  bool
	get      string // item the next GetWithPriority must hand out
	getPrio  int    // and its priority
	done     string // item to mark done
	len      *int   // Len must be this (eventually, for delays)
	shutdown bool   // ShutDown the queue
}

func p(n int) *int { return &n }

// handed is an item with the priority it was handed out at.
type handed struct {
	Item     string
	Priority int
}

// behaviour is every merge rule of the priority queue, as a table run
// against our adapter and controller-runtime's own queue. want is the
// order in which the items still ready at the end are handed out, the
// same for both queues.
var behaviour = []struct {
	name  string
	steps []step
	want  []handed
	// crLen replaces the len checks for controller-runtime's queue.
	crLen map[int]int
}{
	{name: "an item is stored once",
		steps: []step{{add: []string{"a", "a"}}, {add: []string{"a"}}, {len: p(1)}},
		want:  []handed{{"a", 0}}},
	{name: "FIFO within a level",
		steps: []step{{add: []string{"a", "b", "c"}}},
		want:  []handed{{"a", 0}, {"b", 0}, {"c", 0}}},
	{name: "higher priority first",
		steps: []step{{add: []string{"a"}}, {add: []string{"b"}, priority: p(2)}, {add: []string{"c"}, priority: p(1)}, {add: []string{"d"}, priority: p(-100)}},
		want:  []handed{{"b", 2}, {"c", 1}, {"a", 0}, {"d", -100}}},
	{name: "a re-add keeps the highest priority",
		steps: []step{{add: []string{"a"}, priority: p(5)}, {add: []string{"a"}, priority: p(1)}, {add: []string{"b"}, priority: p(1)}, {add: []string{"b"}, priority: p(3)}},
		want:  []handed{{"a", 5}, {"b", 3}}},
	{name: "a raised item goes behind those waiting at its new level",
		steps: []step{{add: []string{"a"}}, {add: []string{"b", "c"}, priority: p(1)}, {add: []string{"a"}, priority: p(1)}},
		want:  []handed{{"b", 1}, {"c", 1}, {"a", 1}}},
	{name: "a re-add at an equal or lower priority does not move it",
		steps: []step{{add: []string{"a", "b"}, priority: p(1)}, {add: []string{"a"}, priority: p(1)}, {add: []string{"a"}}},
		want:  []handed{{"a", 1}, {"b", 1}}},
	{name: "a re-add keeps the earliest ready time",
		steps: []step{{add: []string{"a"}, after: time.Hour}, {len: p(0)}, {add: []string{"a"}}, {len: p(1)}, {add: []string{"a"}, after: time.Hour}, {len: p(1)}},
		want:  []handed{{"a", 0}}},
	{name: "Len counts only ready items",
		steps: []step{{add: []string{"a"}, after: time.Hour}, {add: []string{"b"}}, {len: p(1)}},
		want:  []handed{{"b", 0}}},
	{name: "RateLimited waits for the limiter's delay",
		steps: []step{{add: []string{"a"}, limited: true}, {len: p(0)}, {add: []string{"b"}}, {len: p(1)}},
		want:  []handed{{"b", 0}}},
	{name: "RateLimited with After: the shorter delay wins",
		steps: []step{{add: []string{"a"}, limited: true, after: time.Millisecond}, {len: p(1)}},
		want:  []handed{{"a", 0}}},
	{name: "never handed to two workers; re-queued at Done",
		steps: []step{{add: []string{"a", "b"}}, {get: "a"}, {add: []string{"a"}}, {len: p(1)}, {get: "b"}, {len: p(0)}, {done: "a"}, {len: p(1)}, {done: "b"}},
		want:  []handed{{"a", 0}},
		// controller-runtime's Len counts the re-added item while it is
		// still being processed.
		crLen: map[int]int{3: 2, 5: 1}},
	{name: "re-queued at Done at the highest priority asked for meanwhile",
		steps: []step{{add: []string{"a"}}, {get: "a"}, {add: []string{"a"}, priority: p(3)}, {add: []string{"a"}, priority: p(1)}, {add: []string{"b"}, priority: p(2)}, {done: "a"}},
		want:  []handed{{"a", 3}, {"b", 2}}},
	{name: "ShutDown stops the hand-out",
		steps: []step{{add: []string{"a", "b"}}, {shutdown: true}, {add: []string{"c"}}},
		want:  nil},
}

// hour is a limiter whose delay is an hour, so RateLimited items stay
// waiting for the whole test.
func hour() ctrlworkqueue.TypedRateLimiter[string] {
	return ctrlworkqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Hour, time.Hour)
}

func TestBehaviourTable(t *testing.T) {
	queues := []struct {
		name string
		cr   bool
		make func() priorityqueue.PriorityQueue[string]
	}{
		{"crqueue", false, func() priorityqueue.PriorityQueue[string] { return crqueue.New("", hour()) }},
		{"controller-runtime", true, func() priorityqueue.PriorityQueue[string] {
			return priorityqueue.New("", func(o *priorityqueue.Opts[string]) { o.RateLimiter = hour() })
		}},
	}
	for _, tc := range behaviour {
		for _, qc := range queues {
			t.Run(tc.name+"/"+qc.name, func(t *testing.T) {
				q := qc.make()
				// controller-runtime's ShutDown panics when called twice
				// (TestShutDownTwice).
				shutDown := sync.OnceFunc(q.ShutDown)
				defer shutDown()
				for i, s := range tc.steps {
					switch {
					case s.add != nil:
						q.AddWithOpts(priorityqueue.AddOpts{Priority: s.priority, After: s.after, RateLimited: s.limited}, s.add...)
					case s.get != "":
						item, prio, shutdown := getWithin(t, q)
						require.False(t, shutdown, "step %d", i)
						assert.Equal(t, handed{s.get, s.getPrio}, handed{item, prio}, "step %d", i)
					case s.done != "":
						q.Done(s.done)
					case s.len != nil:
						want := *s.len
						if n, ok := tc.crLen[i]; ok && qc.cr {
							want = n
						}
						require.Eventually(t, func() bool { return q.Len() == want }, 2*time.Second, time.Millisecond, "step %d: Len %d, want %d", i, q.Len(), want)
					case s.shutdown:
						shutDown()
					}
				}
				want := tc.want
				var got []handed
				for range len(want) + 1 {
					if q.Len() == 0 && (q.ShuttingDown() || len(got) == len(want)) {
						break
					}
					item, prio, shutdown := getWithin(t, q)
					if shutdown {
						break
					}
					got = append(got, handed{item, prio})
					q.Done(item)
				}
				assert.Equal(t, want, got)
				if q.ShuttingDown() {
					_, _, shutdown := getWithin(t, q)
					assert.True(t, shutdown, "Get after ShutDown reports shutdown")
				}
			})
		}
	}
}

// getWithin is GetWithPriority that fails the test after 2s, shutting
// the queue down to release the blocked Get.
func getWithin(t *testing.T, q priorityqueue.PriorityQueue[string]) (string, int, bool) {
	t.Helper()
	type result struct {
		item     string
		prio     int
		shutdown bool
	}
	ch := make(chan result, 1)
	go func() {
		item, prio, shutdown := q.GetWithPriority()
		ch <- result{item, prio, shutdown}
	}()
	select {
	case r := <-ch:
		return r.item, r.prio, r.shutdown
	case <-time.After(2 * time.Second):
		q.ShutDown()
		<-ch
		t.Fatal("GetWithPriority blocked for 2s")
		return "", 0, true
	}
}

// TestShutDownTwice pins a difference: a second ShutDown does nothing on
// our queue, and panics (close of a closed channel) on controller-runtime's.
func TestShutDownTwice(t *testing.T) {
	ours := crqueue.New[string]("", nil)
	ours.ShutDown()
	assert.NotPanics(t, ours.ShutDown)

	theirs := priorityqueue.New[string]("")
	theirs.ShutDown()
	assert.Panics(t, theirs.ShutDown)
}

// TestQueueDocClaims checks what the docs of Queue's methods promise beyond
// controller-runtime's behaviour table.
func TestQueueDocClaims(t *testing.T) {
	byFirstRune := func(s string) string { return s[:1] }
	tests := []struct {
		name  string
		opts  []crqueue.Option[string]
		check func(t *testing.T, q *crqueue.Queue[string])
	}{
		{"Remove forgets the rate limiter's failures", nil, func(t *testing.T, q *crqueue.Queue[string]) {
			q.AddRateLimited("a")
			q.AddRateLimited("a")
			require.Equal(t, 2, q.NumRequeues("a"))
			assert.True(t, q.Remove("a"), "Remove of a delayed item")
			assert.Zero(t, q.NumRequeues("a"))
			assert.False(t, q.Remove("a"), "Remove of an item no longer held")
		}},
		{"Len counts items waiting for a slot of their group", []crqueue.Option[string]{
			crqueue.WithGroupLimits(workqueue.GroupLimits[string]{Group: byFirstRune, Default: 1}),
		}, func(t *testing.T, q *crqueue.Queue[string]) {
			q.Add("a1")
			q.Add("a2")
			item, _ := q.Get()
			require.Equal(t, "a1", item)
			assert.Equal(t, 1, q.Len(), "a2 waits for a's slot")
			q.Done(item)
		}},
		{"SetGroupLimit does nothing without WithGroupLimits", nil, func(t *testing.T, q *crqueue.Queue[string]) {
			q.SetGroupLimit("a", 1)
			q.Add("a1")
			q.Add("a2")
			first, _ := q.Get()
			second, _ := q.Get()
			assert.ElementsMatch(t, []string{"a1", "a2"}, []string{first, second})
		}},
		{"ShuttingDown after ShutDownWithDrain", nil, func(t *testing.T, q *crqueue.Queue[string]) {
			q.ShutDownWithDrain()
			assert.True(t, q.ShuttingDown())
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := crqueue.New[string]("", ctrlworkqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Hour, time.Hour), tt.opts...)
			defer q.ShutDown()
			tt.check(t, q)
		})
	}
}

// TestConstructorPanicsOnBadOptions checks the panics NewQueue's doc
// names: its constructor, not NewQueue, panics on each bad option.
func TestConstructorPanicsOnBadOptions(t *testing.T) {
	for _, tt := range []struct {
		name string
		opt  crqueue.Option[string]
	}{
		{"nil fairness function", crqueue.WithFairness[string](nil)},
		{"negative MaxWait", crqueue.WithMaxWait[string](-time.Second)},
		{"nil Group", crqueue.WithGroupLimits(workqueue.GroupLimits[string]{Default: 1})},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var constructor func(string, ctrlworkqueue.TypedRateLimiter[string]) ctrlworkqueue.TypedRateLimitingInterface[string]
			require.NotPanics(t, func() { constructor = crqueue.NewQueue(tt.opt) })
			assert.Panics(t, func() { constructor("crq-bad", nil) })
		})
	}
}
