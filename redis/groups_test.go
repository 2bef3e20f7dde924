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
	"github.com/go-workqueue/workqueue/redis/redistest"
)

// groupOfItem is the group of the tests' items: their first letter, and
// none for those that start with "z".
func groupOfItem(item string) string {
	if item[0] == 'z' {
		return ""
	}
	return item[:1]
}

// TestGroupLimits runs short scripts of calls through two handles of a
// queue whose groups are the items' first letters, and checks what each
// Get hands out: a Get passes over the keys of a group at its limit,
// which keep their place in the queue's order until a slot frees.
func TestGroupLimits(t *testing.T) {
	s := redistest.Start(t, redistest.Options{})
	tests := []struct {
		name       string
		limits     map[string]int // over a default of 1
		maxWait    time.Duration
		fairness   bool
		nested     bool // Fairness "" for all, then by first letter
		partitions int
		// ops separated by spaces, each by handle 0 unless prefixed "1:":
		// +x Add, +x@p AddWithOpts at priority p, g:x a Get that hands
		// out x (g:x@p at priority p), g: one that finds nothing, -x Done, x:x Remove, L:a=n
		// SetGroupLimit.
		script string
	}{
		{name: "a full group's keys are passed over", script: "+a1 +a2 +b1 g:a1 g:b1 g: -a1 g:a2 g:"},
		{name: "the group's order is kept", script: "+a1 +a2 +a3 +b1 g:a1 g:b1 +b2 g: -a1 g:a2 -b1 g:b2 -a2 g:a3"},
		{name: "a freed key comes back in the queue's order", script: "+a1 +a2 +b1 +b2 g:a1 g:b1 g: -b1 -a1 g:a2 g:b2"},
		{name: "at its priority", script: "+a1 +a2@2 +b1@1 g:a2 g:b1 g: -a2 g:a1"},
		{name: "at a priority below 0", script: "+a1 +a2@-1 +a3@-9007199254740992 +b1@-2 g:a1 g:b1 g: -a1 g:a2@-1 g: -a2 g:a3@-9007199254740992"},
		{name: "a blocked key raised", script: "+a1 +a2 +b1 +b2 g:a1 g:b1 g: +a2@5 +b3@5 -a1 -b1 g:a2 g:b3 g: -b3 g:b2"},
		{name: "a blocked key removed", script: "+a1 +a2 g:a1 g: x:a2 -a1 g:"},
		{name: "across handles", script: "+a1 1:+a2 1:g:a1 g: 1:-a1 g:a2"},
		{name: "items of no group are not limited", script: "+z1 +z2 +a1 g:z1 g:z2 g:a1"},
		{name: "limits by name", limits: map[string]int{"a": 2}, script: "+a1 +a2 +a3 +b1 +b2 g:a1 g:a2 g:b1 g: -a1 g:a3"},
		{name: "added while processed waits for a slot at Done", script: "+a1 +a2 g:a1 +a1 g: -a1 g:a2 g: -a2 g:a1"},
		{name: "a raised limit hands out at once", script: "+a1 +a2 +a3 g:a1 g: 1:L:a=3 g:a2 g:a3"},
		{name: "a lowered limit waits for leases to end", limits: map[string]int{"a": 2}, script: "+a1 +a2 +a3 g:a1 g:a2 L:a=1 -a1 g: -a2 g:a3"},
		{name: "no limit", script: "+a1 +a2 +a3 g:a1 g: L:a=0 g:a2 g:a3"},
		{name: "with fairness", fairness: true, script: "+a1 +a2 +a3 +b1 +b2 g:a1 g:b1 g: -a1 g:a2 -b1 g:b2"},
		{name: "with nested fairness", nested: true, script: "+a1 +a2 +a3 +b1 +b2 g:a1 g:b1 g: -a1 g:a2 -b1 g:b2 +c1@1 g:c1"},
		{name: "with MaxWait", maxWait: time.Hour, script: "+a1 +a2 +b1 g:a1 g:b1 g: -a1 g:a2"},
		// A group's keys are all in the partition of its name: the limit
		// holds across the queue.
		{name: "partitioned", partitions: 3, limits: map[string]int{"a": 2}, script: "+a1 +a2 +a3 +a4 +a5 g:a1 g:a2 g: -a2 g:a3 g: 1:L:a=3 g:a4 g:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := Options[string]{MaxWait: tt.maxWait, Partitions: tt.partitions, GroupLimits: &workqueue.GroupLimits[string]{Group: groupOfItem, Default: 1, Limits: tt.limits}}
			if tt.fairness {
				opts.Fairness = []func(string) string{flowOfItem}
			}
			if tt.nested {
				opts.Fairness = []func(string) string{func(string) string { return "" }, flowOfItem}
			}
			first := newTestQueue(t, s.Client(), opts)
			handles := []*Queue[string]{first, newHandle(t, s.Client(), queueNameOf(first), opts)}
			ctx := context.Background()
			held := map[string]*Queue[string]{}
			for op := range strings.FieldsSeq(tt.script) {
				q := handles[0]
				if rest, ok := strings.CutPrefix(op, "1:"); ok {
					q, op = handles[1], rest
				}
				switch {
				case op == "g:":
					assertNothingReady(t, q)
				case strings.HasPrefix(op, "g:"):
					want, p, _ := strings.Cut(op[2:], "@")
					ctx, cancel := context.WithTimeout(ctx, time.Second)
					item, priority, err := q.GetWithPriorityContext(ctx)
					cancel()
					require.NoError(t, err)
					require.Equal(t, want, item, "after the ops before %s", op)
					if p != "" {
						assert.Equal(t, p, strconv.Itoa(priority), "the priority of %s", item)
					}
					held[want] = q
				case strings.HasPrefix(op, "x:"):
					_, err := q.RemoveContext(ctx, op[2:])
					require.NoError(t, err)
				case strings.HasPrefix(op, "L:"):
					group, n, _ := strings.Cut(op[2:], "=")
					limit, err := strconv.Atoi(n)
					require.NoError(t, err)
					require.NoError(t, q.SetGroupLimitContext(ctx, group, limit))
				case op[0] == '-':
					require.NoError(t, held[op[1:]].DoneContext(ctx, op[1:]))
					delete(held, op[1:])
				case strings.Contains(op, "@"):
					item, p, _ := strings.Cut(op[1:], "@")
					priority, err := strconv.Atoi(p)
					require.NoError(t, err)
					require.NoError(t, q.AddWithOptsContext(ctx, workqueue.AddOpts{Priority: &priority}, item))
				default:
					require.NoError(t, q.AddContext(ctx, op[1:]))
				}
			}
			for item, q := range held {
				require.NoError(t, q.DoneContext(ctx, item))
			}
		})
	}
}

