package workqueue

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-workqueue/workqueue/internal/grouped"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// pqStep is one step of a behaviour test: an add, a Get with the item and
// priority it must return, a Done, a wait, or a check of Len.
type pqStep struct {
	do       string // "add", "get", "done", "sleep", "len", "ratelimited", "remove"
	item     string
	priority int
	after    time.Duration
	want     string // get: "item@priority"; len: the count; remove: "true"/"false"
}

func add(item string, priority int) pqStep { return pqStep{do: "add", item: item, priority: priority} }
func addAfter(item string, priority int, after time.Duration) pqStep {
	return pqStep{do: "add", item: item, priority: priority, after: after}
}
func get(want string) pqStep           { return pqStep{do: "get", want: want} }
func done(item string) pqStep          { return pqStep{do: "done", item: item} }
func sleep(d time.Duration) pqStep     { return pqStep{do: "sleep", after: d} }
func length(n int) pqStep              { return pqStep{do: "len", want: fmt.Sprint(n)} }
func removed(item, want string) pqStep { return pqStep{do: "remove", item: item, want: want} }

// runPQSteps applies steps to q in a synctest bubble, checking the
// invariant after each, then hands out every ready item, marking each done
// at once, and returns them as "item@priority".
func runPQSteps(t *testing.T, q *TypedPriorityQueue[string], steps []pqStep) []string {
	t.Helper()
	for i, s := range steps {
		switch s.do {
		case "add":
			q.AddWithOpts(AddOpts{After: s.after, Priority: &s.priority}, s.item)
		case "ratelimited":
			q.AddWithOpts(AddOpts{After: s.after, RateLimited: true, Priority: &s.priority}, s.item)
		case "get":
			item, priority, shutdown := q.GetWithPriority()
			require.False(t, shutdown, "step %d", i)
			require.Equal(t, s.want, fmt.Sprintf("%s@%d", item, priority), "step %d: got X, want Y", i)
		case "done":
			q.Done(s.item)
		case "sleep":
			time.Sleep(s.after)
		case "len":
			require.Equal(t, s.want, fmt.Sprint(q.Len()), "step %d: Len", i)
		case "remove":
			require.Equal(t, s.want, fmt.Sprint(q.Remove(s.item)), "step %d: Remove(%s)", i, s.item)
		}
		synctest.Wait()
		require.NoError(t, verifyPriorityQueue(q), "step %d", i)
	}
	var out []string
	for q.Len() > 0 {
		item, priority, _ := q.GetWithPriority()
		out = append(out, fmt.Sprintf("%s@%d", item, priority))
		q.Done(item)
		require.NoError(t, verifyPriorityQueue(q))
	}
	return out
}

func newTestPQ(config TypedPriorityQueueConfig[string]) *TypedPriorityQueue[string] {
	return NewTypedPriorityQueue(NewTypedItemExponentialFailureRateLimiter[string](time.Second, time.Minute), config)
}

