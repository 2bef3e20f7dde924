package workqueue

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/go-workqueue/workqueue/internal/grouped"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// tenantOf is the group of the items of the group tests: the part before
// the slash, none without one.
func tenantOf(item string) string {
	tenant, _, found := strings.Cut(item, "/")
	if !found {
		return ""
	}
	return tenant
}

// groupQueue is what the group tests use of a queue.
type groupQueue interface {
	Add(item string)
	GetContext(ctx context.Context) (string, error)
	Done(item string)
	Len() int
	SetGroupLimit(group string, limit int)
	Snapshot(n int) Snapshot[string]
	ShutDown()
	ShutDownWithDrain()
}

// groupQueues makes one queue of each kind with limits.
var groupQueues = []struct {
	name string
	make func(limits GroupLimits[string]) groupQueue
}{
	{"queue", func(limits GroupLimits[string]) groupQueue {
		return NewTypedWithConfig(TypedQueueConfig[string]{GroupLimits: &limits})
	}},
	{"rate limiting", func(limits GroupLimits[string]) groupQueue {
		return NewTypedRateLimitingQueueWithConfig(DefaultTypedControllerRateLimiter[string](), TypedRateLimitingQueueConfig[string]{GroupLimits: &limits})
	}},
	{"priority with fairness", func(limits GroupLimits[string]) groupQueue {
		return NewTypedPriorityQueue(DefaultTypedControllerRateLimiter[string](), TypedPriorityQueueConfig[string]{
			GroupLimits: &limits, Fairness: []func(string) string{func(item string) string { return item[len(item)-1:] }},
		})
	}},
}

func TestGroupLimits(t *testing.T) {
	limits := GroupLimits[string]{Group: tenantOf, Default: 1, Limits: map[string]int{"wide": 2, "free": 0}}
	// Each step is an operation and what it must return; "get" lists the
	// item Get must hand out at once, "" for one that must wait.
	type step struct{ op, item string }
	tests := []struct {
		name  string
		steps []step
		len   int // Len at the end
	}{
		{"a full group is passed over", []step{{"add", "a/1"}, {"add", "a/2"}, {"add", "b/1"}, {"get", "a/1"}, {"get", "b/1"}, {"get", ""}}, 1},
		{"a freed slot hands out the group's next", []step{{"add", "a/1"}, {"add", "a/2"}, {"get", "a/1"}, {"done", "a/1"}, {"get", "a/2"}}, 0},
		{"a limit of two", []step{{"add", "wide/1"}, {"add", "wide/2"}, {"add", "wide/3"}, {"get", "wide/1"}, {"get", "wide/2"}, {"get", ""}}, 1},
		{"a limit of 0 is none", []step{{"add", "free/1"}, {"add", "free/2"}, {"get", "free/1"}, {"get", "free/2"}}, 0},
		{"the empty group has no limit", []step{{"add", "1"}, {"add", "2"}, {"get", "1"}, {"get", "2"}}, 0},
		{"a raised limit hands out at once", []step{{"add", "a/1"}, {"add", "a/2"}, {"get", "a/1"}, {"limit a 2", ""}, {"get", "a/2"}}, 0},
		{"a lowered limit waits for Done", []step{{"add", "wide/1"}, {"add", "wide/2"}, {"add", "wide/3"}, {"get", "wide/1"}, {"limit wide 1", ""}, {"done", "wide/1"}, {"get", "wide/2"}, {"get", ""}}, 1},
		{"an item added while processed waits for its own slot", []step{{"add", "a/1"}, {"get", "a/1"}, {"add", "a/1"}, {"done", "a/1"}, {"get", "a/1"}}, 0},
	}
	for _, q := range groupQueues {
		for _, tt := range tests {
			t.Run(q.name+"/"+tt.name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					queue := q.make(limits)
					defer queue.ShutDown()
					for _, s := range tt.steps {
						switch op := strings.Fields(s.op); op[0] {
						case "add":
							queue.Add(s.item)
						case "done":
							queue.Done(s.item)
						case "limit":
							var n int
							fmt.Sscan(op[2], &n)
							queue.SetGroupLimit(op[1], n)
						case "get":
							ctx, cancel := context.WithCancel(t.Context())
							got := make(chan string, 1)
							go func() {
								item, _ := queue.GetContext(ctx)
								got <- item
							}()
							synctest.Wait()
							cancel()
							assert.Equal(t, s.item, <-got, "Get")
						}
					}
					assert.Equal(t, tt.len, queue.Len(), "Len counts the items waiting for a slot")
				})
			})
		}
	}
}

