package redisqueue

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/go-workqueue/workqueue"
	"github.com/go-workqueue/workqueue/reconcile"
	"github.com/go-workqueue/workqueue/redis/redistest"
)

// A Runner over the Redis queue keeps priorities.
var _ reconcile.Prioritized[string] = (*Queue[string])(nil)

// newPriorityRef returns the in-memory priority queue the Redis queue's
// AddWithOpts, GetWithPriority and Remove are compared with: no backoff,
// so that a rate-limited add is immediate on both.
func newPriorityRef() *workqueue.TypedPriorityQueue[string] {
	return workqueue.NewTypedPriorityQueue(workqueue.NewTypedItemExponentialFailureRateLimiter[string](0, 0), workqueue.TypedPriorityQueueConfig[string]{})
}

// TestPrioritySequences runs short scripts of calls through one handle
// and through the in-memory priority queue, and checks that every Get
// hands out the same item at the same priority, that Remove reports the
// same, and the order the rules promise.
func TestPrioritySequences(t *testing.T) {
	s := redistest.Start(t, redistest.Options{})
	client := s.Client()
	tests := []struct {
		name string
		// ops separated by spaces: +x/p AddWithOpts at priority p, ~x/p
		// the same after an hour, +x Add, g GetWithPriority, -x Done,
		// x:x Remove (its result must be the reference's).
		script string
		gets   []string // x/p: what the final Gets hand out
	}{
		{name: "higher first", script: "+a/0 +b/5 +c/-1 +d/5", gets: []string{"b/5", "d/5", "a/0", "c/-1"}},
		{name: "re-add keeps the highest", script: "+a/5 +b/3 +a/1 +a", gets: []string{"a/5", "b/3"}},
		{name: "raised goes behind its new priority", script: "+a/1 +b/0 +c/1 +b/1", gets: []string{"a/1", "c/1", "b/1"}},
		{name: "Add raises a low priority to 0", script: "+a/-100 +b/0 +a", gets: []string{"b/0", "a/0"}},
		{name: "added while processed requeued at the highest asked", script: "+a/1 g +a/-5 +a/7 +a/2 +b/3 -a", gets: []string{"a/7", "b/3"}},
		{name: "added while processed keeps no old priority", script: "+a/9 g +a/-5 +b/0 -a", gets: []string{"b/0", "a/-5"}},
		{name: "queued is not delayed", script: "+a/1 ~a/9", gets: []string{"a/9"}},
		{name: "delayed then added keeps the higher", script: "~a/9 +a/1 +b/5", gets: []string{"a/9", "b/5"}},
		{name: "remove queued", script: "+a/1 +b/0 x:a", gets: []string{"b/0"}},
		{name: "remove delayed", script: "~a/1 +b x:a x:a", gets: []string{"b/0"}},
		{name: "remove the re-add of one processed", script: "+a/1 g +a/4 x:a -a +b/0", gets: []string{"b/0"}},
		{name: "remove of one processed takes nothing", script: "+a g x:a +a -a", gets: []string{"a/0"}},
		{name: "remove of an unknown item", script: "x:z +a", gets: []string{"a/0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := newTestQueue(t, client, Options[string]{RateLimit: &RateLimit{}})
			ref := newPriorityRef()
			defer ref.ShutDown()
			var held []string
			defer func() {
				for _, item := range held {
					q.Done(item)
				}
			}()
			for _, op := range strings.Fields(tt.script) {
				switch {
				case op == "g":
					want, wantPriority, _ := ref.GetWithPriority()
					got, priority := getWithPriorityNow(t, q)
					assert.Equal(t, fmt.Sprint(want, "/", wantPriority), fmt.Sprint(got, "/", priority), "op %s", op)
					held = append(held, got)
				case strings.HasPrefix(op, "x:"):
					assert.Equal(t, ref.Remove(op[2:]), q.Remove(op[2:]), "op %s", op)
				case op[0] == '+' && !strings.Contains(op, "/"):
					q.Add(op[1:])
					ref.Add(op[1:])
				case op[0] == '+' || op[0] == '~':
					item, p, _ := strings.Cut(op[1:], "/")
					priority, err := strconv.Atoi(p)
					require.NoError(t, err)
					opts := workqueue.AddOpts{Priority: &priority}
					if op[0] == '~' {
						opts.After = time.Hour
					}
					q.AddWithOpts(opts, item)
					ref.AddWithOpts(opts, item)
				case op[0] == '-':
					q.Done(op[1:])
					ref.Done(op[1:])
					held = removeItem(held, op[1:])
				}
			}
			require.Equal(t, ref.Len(), q.Len(), "Len before the final gets")
			for _, want := range tt.gets {
				wantRef, wantPriority, _ := ref.GetWithPriority()
				require.Equal(t, want, fmt.Sprint(wantRef, "/", wantPriority), "the reference's")
				got, priority := getWithPriorityNow(t, q)
				assert.Equal(t, want, fmt.Sprint(got, "/", priority))
				q.Done(got)
				ref.Done(wantRef)
			}
			assert.Equal(t, 0, q.Len())
		})
	}
}