// TestPriorityQueueMergeRules checks every merge rule of the priority queue
// with the exact order in which the items are handed out.
func TestPriorityQueueMergeRules(t *testing.T) {
	for _, tc := range []struct {
		name  string
		steps []pqStep
		want  []string
	}{
		{"FIFO within a level", []pqStep{add("a", 0), add("b", 0), add("c", 0)}, []string{"a@0", "b@0", "c@0"}},
		{"higher priority first", []pqStep{add("a", 0), add("b", 1), add("c", -1), add("d", 2), add("e", 1)},
			[]string{"d@2", "b@1", "e@1", "a@0", "c@-1"}},
		{"an item is stored once", []pqStep{add("a", 0), add("a", 0), add("b", 0), add("a", 0), length(2)}, []string{"a@0", "b@0"}},
		{"a raised item goes behind its new level", []pqStep{add("a", 1), add("b", 0), add("c", 1), add("d", 0), add("b", 1)},
			[]string{"a@1", "c@1", "b@1", "d@0"}},
		{"a re-add at a lower priority does not move it", []pqStep{add("a", 1), add("b", 1), add("a", 0), add("c", 1)},
			[]string{"a@1", "b@1", "c@1"}},
		{"a re-add at the same priority does not move it", []pqStep{add("a", 0), add("b", 0), add("a", 0)}, []string{"a@0", "b@0"}},
		{"the earliest ready time wins", []pqStep{addAfter("a", 0, 10*time.Second), addAfter("a", 0, time.Second), length(0),
			sleep(time.Second), length(1)}, []string{"a@0"}},
		{"a later ready time does not delay a queued item", []pqStep{add("a", 0), addAfter("a", 0, time.Second), length(1)}, []string{"a@0"}},
		{"a delayed re-add raises a queued item at once", []pqStep{add("a", 0), add("b", 2), addAfter("a", 2, time.Hour), length(2)},
			[]string{"b@2", "a@2"}},
		{"an add ends a delay and keeps the highest priority", []pqStep{addAfter("a", 3, time.Second), add("b", 3), add("a", 0), length(2),
			sleep(2 * time.Second), length(2)}, []string{"b@3", "a@3"}},
		{"delayed adds keep the highest priority", []pqStep{addAfter("a", 2, time.Second), addAfter("a", 0, 5*time.Second), sleep(time.Second)},
			[]string{"a@2"}},
		{"an item whose delay ends goes behind the queued items", []pqStep{addAfter("a", 0, time.Second), add("b", 0), sleep(time.Second), add("c", 0)},
			[]string{"b@0", "a@0", "c@0"}},
		{"never handed to two workers", []pqStep{add("a", 0), get("a@0"), add("a", 0), length(0), add("b", 0), get("b@0"), done("b"), length(0),
			done("a"), length(1)}, []string{"a@0"}},
		{"re-added while processing: queued by Done at the highest priority", []pqStep{add("a", 0), get("a@0"), add("a", 1), add("a", 3),
			add("a", 2), add("b", 2), length(1), done("a"), add("c", 3)}, []string{"a@3", "c@3", "b@2"}},
		{"a priority asked before the hand-out does not carry over", []pqStep{add("a", 5), get("a@5"), add("a", 0), done("a")}, []string{"a@0"}},
		{"delayed while processing: ready, then queued by Done", []pqStep{add("a", 0), get("a@0"), addAfter("a", 1, time.Second), sleep(time.Second),
			length(0), done("a"), length(1)}, []string{"a@1"}},
		{"delayed while processing: Done first, then the delay", []pqStep{add("a", 0), get("a@0"), addAfter("a", 0, time.Second), done("a"),
			length(0), sleep(time.Second), length(1)}, []string{"a@0"}},
		{"Len counts only ready items", []pqStep{add("a", 0), addAfter("b", 0, time.Second), get("a@0"), add("a", 0), length(0)}, nil},
		{"rate limited: the limiter's delay", []pqStep{{do: "ratelimited", item: "a"}, sleep(999 * time.Millisecond), length(0),
			sleep(time.Millisecond), length(1)}, []string{"a@0"}},
		{"rate limited with After: the shorter delay", []pqStep{{do: "ratelimited", item: "a", after: 10 * time.Millisecond, priority: 1},
			sleep(10 * time.Millisecond), length(1)}, []string{"a@1"}},
		{"Remove takes back queued, delayed and pending re-adds", []pqStep{add("a", 0), addAfter("b", 0, time.Second), add("c", 0), get("a@0"),
			add("a", 0), removed("a", "true"), removed("b", "true"), removed("d", "false"), done("a"), sleep(time.Second), length(1),
			removed("c", "true"), removed("c", "false"), length(0)}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				q := newTestPQ(TypedPriorityQueueConfig[string]{})
				defer q.ShutDown()
				assert.Equal(t, tc.want, runPQSteps(t, q, tc.steps))
			})
		})
	}
}