// TestGroupLimitsCounts checks what Len and Snapshot say of keys that wait
// for a slot, and that a queue emptied keeps nothing of its groups but
// the limits SetGroupLimit set.
func TestGroupLimitsCounts(t *testing.T) {
	s := redistest.Start(t, redistest.Options{})
	q := newTestQueue(t, s.Client(), Options[string]{GroupLimits: &workqueue.GroupLimits[string]{Group: groupOfItem, Default: 1}})
	ctx := context.Background()
	for _, item := range []string{"a1", "a2", "a3", "b1"} {
		require.NoError(t, q.AddContext(ctx, item))
	}
	assert.Equal(t, "a1", getNow(t, q))
	assert.Equal(t, "b1", getNow(t, q))
	assertNothingReady(t, q)
	assert.Equal(t, 2, q.Len(), "keys waiting for a slot are queued")
	snap := q.Snapshot(10)
	assert.Equal(t, 2, snap.Depth)
	assert.Equal(t, 2, snap.WaitingForSlot)
	assert.Empty(t, snap.Queued, "keys waiting for a slot are not listed")
	q.SetGroupLimit("b", 5)
	for _, item := range []string{"a1", "b1"} {
		require.NoError(t, q.DoneContext(ctx, item))
	}
	for _, want := range []string{"a2", "a3"} {
		item := getNow(t, q)
		assert.Equal(t, want, item)
		require.NoError(t, q.DoneContext(ctx, item))
	}
	keys := q.parts[0].keys
	for _, part := range []string{"groups", "inflight", "blocked", "flows"} {
		n, err := s.Client().Exists(ctx, keys.all[indexOfPart(part)]).Result()
		require.NoError(t, err)
		assert.Zero(t, n, "%s of an emptied queue", part)
	}
	limits, err := s.Client().HGetAll(ctx, keys.all[indexOfPart("limits")]).Result()
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"b": "5"}, limits)
}

func indexOfPart(part string) int {
	for i, p := range keyParts {
		if p == part {
			return i
		}
	}
	panic("no key part " + part)
}

// deadAndLiveHandles returns two handles on a fresh queue with group
// limits of limit by first letter and leases of 3s: dead, whose clock
// stands still, so that its lease keeper never runs, as in a process that
// died; and live, whose clock the test steps.
func deadAndLiveHandles(t *testing.T, s *redistest.Server, limit int) (dead, live *Queue[string], clk *clocktesting.FakeClock) {
	start := time.Unix(1_000_000, 0)
	clk = clocktesting.NewFakeClock(start)
	groups := &workqueue.GroupLimits[string]{Group: groupOfItem, Default: limit}
	dead = newTestQueue(t, s.Client(), Options[string]{Clock: clocktesting.NewFakeClock(start), LeaseDuration: 3 * time.Second, GroupLimits: groups})
	live = newHandle(t, s.Client(), queueNameOf(dead), Options[string]{Clock: clk, LeaseDuration: 3 * time.Second, GroupLimits: groups})
	return dead, live, clk
}