func removeItem(items []string, item string) []string {
	for i, it := range items {
		if it == item {
			return append(items[:i], items[i+1:]...)
		}
	}
	return items
}

// getWithPriorityNow is getNow with the priority.
func getWithPriorityNow(t *testing.T, q *Queue[string]) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	item, priority, err := q.GetWithPriorityContext(ctx)
	require.NoError(t, err)
	return item, priority
}

// TestPriorityMatchesInMemoryQueue runs random AddWithOpts (priorities
// -2 to 2, at once, after an hour or rate limited), GetWithPriority, Done,
// Remove, Forget, NumRequeues and Len, one at a time, through 1 to 3
// handles on one Redis queue and through the in-memory priority queue, and
// checks that every observable result agrees. As TestMatchesInMemoryQueue
// does, a queue of P partitions is compared with one in-memory queue per
// partition: an item handed out must be the next of its partition's.
func TestPriorityMatchesInMemoryQueue(t *testing.T) {
	s := redistest.Start(t, redistest.Options{})
	client := s.Client()
	ops := 3000
	if testing.Short() {
		ops = 500
	}
	keys := []string{"a", "b", "c", "d", "e", "f", "g"}
	for _, tt := range []struct{ handles, partitions int }{{1, 1}, {3, 1}, {1, 3}, {3, 3}} {
		t.Run(fmt.Sprintf("handles=%d,partitions=%d", tt.handles, tt.partitions), func(t *testing.T) {
			seed := rand.Uint64()
			rng := rand.New(rand.NewPCG(seed, 0))
			name := fmt.Sprintf("priority-differential-%d", queueSeq.Add(1))
			qs := make([]*Queue[string], tt.handles)
			for i := range qs {
				qs[i] = newHandle(t, client, name, Options[string]{RateLimit: &RateLimit{}, Partitions: tt.partitions})
			}
			refs := make([]*workqueue.TypedPriorityQueue[string], tt.partitions)
			for i := range refs {
				refs[i] = newPriorityRef()
				defer refs[i].ShutDown()
			}
			ref := func(key string) *workqueue.TypedPriorityQueue[string] { return refs[partitionOf(key, tt.partitions)] }
			refLen := func() int {
				n := 0
				for _, r := range refs {
					n += r.Len()
				}
				return n
			}
			held := map[string]int{} // item -> handle that got it
			var removes, removed, raised int
			for i := range ops {
				q := qs[rng.IntN(tt.handles)]
				key := keys[rng.IntN(len(keys))]
				where := fmt.Sprintf("seed %d, op %d", seed, i)
				switch rng.IntN(12) {
				case 0, 1, 2, 3:
					priority := rng.IntN(5) - 2
					opts := workqueue.AddOpts{Priority: &priority}
					switch rng.IntN(4) {
					case 0:
						opts.After = time.Hour
					case 1:
						opts.RateLimited = true
					case 2:
						opts.After, opts.RateLimited = time.Hour, true
					}
					opts.Reschedule = rng.IntN(4) == 0
					items := []string{key}
					if rng.IntN(4) == 0 {
						items = append(items, keys[rng.IntN(len(keys))])
					}
					q.AddWithOpts(opts, items...)
					for _, item := range items {
						ref(item).AddWithOpts(opts, item)
					}
					raised++
				case 4:
					got := q.Remove(key)
					require.Equal(t, ref(key).Remove(key), got, "Remove(%s), %s", key, where)
					removes++
					if got {
						removed++
					}
				case 5:
					q.Forget(key)
					ref(key).Forget(key)
				case 6:
					require.Equal(t, ref(key).NumRequeues(key), q.NumRequeues(key), where)
					require.Equal(t, refLen(), q.Len(), where)
				case 7, 8:
					if refLen() == 0 {
						continue
					}
					got, priority := getWithPriorityNow(t, q)
					want, wantPriority, _ := ref(got).GetWithPriority()
					require.Equal(t, fmt.Sprint(want, "/", wantPriority), fmt.Sprint(got, "/", priority), where)
					held[got] = slicesIndex(qs, q)
				default:
					for item, h := range held {
						qs[h].Done(item)
						ref(item).Done(item)
						delete(held, item)
						break
					}
				}
			}
			for item, h := range held {
				qs[h].Done(item)
				ref(item).Done(item)
			}
			require.Equal(t, refLen(), qs[0].Len())
			for refLen() > 0 {
				got, priority := getWithPriorityNow(t, qs[0])
				want, wantPriority, _ := ref(got).GetWithPriority()
				require.Equal(t, fmt.Sprint(want, "/", wantPriority), fmt.Sprint(got, "/", priority))
				ref(got).Done(got)
				qs[0].Done(got)
			}
			t.Logf("seed %d: %d ops, %d Removes of which %d took something", seed, ops, removes, removed)
		})
	}
}