// tenant is the fairness key of the test items "tenant/name".
func tenant(item string) string { t, _, _ := strings.Cut(item, "/"); return t }

// namespace is the second key of the test items "cluster/namespace/name".
func namespace(item string) string {
	parts := strings.SplitN(item, "/", 3)
	return parts[1]
}

func adds(priority int, items ...string) []pqStep {
	var steps []pqStep
	for _, item := range items {
		steps = append(steps, add(item, priority))
	}
	return steps
}

func TestPriorityQueueFairness(t *testing.T) {
	for _, tc := range []struct {
		name     string
		fairness []func(string) string
		steps    []pqStep
		want     []string
	}{
		{"round-robin across keys", []func(string) string{tenant},
			adds(0, "a/1", "a/2", "a/3", "a/4", "b/1", "c/1", "c/2"),
			[]string{"a/1@0", "b/1@0", "c/1@0", "a/2@0", "c/2@0", "a/3@0", "a/4@0"}},
		{"without fairness: FIFO", nil,
			adds(0, "a/1", "a/2", "a/3", "b/1"),
			[]string{"a/1@0", "a/2@0", "a/3@0", "b/1@0"}},
		{"a new key waits for one item of each active key", []func(string) string{tenant},
			append(adds(0, "a/1", "a/2", "a/3", "b/1", "b/2", "b/3"), get("a/1@0"), done("a/1"), add("c/1", 0)),
			[]string{"b/1@0", "a/2@0", "c/1@0", "b/2@0", "a/3@0", "b/3@0"}},
		{"a key that empties joins at the back again", []func(string) string{tenant},
			append(adds(0, "a/1", "b/1", "b/2"), get("a/1@0"), done("a/1"), add("a/2", 0)),
			[]string{"b/1@0", "a/2@0", "b/2@0"}},
		{"priority before fairness", []func(string) string{tenant},
			append(adds(0, "a/1", "a/2", "b/1"), adds(1, "b/2", "b/3")...),
			[]string{"b/2@1", "b/3@1", "a/1@0", "b/1@0", "a/2@0"}},
		{"a raised item takes its key's turn at the new level", []func(string) string{tenant},
			append(adds(0, "a/1", "a/2", "b/1", "b/2"), add("a/2", 1), add("c/1", 1)),
			[]string{"a/2@1", "c/1@1", "a/1@0", "b/1@0", "b/2@0"}},
		{"nested: clusters, then namespaces", []func(string) string{tenant, namespace},
			adds(0, "c1/n1/1", "c1/n1/2", "c1/n1/3", "c1/n2/1", "c2/n1/1", "c2/n1/2"),
			[]string{"c1/n1/1@0", "c2/n1/1@0", "c1/n2/1@0", "c2/n1/2@0", "c1/n1/2@0", "c1/n1/3@0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				q := newTestPQ(TypedPriorityQueueConfig[string]{Fairness: tc.fairness})
				defer q.ShutDown()
				assert.Equal(t, tc.want, runPQSteps(t, q, tc.steps))
			})
		})
	}
}

// TestPriorityQueueFairnessBound checks the promise of fairness: one item
// of a light key waits for at most one item of each other active key,
// whatever their backlog.
func TestPriorityQueueFairnessBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := newTestPQ(TypedPriorityQueueConfig[string]{Fairness: []func(string) string{tenant}})
		defer q.ShutDown()
		for i := range 1000 {
			q.Add(fmt.Sprintf("heavy/%d", i))
			q.Add(fmt.Sprintf("other/%d", i))
		}
		for round := range 50 {
			q.Add(fmt.Sprintf("light/%d", round))
			before := 0
			for {
				item, _ := q.Get()
				q.Done(item)
				if tenant(item) == "light" {
					break
				}
				before++
			}
			require.LessOrEqual(t, before, 2, "round %d", round)
		}
	})
}

