package redisqueue

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/go-workqueue/workqueue"
	wqprometheus "github.com/go-workqueue/workqueue/prometheus"
	"github.com/go-workqueue/workqueue/redis/redistest"
)

// newParkingRef returns the in-memory priority queue the Redis queue's
// parking is compared with: no backoff, neither for rate-limited adds nor
// for parks, as the Redis queue has no park backoff.
func newParkingRef() *workqueue.TypedPriorityQueue[string] {
	return workqueue.NewTypedPriorityQueue(workqueue.NewTypedItemExponentialFailureRateLimiter[string](0, 0),
		workqueue.TypedPriorityQueueConfig[string]{ParkBackoff: workqueue.NewTypedItemExponentialFailureRateLimiter[string](0, 0)})
}

// noParkBackoff is a ParkBackoff of none: a wake queues at once, as in
// the reference.
func noParkBackoff() workqueue.TypedRateLimiter[string] {
	return workqueue.NewTypedItemExponentialFailureRateLimiter[string](0, 0)
}

// TestParkSequences runs short scripts of calls through two handles on
// one queue, each with its own client as two processes would have, and
// through the in-memory priority queue, and checks that every Get hands
// out the same item at the same priority, that Wake, WakeItem, Remove and
// Len answer the same, and what the rules promise. On a queue of 3
// partitions each item is compared with one in-memory queue per
// partition, as TestPriorityMatchesInMemoryQueue does.
func TestParkSequences(t *testing.T) {
	s := redistest.Start(t, redistest.Options{})
	tests := []struct {
		name string
		// ops separated by spaces, each run by handle 1, or by handle 2
		// with a "2:" prefix: add:x Add, add:x/p AddWithOpts at priority
		// p, get GetWithPriority, done:x Done by the handle that got x,
		// park:x/e,f Park by the handle that got x, wake:e=n Wake (n:
		// what it must return, and the reference too), item:x WakeItem,
		// rm:x Remove, radd:x AddRateLimited, nr:x NumRequeues, len=n Len.
		script string
		gets   []string // x/p: what the final Gets hand out
	}{
		{name: "parked by one handle, woken by the other",
			script: "add:a get park:a/e done:a len=0 2:wake:e=1", gets: []string{"a/0"}},
		{name: "a parked key is not handed out",
			script: "add:a add:b get park:a/e done:a len=1", gets: []string{"b/0"}},
		{name: "woken before Done: queued at Done",
			script: "add:a get park:a/e 2:wake:e=1 len=0 done:a", gets: []string{"a/0"}},
		{name: "woken between Get and Park in another handle: no lost wakeup",
			script: "add:a get 2:wake:e=0 park:a/e,f done:a", gets: []string{"a/0"}},
		{name: "woken before the Get: the park waits",
			script: "2:wake:e=0 add:a get park:a/e done:a len=0 wake:e=1", gets: []string{"a/0"}},
		{name: "another event does not wake it",
			script: "add:a get park:a/e done:a 2:wake:f=0 len=0 wake:e=1 wake:e=0", gets: []string{"a/0"}},
		{name: "either event wakes it, once",
			script: "add:a get park:a/e,f done:a 2:wake:f=1 wake:e=0", gets: []string{"a/0"}},
		{name: "an add since the Get wins over the park",
			script: "add:a get 2:add:a park:a/e done:a wake:e=0", gets: []string{"a/0"}},
		{name: "an add after the Park wins too",
			script: "add:a get park:a/e 2:add:a done:a wake:e=0", gets: []string{"a/0"}},
		{name: "a later Park replaces an earlier one",
			script: "add:a get park:a/e park:a/f done:a wake:e=0 len=0 2:wake:f=1", gets: []string{"a/0"}},
		{name: "a wake of an earlier Park wins over a later one",
			script: "add:a get park:a/e 2:wake:e=1 park:a/f done:a wake:f=0", gets: []string{"a/0"}},
		{name: "an add of a parked key ends the park",
			script: "add:a get park:a/e done:a 2:add:a len=1 wake:e=0", gets: []string{"a/0"}},
		{name: "an add at a priority of a parked key queues it at that priority",
			script: "add:a/5 get park:a/e done:a 2:add:a/-1 add:b wake:e=0", gets: []string{"b/0", "a/-1"}},
		{name: "Remove takes a parked key back",
			script: "add:a get park:a/e done:a 2:rm:a len=0 wake:e=0 add:b", gets: []string{"b/0"}},
		{name: "Remove ends a park asked for before Done",
			script: "add:a get park:a/e 2:rm:a done:a wake:e=0 len=0 add:b", gets: []string{"b/0"}},
		{name: "a woken key keeps its priority",
			script: "add:a/5 add:b/1 get park:a/e done:a add:c 2:wake:e=1", gets: []string{"a/5", "b/1", "c/0"}},
		{name: "a wake queues in park order",
			script: "add:a add:b get get park:b/e park:a/e done:a done:b 2:wake:e=2", gets: []string{"b/0", "a/0"}},
		{name: "a wake queues behind the keys queued",
			script: "add:a get park:a/e done:a add:b 2:wake:e=1 add:c", gets: []string{"b/0", "a/0", "c/0"}},
		{name: "WakeItem of a parked key",
			script: "add:a get park:a/e done:a 2:item:a item:a wake:e=0", gets: []string{"a/0"}},
		{name: "WakeItem before Done queues it at Done",
			script: "add:a get park:a/e 2:item:a done:a", gets: []string{"a/0"}},
		{name: "WakeItem of a key not parked",
			script: "add:a 2:item:a item:z get done:a", gets: nil},
		{name: "a park without events waits for WakeItem",
			script: "add:a get park:a/ done:a len=0 2:item:a", gets: []string{"a/0"}},
		{name: "Park of an item not held does nothing",
			script: "add:a park:a/e wake:e=0", gets: []string{"a/0"}},
		{name: "a park is not a failure",
			script: "radd:a get park:a/e done:a nr:a 2:wake:e=1 nr:a", gets: []string{"a/0"}},
		{name: "a parked key is parked again after its wake",
			script: "add:a get park:a/e done:a wake:e=1 get park:a/e done:a len=0 2:wake:e=1", gets: []string{"a/0"}},
	}
	for _, partitions := range []int{1, 3} {
		for _, tt := range tests {
			t.Run(fmt.Sprintf("partitions=%d/%s", partitions, tt.name), func(t *testing.T) {
				opts := Options[string]{RateLimit: &RateLimit{}, Partitions: partitions, ParkBackoff: noParkBackoff()}
				q1 := newTestQueue(t, s.Client(), opts)
				q2 := newHandle(t, s.Client(), queueNameOf(q1), opts)
				refs := make([]*workqueue.TypedPriorityQueue[string], partitions)
				for i := range refs {
					refs[i] = newParkingRef()
					defer refs[i].ShutDown()
				}
				ref := func(key string) *workqueue.TypedPriorityQueue[string] { return refs[partitionOf(key, partitions)] }
				refLen := func() int {
					n := 0
					for _, r := range refs {
						n += r.Len()
					}
					return n
				}
				holder := map[string]*Queue[string]{}
				defer func() {
					for item, q := range holder {
						q.Done(item)
					}
				}()
				for _, op := range strings.Fields(tt.script) {
					q := q1
					if rest, ok := strings.CutPrefix(op, "2:"); ok {
						q = q2
						op = rest
					}
					verb, arg, _ := strings.Cut(op, ":")
					if strings.HasPrefix(verb, "len=") {
						verb, arg = "len", verb[len("len="):]
					}
					switch verb {
					case "add":
						item, p, ok := strings.Cut(arg, "/")
						if !ok {
							q.Add(item)
							ref(item).Add(item)
							continue
						}
						priority, err := strconv.Atoi(p)
						require.NoError(t, err)
						q.AddWithOpts(workqueue.AddOpts{Priority: &priority}, item)
						ref(item).AddWithOpts(workqueue.AddOpts{Priority: &priority}, item)
					case "get":
						got, priority := getWithPriorityNow(t, q)
						want, wantPriority, _ := ref(got).GetWithPriority()
						require.Equal(t, fmt.Sprint(want, "/", wantPriority), fmt.Sprint(got, "/", priority), "op %s", op)
						holder[got] = q
					case "done":
						holder[arg].Done(arg)
						ref(arg).Done(arg)
						delete(holder, arg)
					case "park":
						item, list, _ := strings.Cut(arg, "/")
						var events []string
						if list != "" {
							events = strings.Split(list, ",")
						}
						if h := holder[item]; h != nil {
							q = h
						}
						q.Park(item, events...)
						ref(item).Park(item, events...)
					case "wake":
						event, n, _ := strings.Cut(arg, "=")
						want := 0
						for _, r := range refs {
							want += r.Wake(event)
						}
						require.Equal(t, n, strconv.Itoa(want), "op %s: the reference's count", op)
						assert.Equal(t, want, q.Wake(event), "op %s", op)
					case "item":
						assert.Equal(t, ref(arg).WakeItem(arg), q.WakeItem(arg), "op %s", op)
					case "rm":
						assert.Equal(t, ref(arg).Remove(arg), q.Remove(arg), "op %s", op)
					case "radd":
						q.AddRateLimited(arg)
						ref(arg).AddRateLimited(arg)
					case "nr":
						assert.Equal(t, ref(arg).NumRequeues(arg), q.NumRequeues(arg), "op %s", op)
					case "len":
						require.Equal(t, arg, strconv.Itoa(refLen()), "op %s: the reference's", op)
						assert.Equal(t, refLen(), q.Len(), "op %s", op)
					default:
						t.Fatalf("unknown op %q", op)
					}
					verifyParks(t, s.Client(), q1)
				}
				require.Equal(t, refLen(), q1.Len(), "Len before the final gets")
				var gets []string
				for range tt.gets {
					got, priority := getWithPriorityNow(t, q2)
					q2.Done(got)
					wantRef, wantPriority, _ := ref(got).GetWithPriority()
					ref(got).Done(wantRef)
					require.Equal(t, fmt.Sprint(wantRef, "/", wantPriority), fmt.Sprint(got, "/", priority), "the reference's next of its partition")
					gets = append(gets, fmt.Sprint(got, "/", priority))
				}
				if partitions == 1 {
					assert.Equal(t, tt.gets, gets)
				} else {
					// Order holds within a partition only.
					assert.ElementsMatch(t, tt.gets, gets)
				}
				assertNothingReady(t, q2)
			})
		}
	}
}

