package redisqueue

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/go-workqueue/workqueue"
	"github.com/go-workqueue/workqueue/redis/redistest"
)

// flowOfItem is the fairness key of the tests' items: their first letter.
func flowOfItem(item string) string { return item[:1] }

// TestFairness runs short scripts of calls through two handles of a queue
// with Fairness by first letter, and checks the order the items are then
// handed out in: the flows take turns within a priority, one item each
// (w for a weight of w), a flow's first item waiting behind at most one
// item of each other flow, whichever handle added them.
func TestFairness(t *testing.T) {
	s := redistest.Start(t, redistest.Options{})
	tests := []struct {
		name    string
		weights map[string]int
		// nested adds a second Fairness function by the items' first two letters, of
		// weights nestedWeights.
		nested        bool
		nestedWeights map[string]int
		// ops separated by spaces, each by handle 0 unless prefixed "1:":
		// +x Add, +x@p AddWithOpts at priority p, g Get (held), -x Done,
		// x:x Remove.
		script string
		gets   []string // what the final Gets hand out, in order
	}{
		{name: "flows take turns", script: "+a1 +a2 +a3 +b1 +c1", gets: []string{"a1", "b1", "c1", "a2", "a3"}},
		{name: "across handles", script: "+a1 1:+b1 +a2 1:+b2 +a3 1:+b3", gets: []string{"a1", "b1", "a2", "b2", "a3", "b3"}},
		{name: "a late flow waits behind one item of each", script: "+a1 +a2 +a3 +b1 +b2 g +c1", gets: []string{"b1", "c1", "a2", "b2", "a3"}},
		{name: "within each priority", script: "+a1@1 +a2@1 +b1 +b2 +c1@1", gets: []string{"a1", "c1", "a2", "b1", "b2"}},
		{name: "raised goes behind its new priority's turn", script: "+a1@1 +a2@1 +b1 +b1@1", gets: []string{"a1", "b1", "a2"}},
		{name: "added while processed is queued fairly at Done", script: "+a1 +a2 g +a1 1:+b1 -a1", gets: []string{"a2", "b1", "a1"}},
		{name: "removed", script: "+a1 +a2 +b1 x:a1 1:x:b1", gets: []string{"a2"}},
		// Priority 1 empties while priority 0 holds q1: x's many turns
		// there are forgotten, so x4 does not wait behind all of y's.
		{name: "an emptied priority starts afresh", script: "+q1 +x1@1 +x2@1 +x3@1 +z1@1 +z2@1 g g g g g +y1@1 +y2@1 +y3@1 +x4@1", gets: []string{"x4", "y1", "y2", "y3", "q1"}},
		// A flow's keys taken back do not hold back its next one.
		{name: "removed keys give their turns back", script: "+a1 +a2 +a3 +b1 +b2 +b3 x:a1 x:a2 x:a3 +a4", gets: []string{"a4", "b1", "b2", "b3"}},
		{name: "raised keys give their turns back", script: "+a1 +a2 +b1 +b2 +a1@1 +a2@1 +a3", gets: []string{"a1", "a2", "a3", "b1", "b2"}},
		{name: "weights", weights: map[string]int{"a": 2}, script: "+a1 +a2 +a3 +a4 +b1 +b2", gets: []string{"a1", "b1", "a2", "a3", "b2", "a4"}},
		// Were a's turns kept, a3 would go after b1; afresh, the two tie
		// and the lower key goes first.
		{name: "an emptied queue starts afresh", script: "+a1 +a2 g g -a1 -a2 +b1 +a3", gets: []string{"a3", "b1"}},
		// Nested: tenants (first letter) take turns, and the namespaces
		// (first two letters) of each within its turns.
		{name: "nested: tenants take turns, namespaces within", nested: true, script: "+Aa1 +Aa2 +Aa3 +Ab1 +Bc1 +Bc2", gets: []string{"Aa1", "Bc1", "Ab1", "Bc2", "Aa2", "Aa3"}},
		{name: "nested: a late namespace waits behind one item of its tenant's others", nested: true, script: "+Aa1 +Aa2 +Aa3 +Bb1 +Bb2 +Bb3 g +Ac1", gets: []string{"Bb1", "Aa2", "Bb2", "Ac1", "Bb3", "Aa3"}},
		{name: "nested: across handles", nested: true, script: "+Aa1 1:+Aa2 +Ab1 1:+Ba1", gets: []string{"Aa1", "Ba1", "Ab1", "Aa2"}},
		{name: "nested: weights", nested: true, nestedWeights: map[string]int{"Aa": 2}, script: "+Aa1 +Aa2 +Aa3 +Ab1 +Ab2", gets: []string{"Aa1", "Ab1", "Aa2", "Aa3", "Ab2"}},
		// Within one tenant the namespaces' turns are the flat queue's,
		// ties broken by key, whichever is its tenant's next item.
		{name: "nested: a tie goes to the lower key", nested: true, script: "+Xc +Xa@0 g -Xa +Xa@0 +Xb", gets: []string{"Xb", "Xc", "Xa"}},
		{name: "nested: a key handed out keeps its turn", nested: true, script: "+Xc +Xa g +Xa -Xa", gets: []string{"Xc", "Xa"}},
		// A tenant's weight holds while its namespaces' items move up one
		// at a time, whether or not another tenant has one in the turns.
		{name: "nested: tenants' weights", nested: true, weights: map[string]int{"A": 3}, script: "+Aa1 +Aa2 +Aa3 +Aa4 +Aa5 +Bb1 +Bb2", gets: []string{"Aa1", "Bb1", "Aa2", "Aa3", "Aa4", "Bb2", "Aa5"}},
		{name: "nested: a lone tenant keeps its turns", nested: true, weights: map[string]int{"A": 3}, script: "+Aa1 +Aa2 +Aa3 +Aa4 +Aa5 +Aa6 +Bb1 g g g -Bb1 +Bb1", gets: []string{"Aa3", "Aa4", "Bb1", "Aa5", "Aa6"}},
		{name: "nested: removed and raised", nested: true, script: "+Aa1 +Aa2 +Ab1 +Ba1 x:Aa1 +Ab1@1 1:x:Ba1", gets: []string{"Ab1", "Aa2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := Options[string]{Fairness: []func(string) string{flowOfItem}, FairnessWeights: []func(string) int{func(flow string) int { return tt.weights[flow] }}}
			if tt.nested {
				opts.Fairness = append(opts.Fairness, func(item string) string { return item[:2] })
				opts.FairnessWeights = append(opts.FairnessWeights, func(key string) int { return tt.nestedWeights[key] })
			}
			first := newTestQueue(t, s.Client(), opts)
			handles := []*Queue[string]{first, newHandle(t, s.Client(), queueNameOf(first), opts)}
			ctx := context.Background()
			var held []string
			for op := range strings.FieldsSeq(tt.script) {
				q := handles[0]
				if rest, ok := strings.CutPrefix(op, "1:"); ok {
					q, op = handles[1], rest
				}
				switch {
				case op == "g":
					held = append(held, getNow(t, q))
				case strings.HasPrefix(op, "x:"):
					_, err := q.RemoveContext(ctx, op[2:])
					require.NoError(t, err)
				case op[0] == '-':
					require.NoError(t, q.DoneContext(ctx, op[1:]))
				case strings.Contains(op, "@"):
					item, p, _ := strings.Cut(op[1:], "@")
					priority, err := strconv.Atoi(p)
					require.NoError(t, err)
					require.NoError(t, q.AddWithOptsContext(ctx, workqueue.AddOpts{Priority: &priority}, item))
				default:
					require.NoError(t, q.AddContext(ctx, op[1:]))
				}
			}
			var got []string
			for range tt.gets {
				got = append(got, getNow(t, first))
			}
			for _, item := range got {
				require.NoError(t, first.DoneContext(ctx, item))
			}
			assert.Equal(t, tt.gets, got)
			n, err := first.LenContext(ctx)
			require.NoError(t, err)
			assert.Zero(t, n, "items left queued")
			for _, item := range held {
				_ = first.DoneContext(ctx, item) // those done already are refused
			}
		})
	}
}