// TestPriorityQueueFairnessManyLightKeys adds, between hand-outs, single
// items of light keys at random moments while heavy keys hold a backlog,
// and checks each light item against the bound: it waits for at most one
// item of each other key active when it was added.
func TestPriorityQueueFairnessManyLightKeys(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const heavy = 3
		q := newTestPQ(TypedPriorityQueueConfig[string]{Fairness: []func(string) string{tenant}})
		defer q.ShutDown()
		for h := range heavy {
			for i := range 500 {
				q.Add(fmt.Sprintf("heavy%d/%d", h, i))
			}
		}
		r := rand.New(rand.NewPCG(15, 1))
		bound := map[string]int{} // light item -> the most hand-outs it may wait for
		waited := map[string]int{}
		worst := 0
		for range 1000 {
			if r.IntN(2) == 0 {
				item := fmt.Sprintf("light%d/x", r.IntN(40))
				if _, queued := bound[item]; !queued {
					bound[item] = heavy + len(bound) // the other active keys
					waited[item] = 0
					q.Add(item)
				}
			}
			item, _ := q.Get()
			q.Done(item)
			if b, ok := bound[item]; ok {
				require.LessOrEqual(t, waited[item], b, "%s waited for %d items", item, waited[item])
				worst = max(worst, waited[item])
				delete(bound, item)
				delete(waited, item)
			}
			for other := range waited {
				waited[other]++
			}
		}
		t.Logf("worst wait of a light item: %d hand-outs", worst)
	})
}

func TestPriorityQueueMaxWait(t *testing.T) {
	for _, tc := range []struct {
		name    string
		maxWait time.Duration
		steps   []pqStep
		want    []string
	}{
		{"off: higher levels first", 0,
			[]pqStep{add("low", 0), sleep(500 * time.Millisecond), add("h1", 1), add("h2", 1), sleep(500 * time.Millisecond)},
			[]string{"h1@1", "h2@1", "low@0"}},
		{"an item ready for MaxWait goes first", time.Second,
			[]pqStep{add("low", 0), sleep(500 * time.Millisecond), add("h1", 1), add("h2", 1), sleep(500 * time.Millisecond)},
			[]string{"low@0", "h1@1", "h2@1"}},
		{"not before MaxWait", time.Second,
			[]pqStep{add("low", 0), sleep(500 * time.Millisecond), add("h1", 1), add("h2", 1), sleep(499 * time.Millisecond)},
			[]string{"h1@1", "h2@1", "low@0"}},
		{"overdue items oldest first, whatever their level", time.Second,
			[]pqStep{add("l1", 0), sleep(time.Millisecond), add("m1", 1), sleep(time.Millisecond), add("l2", 0), add("h1", 2),
				sleep(time.Second), add("h2", 2)},
			[]string{"l1@0", "m1@1", "l2@0", "h1@2", "h2@2"}},
		{"a raise keeps the time the item became ready", time.Second,
			[]pqStep{add("a", 0), sleep(500 * time.Millisecond), add("b", 1), add("a", 1), sleep(500 * time.Millisecond)},
			[]string{"a@1", "b@1"}},
		{"the wait counts from the delay's end", time.Second,
			[]pqStep{addAfter("a", 0, time.Second), add("h", 1), sleep(1500 * time.Millisecond)},
			[]string{"h@1", "a@0"}},
		{"re-queued by Done: the wait counts from Done", time.Second,
			[]pqStep{add("a", 0), get("a@0"), add("a", 0), sleep(time.Second), add("h", 1), done("a")},
			[]string{"h@1", "a@0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				q := newTestPQ(TypedPriorityQueueConfig[string]{MaxWait: tc.maxWait})
				defer q.ShutDown()
				assert.Equal(t, tc.want, runPQSteps(t, q, tc.steps))
			})
		})
	}
}