func TestGroupLimitsSnapshot(t *testing.T) {
	for _, q := range groupQueues {
		t.Run(q.name, func(t *testing.T) {
			queue := q.make(GroupLimits[string]{Group: tenantOf, Default: 1})
			defer queue.ShutDown()
			for _, item := range []string{"a/1", "a/2", "a/3", "b/1", "c/1"} {
				queue.Add(item)
			}
			for range 2 {
				_, err := queue.GetContext(t.Context()) // a/1, then b/1
				require.NoError(t, err)
			}
			s := queue.Snapshot(10)
			assert.Equal(t, 3, s.Depth)
			assert.Equal(t, 2, s.WaitingForSlot)
			assert.ElementsMatch(t, []string{"c/1"}, s.Queued, "Queued lists the items that can be handed out")
			assert.Equal(t, []GroupState{
				{Group: "a", Limit: 1, InFlight: 1, Queued: 2, Waiting: 2},
				{Group: "b", Limit: 1, InFlight: 1},
				{Group: "c", Limit: 1, Queued: 1},
			}, s.Groups)
		})
	}
}

func TestGroupLimitsPanics(t *testing.T) {
	limits := &GroupLimits[string]{Group: tenantOf}
	tests := []struct {
		name, want string
		make       func()
	}{
		{"nil Group", "workqueue: NewTypedWithConfig: GroupLimits.Group is nil", func() {
			NewTypedWithConfig(TypedQueueConfig[string]{GroupLimits: &GroupLimits[string]{Default: 1}})
		}},
		{"custom storage", "workqueue: NewTypedWithConfig: GroupLimits cannot be set with a custom Queue, which cannot pass over the items of a group at its limit", func() {
			NewTypedWithConfig(TypedQueueConfig[string]{GroupLimits: limits, Queue: DefaultQueue[string]()})
		}},
		{"delaying queue with a Queue", "workqueue: NewTypedDelayingQueueWithConfig: GroupLimits with a Queue; set it in the Queue's own config", func() {
			NewTypedDelayingQueueWithConfig(TypedDelayingQueueConfig[string]{GroupLimits: limits, Queue: NewTyped[string]()})
		}},
		{"rate-limiting queue with a DelayingQueue", "workqueue: NewTypedRateLimitingQueueWithConfig: GroupLimits with a DelayingQueue; set it in the DelayingQueue's own config", func() {
			delaying := NewTypedDelayingQueue[string]()
			defer delaying.ShutDown()
			NewTypedRateLimitingQueueWithConfig(DefaultTypedControllerRateLimiter[string](), TypedRateLimitingQueueConfig[string]{GroupLimits: limits, DelayingQueue: delaying})
		}},
		{"priority queue with a nil Group", "workqueue: NewTypedPriorityQueue: GroupLimits.Group is nil", func() {
			NewTypedPriorityQueue(DefaultTypedControllerRateLimiter[string](), TypedPriorityQueueConfig[string]{GroupLimits: &GroupLimits[string]{}})
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { assert.PanicsWithValue(t, tt.want, tt.make) })
	}
}

// TestGroupLimitsNoOps checks SetGroupLimit where it does nothing: on a
// queue without group limits, and for the empty group.
func TestGroupLimitsNoOps(t *testing.T) {
	q := NewTyped[string]()
	defer q.ShutDown()
	q.SetGroupLimit("a", 1)
	q.Add("a/1")
	q.Add("a/2")
	for range 2 {
		_, err := q.GetContext(t.Context())
		require.NoError(t, err)
	}
	limited := NewTypedWithConfig(TypedQueueConfig[string]{GroupLimits: &GroupLimits[string]{Group: tenantOf}})
	defer limited.ShutDown()
	limited.SetGroupLimit("", 1)
	limited.Add("1")
	limited.Add("2")
	for range 2 {
		_, err := limited.GetContext(t.Context())
		require.NoError(t, err)
	}
	assert.Equal(t, []GroupState{{Group: "", InFlight: 2}}, limited.Snapshot(1).Groups)
}

// TestGroupLimitsStress runs producers and workers on real time on each
// queue kind with group limits, and checks, with a counter per group, that
// no group ever has more items in flight than its limit, and that every
// added item is processed after its last add.
func TestGroupLimitsStress(t *testing.T) {
	const (
		groups, keysPerGroup = 6, 20
		producers, addsEach  = 4, 2000
		workers              = 8
	)
	limitOf := func(g int) int { return 1 + g%3 } // 1, 2, 3, ...
	limits := GroupLimits[string]{Group: tenantOf, Limits: map[string]int{}}
	for g := range groups {
		limits.Limits[fmt.Sprint("g", g)] = limitOf(g)
	}
	for _, q := range groupQueues {
		t.Run(q.name, func(t *testing.T) {
			queue := q.make(limits)
			var inFlight, most [groups]atomic.Int64
			var added, processed sync.Map // item -> add count, then the count seen at Get
			var producing sync.WaitGroup
			for p := range producers {
				producing.Go(func() {
					for i := range addsEach {
						g := (p + i) % groups
						item := fmt.Sprintf("g%d/%d", g, (i*7+p)%keysPerGroup)
						n, _ := added.LoadOrStore(item, new(atomic.Int64))
						n.(*atomic.Int64).Add(1)
						queue.Add(item)
						if i%64 == 0 {
							runtime.Gosched()
						}
					}
				})
			}
			var working sync.WaitGroup
			for range workers {
				working.Go(func() {
					for {
						item, err := queue.GetContext(context.Background())
						if err != nil {
							return
						}
						var g int
						fmt.Sscanf(item, "g%d/", &g)
						n := inFlight[g].Add(1)
						for m := most[g].Load(); n > m && !most[g].CompareAndSwap(m, n); m = most[g].Load() {
						}
						if adds, ok := added.Load(item); ok {
							processed.Store(item, adds.(*atomic.Int64).Load())
						}
						runtime.Gosched()
						inFlight[g].Add(-1)
						queue.Done(item)
					}
				})
			}
			producing.Wait()
			queue.ShutDownWithDrain()
			working.Wait()
			for g := range groups {
				assert.LessOrEqualf(t, most[g].Load(), int64(limitOf(g)), "group g%d: most in flight at once", g)
			}
			added.Range(func(item, adds any) bool {
				seen, ok := processed.Load(item)
				assert.Truef(t, ok && seen.(int64) == adds.(*atomic.Int64).Load(), "item %v: processed after its last add", item)
				return true
			})
		})
	}
}

// TestGroupLimitsGetWaitsThroughShutdown checks a Get that waits for a
// slot when a shutdown begins: it keeps waiting while the group's item is
// queued, takes it at the Done that frees the slot, and a Get that then
// finds the queue empty returns ErrShutDown.
func TestGroupLimitsGetWaitsThroughShutdown(t *testing.T) {
	for _, q := range groupQueues {
		t.Run(q.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				queue := q.make(GroupLimits[string]{Group: tenantOf, Default: 1})
				queue.Add("a/1")
				queue.Add("a/2")
				first, err := queue.GetContext(t.Context())
				require.NoError(t, err)
				got := make(chan string, 2)
				go func() {
					item, err := queue.GetContext(t.Context())
					if err != nil {
						item = err.Error()
					}
					got <- item
				}()
				go queue.ShutDown()
				synctest.Wait()
				assert.Empty(t, got, "a Get returned while an item waits for a slot")
				queue.Done(first)
				synctest.Wait()
				assert.Equal(t, "a/2", <-got)
				go func() {
					_, err := queue.GetContext(t.Context())
					got <- err.Error()
				}()
				synctest.Wait()
				assert.Equal(t, ErrShutDown.Error(), <-got)
				queue.Done("a/2")
				synctest.Wait()
			})
		})
	}
}