func slicesIndex(qs []*Queue[string], q *Queue[string]) int {
	for i, h := range qs {
		if h == q {
			return i
		}
	}
	return -1
}

// TestPriorityDelays checks with a fake clock that a delayed add keeps
// its priority until it is due, also across handles: an item waiting
// at priority 5 comes due behind one queued at 5 before it and ahead of
// those queued at 0, and Remove of a delayed item leaves nothing due.
func TestPriorityDelays(t *testing.T) {
	s := redistest.Start(t, redistest.Options{})
	client := s.Client()
	clk := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
	q := newTestQueue(t, client, Options[string]{Clock: clk})
	other := newHandle(t, client, queueNameOf(q), Options[string]{Clock: clk})
	five, one := 5, 1
	q.AddWithOpts(workqueue.AddOpts{After: time.Second, Priority: &one}, "late")
	other.AddWithOpts(workqueue.AddOpts{After: time.Minute, Priority: &five}, "late") // the earlier time, the higher priority
	q.AddWithOpts(workqueue.AddOpts{After: time.Second}, "removed")
	other.Add("zero")
	q.AddWithOpts(workqueue.AddOpts{Priority: &five}, "five")
	assert.True(t, other.Remove("removed"))
	assert.Equal(t, 2, q.Len())
	clk.Step(time.Second)
	for _, want := range []string{"five/5", "late/5", "zero/0"} {
		item, priority := getWithPriorityNow(t, other)
		assert.Equal(t, want, fmt.Sprint(item, "/", priority))
		other.Done(item)
	}
	assertNothingReady(t, q)
}