// verifyParks checks the invariant of the parks of q's queue in Redis: a
// key has one park at most, recorded either as its state (parked since
// its Done, then in PARKED and with its deadline in DELAYED) or in PARKS
// (asked for before Done); WAITERS holds exactly a member per event of
// each park.
func verifyParks(t *testing.T, client redis.UniversalClient, q *Queue[string]) {
	t.Helper()
	ctx := context.Background()
	for _, p := range q.parts {
		k := p.keys
		get := func(part string) string { return k.prefix + part }
		states, err := client.HGetAll(ctx, get("state")).Result()
		require.NoError(t, err)
		pending, err := client.HGetAll(ctx, get("parks")).Result()
		require.NoError(t, err)
		parked, err := client.ZRangeWithScores(ctx, get("parked"), 0, -1).Result()
		require.NoError(t, err)
		waiters, err := client.ZRange(ctx, get("waiters"), 0, -1).Result()
		require.NoError(t, err)
		want := map[string]bool{}
		members := func(events, n, key string) {
			for _, e := range decodeEvents(events) {
				want[fmt.Sprintf("%d:%s%s%s", len(e), e, n, key)] = true
			}
		}
		inParked := map[string]bool{}
		for _, z := range parked {
			inParked[z.Member.(string)] = true
		}
		nParked := 0
		for key, state := range states {
			if state[0] != 'w' {
				continue
			}
			nParked++
			require.True(t, inParked[key], "parked key %q is in PARKED", key)
			_, isPending := pending[key]
			require.False(t, isPending, "parked key %q has a park in PARKS too", key)
			slash := strings.Index(state[17:], "/") + 17
			bar := strings.Index(state[slash:], "|") + slash
			_, err := client.ZScore(ctx, get("delayed"), key).Result()
			require.NoError(t, err, "parked key %q waits in DELAYED", key)
			members(state[bar+1:], state[1:17], key)
		}
		require.Equal(t, nParked, len(parked), "PARKED holds the parked keys only")
		for key, record := range pending {
			bar := strings.Index(record[17:], "|") + 17
			members(record[bar+1:], record[1:17], key)
		}
		got := map[string]bool{}
		for _, m := range waiters {
			got[m] = true
		}
		require.Equal(t, want, got, "WAITERS")
	}
}