// TestFairnessForgetsIdleKeys: the flows of keys the queue no longer holds,
// and the turns of a queue emptied, are dropped, so that the hashes they
// live in do not grow with every key and flow ever added.
func TestFairnessForgetsIdleKeys(t *testing.T) {
	s := redistest.Start(t, redistest.Options{})
	q := newTestQueue(t, s.Client(), Options[string]{Fairness: []func(string) string{flowOfItem}})
	ctx := context.Background()
	for _, item := range []string{"a1", "a2", "b1", "c1"} {
		require.NoError(t, q.AddContext(ctx, item))
	}
	// A key that waits for its delay keeps its flow while idle.
	require.NoError(t, q.AddAfterContext(ctx, "e1", time.Hour))
	_, err := q.RemoveContext(ctx, "c1")
	require.NoError(t, err)
	for range 3 {
		require.NoError(t, q.DoneContext(ctx, getNow(t, q)))
	}
	require.NoError(t, q.AddContext(ctx, "d1")) // finds the queue empty
	require.NoError(t, q.DoneContext(ctx, getNow(t, q)))
	keys := newQueueKeys("wq:{" + queueNameOf(q) + "}:")
	n, err := s.Client().HLen(ctx, keys.all[slices.Index(keyParts, "flows")]).Result()
	require.NoError(t, err)
	assert.EqualValues(t, 1, n, "flows of idle keys: e1's alone")
	fields, err := s.Client().HKeys(ctx, keys.all[slices.Index(keyParts, "fair")]).Result()
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"v0", "f0 d"}, fields, "the turns left after the queue emptied")
}