// TestGroupLimitsLeaseExpiry: a slot held by a handle that died frees when
// its lease expires, and the group's waiting key is handed out then. The
// dead handle's clock stands still, so its lease keeper never runs.
func TestGroupLimitsLeaseExpiry(t *testing.T) {
	s := redistest.Start(t, redistest.Options{})
	dead, live, clk := deadAndLiveHandles(t, s, 1)
	ctx := context.Background()
	require.NoError(t, dead.AddContext(ctx, "a1"))
	require.NoError(t, dead.AddContext(ctx, "a2"))
	assert.Equal(t, "a1", getNow(t, dead))
	assertNothingReady(t, live)
	clk.Step(3 * time.Second)
	// a1's lease expired: it comes back first, and takes the freed slot.
	assert.Equal(t, "a1", getNow(t, live))
	assertNothingReady(t, live)
	require.NoError(t, live.DoneContext(ctx, "a1"))
	assert.Equal(t, "a2", getNow(t, live))
	require.NoError(t, live.DoneContext(ctx, "a2"))
	assert.ErrorIs(t, dead.DoneContext(ctx, "a1"), ErrLeaseLost)
}

// TestGroupLimitsMatchInMemoryQueue runs random calls, on one handle and
// on the in-memory priority queue with the same GroupLimits, and checks
// that every Get hands out the same key, or finds nothing ready on both
// (TestGroupLimits checks the priorities).
func TestGroupLimitsMatchInMemoryQueue(t *testing.T) {
	s := redistest.Start(t, redistest.Options{})
	for seed := range uint64(12) {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			groups := workqueue.GroupLimits[string]{Group: groupOfItem, Default: 1, Limits: map[string]int{"b": 2}}
			q := newTestQueue(t, s.Client(), Options[string]{GroupLimits: &groups})
			ref := workqueue.NewTypedPriorityQueue(workqueue.DefaultTypedControllerRateLimiter[string](), workqueue.TypedPriorityQueueConfig[string]{GroupLimits: &groups})
			defer ref.ShutDown()
			ctx := context.Background()
			rng := rand.New(rand.NewPCG(seed, 1))
			items := []string{"a1", "a2", "a3", "b1", "b2", "b3", "c1", "z1", "z2"}
			var held []string
			var log []string
			for range 400 {
				item := items[rng.IntN(len(items))]
				switch r := rng.IntN(10); {
				case r < 3:
					log = append(log, "+"+item)
					require.NoError(t, q.AddContext(ctx, item))
					ref.Add(item)
				case r < 5:
					priority := rng.IntN(4) - 1
					log = append(log, fmt.Sprintf("+%s@%d", item, priority))
					require.NoError(t, q.AddWithOptsContext(ctx, workqueue.AddOpts{Priority: &priority}, item))
					ref.AddWithOpts(workqueue.AddOpts{Priority: &priority}, item)
				case r < 6:
					log = append(log, "x:"+item)
					removed, err := q.RemoveContext(ctx, item)
					require.NoError(t, err)
					assert.Equal(t, ref.Remove(item), removed, "Remove after %v", log)
				case r < 8 || len(held) == 0:
					want := refGet(t, ref)
					log = append(log, "g:"+want)
					if want == "" {
						assertNothingReady(t, q)
						continue
					}
					require.Equal(t, want, getNow(t, q), "after %v", log)
					held = append(held, want)
				default:
					var item string
					item, held = takeOne(rng, held)
					log = append(log, "-"+item)
					require.NoError(t, q.DoneContext(ctx, item))
					ref.Done(item)
				}
				require.Equal(t, ref.Len(), q.Len(), "Len after %v", log)
			}
			for _, item := range held {
				require.NoError(t, q.DoneContext(ctx, item))
			}
		})
	}
}