// TestMaxParkTime checks with a fake clock that a parked key is queued
// again, at its priority, once the MaxParkTime of the handle that parked
// it has passed since its Done, also for a Get waiting in another handle,
// and that a park woken before leaves nothing due.
func TestMaxParkTime(t *testing.T) {
	s := redistest.Start(t, redistest.Options{})
	clk := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
	parker := newTestQueue(t, s.Client(), Options[string]{Clock: clk, MaxParkTime: time.Minute, ParkBackoff: noParkBackoff()})
	other := newHandle(t, s.Client(), queueNameOf(parker), Options[string]{Clock: clk, ParkBackoff: noParkBackoff()})
	three := 3
	parker.AddWithOpts(workqueue.AddOpts{Priority: &three}, "slow")
	parker.Add("woken")
	for range 2 {
		item := getNow(t, parker)
		parker.Park(item, "never")
		if item == "woken" {
			parker.Park(item, "soon")
		}
		parker.Done(item)
	}
	clk.Step(time.Second)
	assert.Equal(t, 1, other.Wake("soon"))
	assert.Equal(t, "woken", getNow(t, other))
	other.Done("woken")
	snap, err := other.SnapshotContext(context.Background(), 10)
	require.NoError(t, err)
	assert.Equal(t, 1, snap.Parked)
	assert.Equal(t, 0, snap.Waiting, "a park's deadline is no delayed item")
	require.Len(t, snap.ParkedItems, 1)
	assert.Equal(t, workqueue.ParkedItem[string]{Item: "slow", Events: []string{"never"}, Since: time.Unix(1_000_000, 0)}, snap.ParkedItems[0])

	got := make(chan string)
	go func() {
		item, priority, err := other.GetWithPriorityContext(context.Background())
		assert.NoError(t, err)
		got <- fmt.Sprint(item, "/", priority)
	}()
	clk.Step(58 * time.Second)
	assertNothingReady(t, parker)
	clk.Step(time.Second)
	assert.Equal(t, "slow/3", <-got)
	other.Done("slow")
	clk.Step(time.Hour)
	assertNothingReady(t, parker)
	assert.Equal(t, 0, other.Wake("never"))
	verifyParks(t, s.Client(), parker)
}