func TestPriorityQueueMaxWaitWithFairness(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := newTestPQ(TypedPriorityQueueConfig[string]{MaxWait: time.Second, Fairness: []func(string) string{tenant}})
		defer q.ShutDown()
		got := runPQSteps(t, q, []pqStep{add("a/1", 0), add("a/2", 0), add("b/1", 0), sleep(time.Second), add("c/1", 1),
			get("a/1@0"), done("a/1"), get("a/2@0"), done("a/2")})
		// a/1 and a/2 went first, overdue; the rest is in turn again.
		assert.Equal(t, []string{"b/1@0", "c/1@1"}, got)
	})
}

// TestPriorityQueueMaxWaitOutOfTurn pins down that an overdue item is
// handed out out of turn: its key keeps its place in the rotation.
func TestPriorityQueueMaxWaitOutOfTurn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := newTestPQ(TypedPriorityQueueConfig[string]{MaxWait: time.Second, Fairness: []func(string) string{tenant}})
		defer q.ShutDown()
		got := runPQSteps(t, q, []pqStep{add("a/1", 0), sleep(time.Second), add("b/1", 0), add("a/2", 0), add("c/1", 0)})
		// a/1 is overdue; a, first in turn since a/1 was added, stays first.
		assert.Equal(t, []string{"a/1@0", "a/2@0", "b/1@0", "c/1@0"}, got)
	})
}

func TestPriorityQueueShutDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := newTestPQ(TypedPriorityQueueConfig[string]{})
		q.Add("a")
		q.AddWithOpts(AddOpts{Priority: new(1)}, "b")
		q.AddAfter("c", time.Second)
		item, _ := q.Get()
		require.Equal(t, "b", item)
		q.ShutDown()
		require.True(t, q.ShuttingDown())

		q.Add("d")
		q.AddRateLimited("e")
		q.AddWithOpts(AddOpts{Priority: new(5)}, "f")
		assert.Zero(t, q.NumRequeues("e"), "AddRateLimited after ShutDown records no failure")
		assert.Equal(t, 1, q.Len())
		time.Sleep(time.Hour)
		assert.Equal(t, 1, q.Len(), "delayed items are dropped at shutdown")

		got, shutdown := q.Get()
		assert.Equal(t, "a", got)
		assert.False(t, shutdown, "Get hands out what is queued after ShutDown")
		_, shutdown = q.Get()
		assert.True(t, shutdown)
		_, err := q.GetContext(context.Background())
		assert.ErrorIs(t, err, ErrShutDown)
		q.Done("a")
		q.Done("b")
		require.NoError(t, verifyPriorityQueue(q))
		q.ShutDown() // again: nothing
		q.ShutDownWithDrain()
	})
}

func TestPriorityQueueShutDownWithDrain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := newTestPQ(TypedPriorityQueueConfig[string]{})
		q.Add("a")
		q.Add("b")
		item, _ := q.Get()
		q.Add(item) // to be queued again by Done
		q.AddAfter("c", time.Second)
		var drained bool
		go func() {
			q.ShutDownWithDrain()
			drained = true
		}()
		synctest.Wait()
		assert.False(t, drained)
		q.Add("d")
		assert.Equal(t, 1, q.Len(), "adds stop at the drain")

		var got []string
		for {
			next, shutdown := q.Get()
			if shutdown {
				break
			}
			got = append(got, next)
			q.Done(item)
			item = next
			synctest.Wait()
			require.NoError(t, verifyPriorityQueue(q))
		}
		assert.Equal(t, []string{"b", "a"}, got)
		assert.False(t, drained, "a is still processing")
		q.Done(item)
		synctest.Wait()
		assert.True(t, drained)
	})
}

func TestPriorityQueueDrainReleasedByShutDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := newTestPQ(TypedPriorityQueueConfig[string]{})
		q.Add("a")
		q.Get()
		var drained bool
		go func() {
			q.ShutDownWithDrain()
			drained = true
		}()
		synctest.Wait()
		assert.False(t, drained)
		q.ShutDown()
		synctest.Wait()
		assert.True(t, drained)
	})
}

func TestPriorityQueueGetContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := newTestPQ(TypedPriorityQueueConfig[string]{})
		defer q.ShutDown()
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		q.Add("a")
		_, err := q.GetContext(ctx)
		assert.ErrorIs(t, err, context.Canceled, "an ended context takes no item")
		assert.Equal(t, 1, q.Len())

		item, err := q.GetContext(context.Background())
		require.NoError(t, err)
		assert.Equal(t, "a", item)

		ctx, cancel = context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err = q.GetContext(ctx)
		assert.ErrorIs(t, err, context.DeadlineExceeded)

		got := make(chan string)
		go func() {
			item, _ := q.GetContext(context.Background())
			got <- item
		}()
		synctest.Wait()
		q.AddWithOpts(AddOpts{Priority: new(2)}, "b", "c")
		assert.Equal(t, "b", <-got)
		require.NoError(t, verifyPriorityQueue(q))
	})
}

func TestPriorityQueueSnapshot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := newTestPQ(TypedPriorityQueueConfig[string]{Fairness: []func(string) string{tenant}, MaxWait: time.Minute})
		defer q.ShutDown()
		start := time.Now()
		q.Add("x/1")
		q.Snapshot(0) // starts tracking hand-outs
		item, _ := q.Get()
		q.Add(item)
		q.AddRateLimited("w/1")
		q.Add("old/1")
		time.Sleep(time.Minute)
		q.AddWithOpts(AddOpts{Priority: new(1)}, "b/1")
		for _, item := range []string{"a/1", "a/2", "a/3", "b/2", "c/1"} {
			q.Add(item)
		}
		s := q.Snapshot(10)
		assert.Equal(t, start.Add(time.Minute), s.Taken)
		assert.Equal(t, 8, s.Depth)
		// old/1 is overdue; w/1 became ready at 1 s, its key took its place
		// in the rotation before a's.
		assert.Equal(t, []string{"old/1", "b/1", "w/1", "a/1", "b/2", "c/1", "a/2", "a/3"}, s.Queued)
		assert.Equal(t, 1, s.Processing)
		assert.Equal(t, []InFlightItem[string]{{Item: "x/1", Since: start, Requeue: true}}, s.InFlight)
		assert.Equal(t, 0, s.Waiting, "w/1 became ready after 1 s")
		assert.Equal(t, uint64(10), s.Adds)
		assert.Equal(t, map[string]int{"w/1": 1}, s.Failures)

		var handedOut []string
		for q.Len() > 0 {
			item, _ := q.Get()
			handedOut = append(handedOut, item)
			q.Done(item)
		}
		assert.Equal(t, s.Queued, handedOut[:len(s.Queued)], "Snapshot lists in hand-out order")

		q.AddAfter("d/1", time.Second)
		s = q.Snapshot(1)
		assert.Equal(t, []DelayedItem[string]{{Item: "d/1", ReadyAt: start.Add(time.Minute + time.Second)}}, s.Delayed)
		assert.Equal(t, 1, s.Waiting)
	})
}

func TestPriorityQueueConfigPanics(t *testing.T) {
	limiter := NewTypedItemExponentialFailureRateLimiter[string](time.Second, time.Minute)
	for _, tc := range []struct {
		name string
		make func()
		want string
	}{
		{"nil rate limiter", func() { NewTypedPriorityQueue[string](nil, TypedPriorityQueueConfig[string]{}) },
			"workqueue: NewTypedPriorityQueue needs a rate limiter, got nil"},
		{"negative MaxWait", func() { NewTypedPriorityQueue(limiter, TypedPriorityQueueConfig[string]{MaxWait: -1}) },
			"workqueue: NewTypedPriorityQueue: MaxWait must not be negative, got -1ns"},
		{"nil fairness function", func() {
			NewTypedPriorityQueue(limiter, TypedPriorityQueueConfig[string]{Fairness: []func(string) string{tenant, nil}})
		}, "workqueue: NewTypedPriorityQueue: Fairness[1] is nil"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.PanicsWithValue(t, tc.want, tc.make)
		})
	}
	var zero TypedPriorityQueue[string]
	assert.PanicsWithValue(t, "workqueue: ShutDownWithDrain on a zero queue; make one with its constructor", zero.ShutDownWithDrain)
}