// TestPriorityReschedule checks with a fake clock, across two handles,
// that AddOpts.Reschedule replaces the ready time a key waits for, later
// or earlier, where the earliest otherwise wins, and keeps the highest
// priority; that it leaves a queued key queued; and that with no delay it
// adds at once.
func TestPriorityReschedule(t *testing.T) {
	s := redistest.Start(t, redistest.Options{})
	five := 5
	tests := []struct {
		name  string
		adds  []workqueue.AddOpts // in turn from the two handles
		ready time.Duration       // when the key is first ready
		prio  int
	}{
		{name: "later", adds: []workqueue.AddOpts{{After: time.Second}, {After: time.Minute, Reschedule: true}}, ready: time.Minute},
		{name: "earlier", adds: []workqueue.AddOpts{{After: time.Minute}, {After: time.Second, Reschedule: true}}, ready: time.Second},
		{name: "without it the earliest wins", adds: []workqueue.AddOpts{{After: time.Minute, Reschedule: true}, {After: time.Second}}, ready: time.Second},
		{name: "the latest wins", adds: []workqueue.AddOpts{{After: time.Second, Reschedule: true}, {After: time.Minute, Reschedule: true}}, ready: time.Minute},
		{name: "the highest priority kept", adds: []workqueue.AddOpts{{After: time.Second, Priority: &five}, {After: time.Minute, Reschedule: true}}, ready: time.Minute, prio: 5},
		{name: "queued stays queued", adds: []workqueue.AddOpts{{}, {After: time.Minute, Reschedule: true}}, ready: 0},
		{name: "no delay adds at once", adds: []workqueue.AddOpts{{After: time.Minute}, {Reschedule: true}}, ready: 0},
		{name: "rate limited", adds: []workqueue.AddOpts{{After: time.Second}, {After: time.Minute, RateLimited: true, Reschedule: true}}, ready: 5 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
			rate := &RateLimit{Base: 5 * time.Millisecond, Max: time.Hour}
			q := newTestQueue(t, s.Client(), Options[string]{Clock: clk, RateLimit: rate})
			other := newHandle(t, s.Client(), queueNameOf(q), Options[string]{Clock: clk, RateLimit: rate})
			for i, opts := range tt.adds {
				[]*Queue[string]{q, other}[i%2].AddWithOpts(opts, "a")
			}
			if tt.ready > 0 {
				clk.Step(tt.ready - time.Millisecond)
				assertNothingReady(t, q)
				clk.Step(time.Millisecond)
			}
			item, priority := getWithPriorityNow(t, other)
			assert.Equal(t, fmt.Sprint("a/", tt.prio), fmt.Sprint(item, "/", priority))
			other.Done(item)
			assert.Zero(t, q.Len())
		})
	}
}

// TestPriorityLeaseExpiry checks that a key whose holder died is handed
// out again at the front of the priority it was handed out at.
func TestPriorityLeaseExpiry(t *testing.T) {
	s := redistest.Start(t, redistest.Options{})
	client := s.Client()
	start := time.Unix(1_000_000, 0)
	deadClock, clk := clocktesting.NewFakeClock(start), clocktesting.NewFakeClock(start)
	dead := newTestQueue(t, client, Options[string]{Clock: deadClock, LeaseDuration: 3 * time.Second})
	live := newHandle(t, client, queueNameOf(dead), Options[string]{Clock: clk, LeaseDuration: 3 * time.Second})
	two, three := 2, 3
	dead.AddWithOpts(workqueue.AddOpts{Priority: &two}, "a", "b")
	dead.AddWithOpts(workqueue.AddOpts{Priority: &three}, "c")
	dead.Add("d")
	assert.Equal(t, "c", getNow(t, dead))
	assert.Equal(t, "a", getNow(t, dead))
	clk.Step(3 * time.Second)
	var got []string
	for range 4 {
		item, priority := getWithPriorityNow(t, live)
		got = append(got, fmt.Sprint(item, "/", priority))
		live.Done(item)
	}
	// Each reclaimed at the front of its priority.
	assert.Equal(t, []string{"c/3", "a/2", "b/2", "d/0"}, got)
	for _, item := range []string{"c", "a"} {
		assert.ErrorIs(t, dead.DoneContext(context.Background(), item), ErrLeaseLost)
	}
}