// TestParkOutlivesItsHandle checks that a parked key belongs to the queue
// in Redis: its parker's handle shut down and its client closed, another
// handle, with a client of its own, wakes it and gets it.
func TestParkOutlivesItsHandle(t *testing.T) {
	s := redistest.Start(t, redistest.Options{})
	client := s.Client()
	parker := New(client, fmt.Sprint("outlives-", queueSeq.Add(1)), Options[string]{ParkBackoff: noParkBackoff()})
	parker.Add("a")
	item, _ := parker.Get()
	parker.Park(item, "e")
	parker.ShutDown()
	parker.Done(item) // Done and Park work after ShutDown
	parker.ShutDownWithDrain()
	require.NoError(t, client.Close())

	other := newHandle(t, s.Client(), parker.name, Options[string]{ParkBackoff: noParkBackoff()})
	assert.Equal(t, 0, other.Len())
	assert.Equal(t, 1, other.Wake("e"))
	assert.Equal(t, "a", getNow(t, other))
	other.Done("a")
}

// TestParkErrors checks what ParkContext and the wakes return for
// misuse: an item not held, a lost lease, a handle shut down.
func TestParkErrors(t *testing.T) {
	s := redistest.Start(t, redistest.Options{})
	// q's clock stands still, so that it does not extend its lease.
	clk := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
	q := newTestQueue(t, s.Client(), Options[string]{Clock: clocktesting.NewFakeClock(clk.Now()), LeaseDuration: 3 * time.Second, ParkBackoff: noParkBackoff()})
	other := newHandle(t, s.Client(), queueNameOf(q), Options[string]{Clock: clk, LeaseDuration: 3 * time.Second, ParkBackoff: noParkBackoff()})
	ctx := context.Background()
	assert.ErrorIs(t, q.ParkContext(ctx, "a", "e"), ErrNotHeld)
	q.Add("a")
	require.Equal(t, "a", getNow(t, q))
	assert.ErrorIs(t, other.ParkContext(ctx, "a", "e"), ErrNotHeld, "held by another handle")
	clk.Step(3 * time.Second) // the lease expires, and other takes it back
	require.Equal(t, "a", getNow(t, other))
	assert.ErrorIs(t, q.ParkContext(ctx, "a", "e"), ErrLeaseLost)
	assert.ErrorIs(t, q.DoneContext(ctx, "a"), ErrLeaseLost)
	require.NoError(t, other.ParkContext(ctx, "a", "e"))
	require.NoError(t, other.DoneContext(ctx, "a"))
	q.ShutDown()
	_, err := q.WakeContext(ctx, "e")
	assert.ErrorIs(t, err, workqueue.ErrShutDown)
	_, err = q.WakeItemContext(ctx, "a")
	assert.ErrorIs(t, err, workqueue.ErrShutDown)
	assert.Equal(t, 0, q.Wake("e"))
	assert.Equal(t, 1, other.Wake("e"))
	require.Equal(t, "a", getNow(t, other))
	other.Done("a")
}