// TestFairnessSweepsIdleFlows: on a queue that never empties, the turns of
// fairness keys seen once are swept, so that the hash they live in stays
// near its sweep size instead of growing with every key ever seen.
func TestFairnessSweepsIdleFlows(t *testing.T) {
	s := redistest.Start(t, redistest.Options{})
	q := newTestQueue(t, s.Client(), Options[string]{Fairness: []func(string) string{func(item string) string { return item }}})
	ctx := context.Background()
	low := -1
	require.NoError(t, q.AddWithOptsContext(ctx, workqueue.AddOpts{Priority: &low}, "anchor")) // keeps the queue from emptying
	const flows = 3000
	for i := range flows {
		item := fmt.Sprint("k", i)
		require.NoError(t, q.AddContext(ctx, item))
		require.Equal(t, item, getNow(t, q))
		require.NoError(t, q.DoneContext(ctx, item))
	}
	n, err := s.Client().HLen(ctx, q.parts[0].keys.all[indexOfPart("fair")]).Result()
	require.NoError(t, err)
	assert.Less(t, n, int64(1024+64+8), "fields of the turns after %d fairness keys seen once", flows)
	assert.Equal(t, "anchor", getNow(t, q))
	require.NoError(t, q.DoneContext(ctx, "anchor"))
}