// TestGroupLimitsAfterABurst drains a burst of more items than a chunk of
// the queue's arrays, one group each, so that the queue lets go of the
// burst's memory, and checks that it keeps no group afterwards.
func TestGroupLimitsAfterABurst(t *testing.T) {
	for _, q := range groupQueues {
		t.Run(q.name, func(t *testing.T) {
			queue := q.make(GroupLimits[string]{Group: tenantOf, Default: 1})
			defer queue.ShutDown()
			for round := range 3 {
				for i := range 3000 {
					queue.Add(fmt.Sprintf("g%d/%d", i, round))
				}
				for queue.Len() > 0 {
					item, err := queue.GetContext(t.Context())
					require.NoError(t, err)
					queue.Done(item)
				}
				assert.Zero(t, queue.Snapshot(0).GroupCount)
				require.NoError(t, verifyGroupQueue(queue))
			}
		})
	}
}

// verifyGroupQueue runs the invariant checker of q's core.
func verifyGroupQueue(q groupQueue) error {
	switch q := q.(type) {
	case *Typed[string]:
		return verifyQueue(q)
	case *TypedRateLimitingQueue[string]:
		return verifyQueue(q.delaying.(*TypedDelayingQueue[string]).queue.(*Typed[string]))
	case *TypedPriorityQueue[string]:
		return verifyPriorityQueue(q)
	}
	return fmt.Errorf("no checker for %T", q)
}