// verifyPriorityQueue checks the invariants of q's core; see
// verifyCoreLocked. It takes the queue's lock.
func verifyPriorityQueue[T comparable](q *TypedPriorityQueue[T]) error {
	q.core.mu.Lock()
	defer q.core.mu.Unlock()
	return verifyCoreLocked(&q.core)
}

// verifyPriorityOrder checks o's invariant: every id in queued, and no
// other, is listed once, in the leaf its priority and fairness keys name;
// the levels are sorted, their fairness trees well formed and their counts
// right; and with MaxWait the age list holds the queued ids in the order
// they became ready.
func verifyPriorityOrder[T comparable](o *priorityOrder[T], queued map[int32]bool) error {
	listed, idle := map[int32]bool{}, 0
	for i, level := range o.levels {
		if i > 0 && o.levels[i-1].priority >= level.priority {
			return fmt.Errorf("levels out of order: %d before %d", o.levels[i-1].priority, level.priority)
		}
		if level.root.total == 0 {
			idle++
		}
		if _, _, err := verifyFairNode(o, &level.root, level.priority, 0, listed); err != nil {
			return fmt.Errorf("level %d: %w", level.priority, err)
		}
	}
	if len(listed) != len(queued) || idle != o.idleLevels || idle > maxIdleLevels {
		return fmt.Errorf("levels list %d items, %d queued; %d empty levels, counted %d", len(listed), len(queued), idle, o.idleLevels)
	}
	for id := range listed {
		if !queued[id] {
			return fmt.Errorf("id %d listed, yet not queued", id)
		}
	}
	if len(o.fairness) == 0 && o.leaves.Len() > 0 {
		return fmt.Errorf("%d leaves kept without fairness", o.leaves.Len())
	}
	for id := range o.leaves.Len() {
		if leaf := *o.leaves.At(id); (leaf != nil) != queued[int32(id)] {
			return fmt.Errorf("id %d: leaf kept %v, queued %v", id, leaf != nil, queued[int32(id)])
		}
	}
	if o.maxWait == 0 {
		var aged map[int32]bool
		if o.groupedAges != nil {
			aged, _ = grouped.Verify(o.groupedAges)
		}
		if o.ages.Len() > 0 || o.ageLinks.Size() > 0 || o.readySince.Len() > 0 || len(aged) > 0 {
			return fmt.Errorf("age list used without MaxWait")
		}
		return nil
	}
	if o.groups != nil {
		ages, err := verifyGroupedList(o.groupedAges, "the age list")
		if err != nil {
			return err
		}
		if !maps.Equal(ages, queued) || o.ages.Len() > 0 {
			return fmt.Errorf("the age lists list %d and %d ids, %d are queued", len(ages), o.ages.Len(), len(queued))
		}
		for id := range ages { // a later sequence number is never ready earlier
			for other := range ages {
				if *o.ageSeqs.At(int(id)) < *o.ageSeqs.At(int(other)) && *o.readySince.At(int(id)) > *o.readySince.At(int(other)) {
					return fmt.Errorf("age list out of order at id %d", id)
				}
			}
		}
		return nil
	}
	if err := verifyListed(o.ages, &o.ageLinks, queued, "the age list"); err != nil {
		return err
	}
	last := int64(-1 << 63)
	for id := o.ages.Head(); id >= 0; id = o.ageLinks.Next(id) {
		since := *o.readySince.At(int(id))
		if since < last {
			return fmt.Errorf("age list out of order at id %d", id)
		}
		last = since
	}
	return nil
}