// BenchmarkFairness adds, gets and marks done one item per op, from 16
// goroutines on one handle, with 100 flows: on a FIFO queue, with
// priorities (AddWithOpts at priority 1), and with Fairness, so that
// the cost of each is measured side by side.
func BenchmarkFairness(b *testing.B) {
	s := redistest.Start(b, redistest.Options{})
	for _, bb := range []struct {
		name string
		opts Options[string]
		prio bool
	}{
		{name: "fifo"},
		{name: "priorities", prio: true},
		{name: "fairness", opts: Options[string]{Fairness: []func(string) string{func(item string) string { return item[:2] }}}},
	} {
		b.Run(bb.name, func(b *testing.B) {
			q := New(s.Client(), "bench-fair-"+bb.name+strconv.Itoa(b.N), bb.opts)
			defer q.ShutDown()
			var next atomic.Int64
			one := 1
			b.SetParallelism(16)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					n := next.Add(1)
					item := strconv.Itoa(int(10+n%90)) + "-" + strconv.FormatInt(n, 10)
					if bb.prio {
						q.AddWithOpts(workqueue.AddOpts{Priority: &one}, item)
					} else {
						q.Add(item)
					}
					got, _ := q.Get()
					q.Done(got)
				}
			})
		})
	}
}

// TestFairnessDelayedKeys: a key that comes due after its delay takes its
// flow's turn, even one added again while it was processed and left idle
// at its Done, whose flow the queue keeps while it waits.
func TestFairnessDelayedKeys(t *testing.T) {
	s := redistest.Start(t, redistest.Options{})
	clk := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
	opts := Options[string]{Clock: clk, Fairness: []func(string) string{flowOfItem}}
	q := newTestQueue(t, s.Client(), opts)
	other := newHandle(t, s.Client(), queueNameOf(q), opts)
	q.Add("b1")
	require.Equal(t, "b1", getNow(t, q))
	q.AddAfter("b1", time.Second)
	q.Done("b1")
	other.AddAfter("c1", time.Second)
	for _, item := range []string{"a1", "a2", "a3"} {
		q.Add(item)
	}
	clk.Step(time.Second)
	var got []string
	for range 5 {
		item := getNow(t, other)
		got = append(got, item)
		other.Done(item)
	}
	assert.Equal(t, []string{"a1", "b1", "c1", "a2", "a3"}, got)
}

// TestMaxWait: an item queued for longer than MaxWait is handed out before
// any other, whatever its priority, the longest queued first, by any
// handle; a raised item keeps its time, and one removed leaves nothing
// behind to hand out.
func TestMaxWait(t *testing.T) {
	s := redistest.Start(t, redistest.Options{})
	tests := []struct {
		name     string
		fairness func(string) string
		// nested adds a second Fairness function by the whole item: Snapshot lists, of
		// each Fairness key, its aged items and its next one.
		nested bool
		// steps: "+x@p" AddWithOpts at priority p, "wN" N seconds pass,
		// "g:x" a Get must hand out x, "x:x" Remove, "s:x,y" Snapshot
		// lists x and y queued, in that order.
		script string
	}{
		{name: "aged first", script: "+old@-1 w5 +high@5 g:high w6 +mid@0 +top@9 g:old g:top g:mid"},
		{name: "longest first", script: "+a@-1 w1 +b@-2 w1 +c@3 w20 g:a g:b g:c"},
		{name: "raised keeps its time", script: "+a@-1 w5 +b@1 +a@2 w6 +c@9 g:a g:c g:b"},
		{name: "removed", script: "+a@-1 w11 x:a +b@0 g:b"},
		{name: "snapshot lists the aged first", script: "+old@-1 w5 +high@5 w6 +mid@0 +top@9 s:old,top,high,mid g:old g:top g:high g:mid"},
		{name: "with fairness", fairness: flowOfItem, script: "+a1@0 +a2@0 w11 +b1@5 +a3@0 g:a1 g:a2 g:b1 g:a3"},
		{name: "with nested fairness", fairness: flowOfItem, nested: true, script: "+a1@0 +a2@0 +a3@0 w11 +b1@5 +a4@0 s:a1,a2,a3,b1 g:a1 g:a2 g:a3 g:b1 g:a4"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
			opts := Options[string]{Clock: clk, MaxWait: 10 * time.Second}
			if tt.fairness != nil {
				opts.Fairness = []func(string) string{tt.fairness}
			}
			if tt.nested {
				opts.Fairness = append(opts.Fairness, func(item string) string { return item })
			}
			q := newTestQueue(t, s.Client(), opts)
			other := newHandle(t, s.Client(), queueNameOf(q), opts)
			ctx := context.Background()
			for i, op := range strings.Fields(tt.script) {
				h := []*Queue[string]{q, other}[i%2]
				switch {
				case op[0] == 'w':
					n, err := strconv.Atoi(op[1:])
					require.NoError(t, err)
					clk.Step(time.Duration(n) * time.Second)
				case strings.HasPrefix(op, "g:"):
					item := getNow(t, h)
					require.Equal(t, op[2:], item, "step %d", i)
					require.NoError(t, h.DoneContext(ctx, item))
				case strings.HasPrefix(op, "s:"):
					snap, err := h.SnapshotContext(ctx, 10)
					require.NoError(t, err)
					require.Equal(t, strings.Split(op[2:], ","), snap.Queued, "step %d", i)
				case strings.HasPrefix(op, "x:"):
					took, err := h.RemoveContext(ctx, op[2:])
					require.NoError(t, err)
					require.True(t, took)
				default:
					item, p, _ := strings.Cut(op[1:], "@")
					priority, err := strconv.Atoi(p)
					require.NoError(t, err)
					require.NoError(t, h.AddWithOptsContext(ctx, workqueue.AddOpts{Priority: &priority}, item))
				}
			}
			n, err := q.LenContext(ctx)
			require.NoError(t, err)
			assert.Zero(t, n)
			ages, err := s.Client().ZCard(ctx, q.parts[0].keys.all[slices.Index(keyParts, "ages")]).Result()
			require.NoError(t, err)
			assert.Zero(t, ages, "entries left in AGES")
		})
	}
}