// TestParkingMetrics checks the parking metrics of a handle whose
// provider reports them: the queue-wide parked count as Redis reported it
// to the handle's parks and wakes, and the parks its wakes ended.
func TestParkingMetrics(t *testing.T) {
	s := redistest.Start(t, redistest.Options{})
	reg := prometheus.NewRegistry()
	q := newTestQueue(t, s.Client(), Options[string]{MetricsProvider: wqprometheus.NewProvider(reg), Name: "objects", ParkBackoff: noParkBackoff()})
	other := newHandle(t, s.Client(), queueNameOf(q), Options[string]{ParkBackoff: noParkBackoff()})
	other.Add("a")
	other.Add("b")
	for range 2 {
		item := getNow(t, q)
		q.Park(item, "e")
		q.Done(item)
	}
	assert.Equal(t, 2.0, metricValue(t, reg, "workqueue_parked_items"))
	assert.Equal(t, 2, q.Wake("e"))
	assert.Equal(t, 0.0, metricValue(t, reg, "workqueue_parked_items"))
	assert.Equal(t, 2.0, metricValue(t, reg, "workqueue_wakes_total"))
	for range 2 {
		other.Done(getNow(t, other))
	}
}

// TestWakeFunc checks that WakeFunc ends the parks of the items accept
// accepts, in every partition, and only those whose park is still the
// one it read: a park that an add ended while accept ran stays ended, and
// is not counted.
func TestWakeFunc(t *testing.T) {
	s := redistest.Start(t, redistest.Options{})
	for _, partitions := range []int{1, 3} {
		t.Run(fmt.Sprint("partitions=", partitions), func(t *testing.T) {
			opts := Options[string]{Partitions: partitions, ParkBackoff: noParkBackoff()}
			q := newTestQueue(t, s.Client(), opts)
			other := newHandle(t, s.Client(), queueNameOf(q), opts)
			keys := []string{"a", "b", "c", "d"}
			for _, key := range keys {
				q.Add(key)
			}
			for range keys {
				item := getNow(t, q)
				q.Park(item, "e")
				q.Done(item)
			}
			var asked []string
			n := other.WakeFunc("e", func(item string) bool {
				asked = append(asked, item)
				if len(asked) == 1 {
					q.Add("d") // ends d's park before WakeFunc ends any
				}
				return item != "a"
			})
			assert.Equal(t, 2, n, "b and c woken; d's park was ended by its add")
			assert.ElementsMatch(t, keys, asked)
			assert.Equal(t, 3, q.Len())
			verifyParks(t, s.Client(), q)
			assert.Equal(t, 1, other.Wake("e"), "a is still parked")
			for range keys {
				q.Done(getNow(t, q))
			}
		})
	}
}

// TestDelayedAddsOfParkedKeys checks with a fake clock how delayed adds
// meet a park: AddWithOpts with After ends the park and the key waits for
// its delay, as in the in-memory priority queue; an AddAfter ends the park
// when its time comes, and a wake before then leaves it waiting.
func TestDelayedAddsOfParkedKeys(t *testing.T) {
	s := redistest.Start(t, redistest.Options{})
	clk := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
	opts := Options[string]{Clock: clk, MaxParkTime: time.Minute, LeaseDuration: time.Hour, ParkBackoff: noParkBackoff()}
	q := newTestQueue(t, s.Client(), opts)
	other := newHandle(t, s.Client(), queueNameOf(q), opts)
	park := func(item string) {
		q.Add(item)
		require.Equal(t, item, getNow(t, q))
		q.Park(item, "e-"+item)
		q.Done(item)
	}

	park("opts")
	other.AddWithOpts(workqueue.AddOpts{After: 10 * time.Second}, "opts")
	assert.Equal(t, 0, other.Wake("e-opts"), "the add ended the park")
	park("after")
	other.AddAfter("after", 10*time.Second)
	park("woken")
	other.AddAfter("woken", 10*time.Second)
	assert.Equal(t, 1, other.Wake("e-woken"))
	assert.Equal(t, "woken", getNow(t, q))
	q.Done("woken")
	assertNothingReady(t, q)
	clk.Step(10 * time.Second)
	var got []string
	for range 3 {
		item := getNow(t, q)
		got = append(got, item)
		q.Done(item)
	}
	assert.ElementsMatch(t, []string{"opts", "after", "woken"}, got)
	assert.Equal(t, 0, other.Wake("e-after"), "its AddAfter ended the park")
	clk.Step(time.Hour)
	assertNothingReady(t, q)
	verifyParks(t, s.Client(), q)
}