// TestGroupLimitsSnapshotListsTheFirstGroups checks that Snapshot(n) counts
// every group holding items and lists the first n: those with items
// waiting for a slot, then by name.
func TestGroupLimitsSnapshotListsTheFirstGroups(t *testing.T) {
	q := NewTypedWithConfig(TypedQueueConfig[string]{GroupLimits: &GroupLimits[string]{Group: tenantOf, Default: 1}})
	defer q.ShutDown()
	for _, g := range []string{"e", "d", "c", "b", "a"} {
		q.Add(g + "/1")
	}
	q.Add("d/2")
	q.Add("b/2") // d and b have an item waiting for a slot
	tests := []struct {
		n    int
		want []string
	}{
		{0, nil},
		{1, []string{"b"}},
		{3, []string{"b", "d", "a"}},
		{10, []string{"b", "d", "a", "c", "e"}},
	}
	for _, tt := range tests {
		s := q.Snapshot(tt.n)
		var got []string
		for _, g := range s.Groups {
			got = append(got, g.Group)
		}
		assert.Equal(t, tt.want, got, "Snapshot(%d)", tt.n)
		assert.Equal(t, 5, s.GroupCount)
	}
}

// verifyGroups checks a core's group limits: every queued or in-flight
// item has its group, whose counts match the records, and no other group
// is kept; the items waiting for a slot and the groups at their limit are
// counted right; a group's lists hold its queued items.
func verifyGroups[T comparable](c *core[T], queued map[int32]bool) error {
	if c.groups == nil {
		if c.slotWaits != 0 {
			return fmt.Errorf("%d items wait for a slot without group limits", c.slotWaits)
		}
		return nil
	}
	type counts struct{ inFlight, queued, held int }
	want := map[*group]*counts{}
	for id := range c.items.IDLimit() {
		var g *group
		if int(id) < c.groups.byID.Len() {
			g = *c.groups.byID.At(int(id))
		}
		if !c.items.IsLive(id) {
			if g != nil {
				return fmt.Errorf("id %d: not held, yet in group %q", id, g.name)
			}
			continue
		}
		e := c.items.At(id)
		if g == nil {
			if e.Val.processing || queued[id] {
				return fmt.Errorf("item %v: queued or in flight without a group", e.Item)
			}
			continue
		}
		if name := c.groups.groupOf(e.Item); name != g.name {
			return fmt.Errorf("item %v: in group %q, its group is %q", e.Item, g.name, name)
		}
		if want[g] == nil {
			want[g] = &counts{}
		}
		want[g].held++
		if e.Val.processing {
			want[g].inFlight++
		}
		if queued[id] {
			want[g].queued++
		}
	}
	if len(want) != len(c.groups.byName) {
		return fmt.Errorf("%d groups hold items, %d are kept", len(want), len(c.groups.byName))
	}
	waiting, atLimit := 0, 0
	for name, g := range c.groups.byName {
		w := want[g]
		if w == nil || g.name != name {
			return fmt.Errorf("group %q: kept without items, or under another name", name)
		}
		if *w != (counts{g.inFlight, g.queued, g.held}) {
			return fmt.Errorf("group %q: %+v, counted %d in flight, %d queued, %d held", name, *w, g.inFlight, g.queued, g.held)
		}
		if g.limit != c.groups.limitOf(name) {
			return fmt.Errorf("group %q: limit %d, set %d", name, g.limit, c.groups.limitOf(name))
		}
		waiting += g.waiting()
		if g.waiting() > 0 {
			atLimit++
		}
		if g.Open() != g.open() {
			return fmt.Errorf("group %q: open %v in the lists, %v by its slots", name, g.Open(), g.open())
		}
	}
	if waiting != c.slotWaits || atLimit != c.groups.atLimit {
		return fmt.Errorf("%d items wait for a slot in %d groups, counted %d in %d", waiting, atLimit, c.slotWaits, c.groups.atLimit)
	}
	return nil
}

// verifyGroupedList checks a grouped list and returns the ids it lists.
func verifyGroupedList(l *grouped.List, name string) (map[int32]bool, error) {
	listed, err := grouped.Verify(l)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return listed, nil
}