// TestFairnessWokenKeys: a parked key that is woken, by any handle, takes
// its flow's turn.
func TestFairnessWokenKeys(t *testing.T) {
	s := redistest.Start(t, redistest.Options{})
	opts := Options[string]{Fairness: []func(string) string{flowOfItem}, ParkBackoff: noParkBackoff()}
	q := newTestQueue(t, s.Client(), opts)
	other := newHandle(t, s.Client(), queueNameOf(q), opts)
	for _, item := range []string{"a1", "a2", "a3"} {
		q.Add(item)
	}
	require.Equal(t, "a1", getNow(t, q))
	q.Park("a1", "ready")
	q.Done("a1")
	other.Add("b1")
	assert.Equal(t, 1, other.Wake("ready"))
	var got []string
	for range 4 {
		item := getNow(t, other)
		got = append(got, item)
		other.Done(item)
	}
	assert.Equal(t, []string{"a2", "b1", "a3", "a1"}, got)
}

// TestFairnessSnapshot: Snapshot lists a fair queue's items in hand-out
// order, those at priority 0, which it keeps beside the others, included.
func TestFairnessSnapshot(t *testing.T) {
	s := redistest.Start(t, redistest.Options{})
	q := newTestQueue(t, s.Client(), Options[string]{Fairness: []func(string) string{flowOfItem}})
	one, low := 1, -1
	q.Add("a1")
	q.Add("a2")
	q.Add("b1")
	q.AddWithOpts(workqueue.AddOpts{Priority: &one}, "c1")
	q.AddWithOpts(workqueue.AddOpts{Priority: &low}, "d1")
	assert.Equal(t, []string{"c1", "a1", "b1", "a2", "d1"}, q.Snapshot(10).Queued)
	for range 5 {
		q.Done(getNow(t, q))
	}
}