// refGet hands out the in-memory queue's next item, or "" if none is
// ready. It asks a snapshot rather than a Get with a short deadline,
// which a goroutine stalled past the deadline answers with nothing.
func refGet(t *testing.T, ref *workqueue.TypedPriorityQueue[string]) string {
	t.Helper()
	if s := ref.Snapshot(0); s.Depth == s.WaitingForSlot {
		return ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	item, err := ref.GetContext(ctx)
	require.NoError(t, err, "the in-memory queue has an item ready")
	return item
}

// TestGroupLimitsReclaimedKeysKeepTheirOrder: keys whose leases expired go
// back to the front in the order they were handed out, and those a Get
// then passes over for a slot come back in that order too.
func TestGroupLimitsReclaimedKeysKeepTheirOrder(t *testing.T) {
	s := redistest.Start(t, redistest.Options{})
	dead, live, clk := deadAndLiveHandles(t, s, 3)
	ctx := context.Background()
	for _, item := range []string{"a1", "a2", "a3"} {
		require.NoError(t, dead.AddContext(ctx, item))
		require.Equal(t, item, getNow(t, dead))
	}
	require.NoError(t, live.SetGroupLimitContext(ctx, "a", 1))
	clk.Step(3 * time.Second)
	assert.Equal(t, "a1", getNow(t, live))
	assertNothingReady(t, live) // passes over a2 and a3
	snap, err := live.SnapshotContext(ctx, 10)
	require.NoError(t, err)
	assert.Equal(t, 2, snap.WaitingForSlot)
	require.NoError(t, live.DoneContext(ctx, "a1"))
	assert.Equal(t, "a2", getNow(t, live))
	require.NoError(t, live.DoneContext(ctx, "a2"))
	assert.Equal(t, "a3", getNow(t, live))
	require.NoError(t, live.DoneContext(ctx, "a3"))
	for _, item := range []string{"a1", "a2", "a3"} {
		assert.ErrorIs(t, dead.DoneContext(ctx, item), ErrLeaseLost)
	}
}

// TestGroupLimitsManyWaiting: a group with more keys waiting than one
// script puts back, whose limit is then raised and lifted, has as many
// handed out as each raise makes room for, at once, once each.
func TestGroupLimitsManyWaiting(t *testing.T) {
	s := redistest.Start(t, redistest.Options{})
	q := newTestQueue(t, s.Client(), Options[string]{GroupLimits: &workqueue.GroupLimits[string]{Group: groupOfItem, Default: 1}})
	ctx := context.Background()
	const keys = 2000
	items := make([]string, keys)
	for i := range items {
		items[i] = fmt.Sprintf("a%04d", i)
	}
	require.NoError(t, q.AddBatchContext(ctx, items))
	assert.Equal(t, items[0], getNow(t, q))
	for range keys / 32 {
		assertNothingReady(t, q) // each Get passes over up to 64
	}
	// Each raise hands out as many waiting keys as it has room for while
	// every key handed out stays leased: 299 beside a0000 (more than one
	// script puts back), then the rest.
	seen := map[string]bool{items[0]: true}
	getAll := func(n int) {
		for range n {
			item := getNow(t, q)
			require.False(t, seen[item], "%s handed out twice", item)
			seen[item] = true
		}
	}
	require.NoError(t, q.SetGroupLimitContext(ctx, "a", 300))
	getAll(299)
	assertNothingReady(t, q)
	require.NoError(t, q.SetGroupLimitContext(ctx, "a", 0))
	getAll(keys - 300)
	assertNothingReady(t, q)
	for item := range seen {
		require.NoError(t, q.DoneContext(ctx, item))
	}
	assert.Zero(t, q.Len())
}

// TestSetGroupLimitRoomKeptAcrossCalls runs SetGroupLimit's script calls
// by hand with Gets between them, as concurrent workers may do: the keys
// the Gets lease after the first call do not shrink the room the raise
// made, so the raise hands out all it made room for.
func TestSetGroupLimitRoomKeptAcrossCalls(t *testing.T) {
	s := redistest.Start(t, redistest.Options{})
	q := newTestQueue(t, s.Client(), Options[string]{GroupLimits: &workqueue.GroupLimits[string]{Group: groupOfItem, Default: 1}})
	ctx := context.Background()
	items := make([]string, 1000)
	for i := range items {
		items[i] = fmt.Sprintf("a%04d", i)
	}
	require.NoError(t, q.AddBatchContext(ctx, items))
	assert.Equal(t, items[0], getNow(t, q))
	for range len(items) / 32 {
		assertNothingReady(t, q)
	}
	run := func(room string) []int64 {
		reply, err := q.runCalls(ctx, q.parts[0], opSetLimit, 2, []any{"a", 300, room, q.now()})
		require.NoError(t, err)
		return reply
	}
	held := []string{items[0]}
	getAll := func(n int) {
		for range n {
			held = append(held, getNow(t, q))
		}
	}
	assert.Equal(t, []int64{1, 43}, run(""), "again, with 299 - 256 left")
	getAll(256)
	assert.Equal(t, []int64{0, 0}, run("43"), "done, with none left")
	getAll(43)
	assertNothingReady(t, q)
	for _, item := range held {
		require.NoError(t, q.DoneContext(ctx, item))
	}
}

// takeOne returns one of held at random, and held without it.
func takeOne(rng *rand.Rand, held []string) (string, []string) {
	i := rng.IntN(len(held))
	item := held[i]
	return item, append(held[:i], held[i+1:]...)
}