// TestParkBackoff checks with a fake clock, across two handles, the rule
// of the in-memory rate-limiting queue's ParkBackoff: a Wake or WakeFunc
// queues the key no sooner than its backoff after the Park (here 1s, then
// 2s as the handle's limiter counts its parks), as do a park that ends at
// Done and MaxParkTime's end; WakeItem and an add queue it at once;
// Forget resets the count.
func TestParkBackoff(t *testing.T) {
	s := redistest.Start(t, redistest.Options{})
	type env struct {
		q, other *Queue[string]
		clk      *clocktesting.FakeClock
	}
	park := func(e env, key string) {
		e.q.Add(key)
		require.Equal(t, key, getNow(t, e.q))
		e.q.Park(key, "ev")
		e.q.Done(key)
	}
	tests := []struct {
		name    string
		maxPark time.Duration
		run     func(e env, key string)
		ready   time.Duration // from the start, when the key is queued
	}{
		{name: "a wake before the backoff waits for it", run: func(e env, key string) {
			park(e, key)
			assert.Equal(t, 1, e.other.Wake("ev"))
		}, ready: time.Second},
		{name: "a wake after the backoff queues at once", run: func(e env, key string) {
			park(e, key)
			e.clk.Step(3 * time.Second)
			assert.Equal(t, 1, e.other.Wake("ev"))
		}, ready: 3 * time.Second},
		{name: "WakeFunc waits too", run: func(e env, key string) {
			park(e, key)
			assert.Equal(t, 1, e.other.WakeFunc("ev", func(string) bool { return true }))
		}, ready: time.Second},
		{name: "WakeItem does not wait", run: func(e env, key string) {
			park(e, key)
			assert.True(t, e.other.WakeItem(key))
		}},
		{name: "an add does not wait", run: func(e env, key string) {
			park(e, key)
			e.other.Add(key)
		}},
		{name: "a second park backs off twice as long", run: func(e env, key string) {
			park(e, key)
			e.other.Wake("ev")
			e.clk.Step(time.Second)
			park(e, key)
			assert.Equal(t, 1, e.other.Wake("ev"))
		}, ready: 3 * time.Second},
		{name: "Forget resets the count", run: func(e env, key string) {
			park(e, key)
			e.other.Wake("ev")
			e.clk.Step(time.Second)
			require.Equal(t, key, getNow(t, e.q))
			e.q.Forget(key)
			e.q.Park(key, "ev")
			e.q.Done(key)
			assert.Equal(t, 1, e.other.Wake("ev"))
		}, ready: 2 * time.Second},
		{name: "a wake before Done waits after it", run: func(e env, key string) {
			e.q.Add(key)
			require.Equal(t, key, getNow(t, e.q))
			e.q.Park(key, "ev")
			assert.Equal(t, 1, e.other.Wake("ev"))
			e.q.Done(key)
		}, ready: time.Second},
		{name: "woken between Get and Park: the park ends at Done, after the backoff", run: func(e env, key string) {
			e.q.Add(key)
			require.Equal(t, key, getNow(t, e.q))
			e.other.Wake("ev")
			e.q.Park(key, "ev")
			e.q.Done(key)
		}, ready: time.Second},
		{name: "MaxParkTime's end waits for the backoff", maxPark: 500 * time.Millisecond, run: func(e env, key string) {
			park(e, key)
		}, ready: time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
			start := clk.Now()
			opts := Options[string]{Clock: clk, MaxParkTime: tt.maxPark, LeaseDuration: time.Hour,
				ParkBackoff: workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Second, time.Minute)}
			q := newTestQueue(t, s.Client(), opts)
			e := env{q: q, other: newHandle(t, s.Client(), queueNameOf(q), opts), clk: clk}
			const key = "k"
			tt.run(e, key)
			if wait := tt.ready - clk.Since(start); wait > 0 {
				clk.Step(wait - time.Millisecond)
				assert.Equal(t, 0, q.Len(), "Len a millisecond before the backoff ends")
				assertNothingReady(t, q)
				clk.Step(time.Millisecond)
			}
			assert.Equal(t, 1, q.Len(), "Len once the backoff has ended")
			require.Equal(t, key, getNow(t, q))
			q.Done(key)
			verifyParks(t, s.Client(), q)
		})
	}
}