// TestNestedFairnessMatchesFlat runs random calls on a queue with Fairness
// by item and on one whose items are the second-level keys of one
// Fairness key, and checks that every Get hands out the same item: one
// first-level key's turns are its second-level keys' turns, the same
// start-time fair queueing, whose heads and ties must not change the
// order.
func TestNestedFairnessMatchesFlat(t *testing.T) {
	s := redistest.Start(t, redistest.Options{})
	ctx := context.Background()
	for seed := range uint64(60) {
		flat := newTestQueue(t, s.Client(), Options[string]{RateLimit: &RateLimit{}, Fairness: []func(string) string{func(item string) string { return item }}})
		nested := newTestQueue(t, s.Client(), Options[string]{RateLimit: &RateLimit{},
			Fairness: []func(string) string{func(string) string { return "" }, func(item string) string { return item }}})
		rng := rand.New(rand.NewPCG(seed, 2))
		var log []string
		var held []string
		for range 60 {
			item := []string{"a", "b", "c"}[rng.IntN(3)]
			switch r := rng.IntN(10); {
			case r < 3:
				log = append(log, "+"+item)
				require.NoError(t, flat.AddContext(ctx, item))
				require.NoError(t, nested.AddContext(ctx, item))
			case r < 5:
				priority := rng.IntN(3) - 1
				log = append(log, fmt.Sprintf("+%s@%d", item, priority))
				require.NoError(t, flat.AddWithOptsContext(ctx, workqueue.AddOpts{Priority: &priority}, item))
				require.NoError(t, nested.AddWithOptsContext(ctx, workqueue.AddOpts{Priority: &priority}, item))
			case r < 6:
				log = append(log, "x:"+item)
				a, err := flat.RemoveContext(ctx, item)
				require.NoError(t, err)
				b, err := nested.RemoveContext(ctx, item)
				require.NoError(t, err)
				require.Equal(t, a, b, "Remove after %v", log)
			case r < 8 || len(held) == 0:
				n, err := flat.LenContext(ctx)
				require.NoError(t, err)
				if n == 0 {
					assertNothingReady(t, nested)
					continue
				}
				want := getNow(t, flat)
				log = append(log, "g:"+want)
				require.Equal(t, want, getNow(t, nested), "after %v", log)
				held = append(held, want)
			default:
				var item string
				item, held = takeOne(rng, held)
				log = append(log, "-"+item)
				require.NoError(t, flat.DoneContext(ctx, item))
				require.NoError(t, nested.DoneContext(ctx, item))
			}
			a, err := flat.LenContext(ctx)
			require.NoError(t, err)
			b, err := nested.LenContext(ctx)
			require.NoError(t, err)
			require.Equal(t, a, b, "Len after %v", log)
		}
		for _, item := range held {
			require.NoError(t, flat.DoneContext(ctx, item))
			require.NoError(t, nested.DoneContext(ctx, item))
		}
	}
}

// TestNestedFairnessBatchedGets: Gets served by one get script get the
// items in the order single Gets would, though each tenant's next item
// moves up only as its previous one is handed out.
func TestNestedFairnessBatchedGets(t *testing.T) {
	s := redistest.Start(t, redistest.Options{})
	q := newTestQueue(t, s.Client(), Options[string]{
		Fairness:        []func(string) string{flowOfItem, func(item string) string { return item[:2] }},
		FairnessWeights: []func(string) int{func(key string) int { return map[string]int{"A": 3}[key] }}})
	ctx := context.Background()
	for _, item := range []string{"Aa1", "Aa2", "Aa3", "Ab1", "Ab2", "Bb1", "Bb2"} {
		require.NoError(t, q.AddContext(ctx, item))
	}
	nonces := make([]string, 7)
	for i := range nonces {
		nonces[i] = newNonce()
	}
	grants, err := q.runTakes(q.parts[0], nonces)
	require.NoError(t, err)
	var got []string
	for _, g := range grants {
		require.True(t, g.ok)
		got = append(got, g.key)
	}
	// Tenant A (weight 3) takes three turns to B's one; within A the
	// namespaces a and b alternate.
	assert.Equal(t, []string{"Aa1", "Bb1", "Ab1", "Aa2", "Ab2", "Bb2", "Aa3"}, got)
}
