package workqueue

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"
)

// The group-limit model walks: a queue with group limits and a plain model
// of it (groupModel, on the sequential queues fifoSpec and prioSpec) take the
// same operations, one at a time, in a synctest bubble, so that after
// each one every goroutine has run as far as it can. Each Get
// runs in a goroutine of its own: one that cannot take an item stays
// asleep, and the model says which item each sleeper must have taken after
// every later step. A Get asleep while an item of a group with a free slot
// is queued (a lost wakeup, or a group that holds back the others), an item
// handed out beyond its group's limit, or one handed out out of order, is a
// divergence.

// groupModelItems are the walks' items: 0 to 2 in group g0, 3 to 5 in g1, 6
// in g2, 7 in no group; two fairness dimensions cut across the groups, so
// that a full group holds back items of several fairness keys.
const groupModelItems = 8

func groupModelGroup(item int) string {
	if item == 7 {
		return ""
	}
	return fmt.Sprint("g", item/3)
}

// groupModelFairnessKey is the key of item in fairness dimension d, and
// groupModelFairness the same as the queue's fairness function returns it.
func groupModelFairnessKey(d, item int) int { return item % (2 + d) }

func groupModelFairness(d, item int) string { return fmt.Sprint(groupModelFairnessKey(d, item)) }

// groupModelLimits are the limits a walk starts with; SetGroupLimit changes
// them.
var groupModelLimits = GroupLimits[string]{
	Group:   func(item string) string { return groupModelGroup(modelItem(item)) },
	Default: 1,
	Limits:  map[string]int{"g1": 2},
}

func modelItem(name string) int {
	var i int
	fmt.Sscan(name, &i)
	return i
}

type groupOpKind uint8

const (
	groupOpAdd groupOpKind = iota
	groupOpGet
	groupOpDone
	groupOpRemove
	groupOpSetLimit
	groupOpCancel // cancels the context of the oldest sleeping Get
	groupOpTick   // advances the clock by a second
	groupOpShutDown
	groupOpKinds
)

var groupOpNames = [...]string{"Add", "Get", "Done", "Remove", "SetGroupLimit", "Cancel", "Tick", "ShutDown"}

type groupModelOp struct {
	kind     groupOpKind
	item     int // for Done, the index among the items in flight
	priority int // for SetGroupLimit, the limit
}

func (o groupModelOp) String() string {
	switch o.kind {
	case groupOpAdd:
		return fmt.Sprintf("Add(%d, priority %d)", o.item, o.priority)
	case groupOpSetLimit:
		return fmt.Sprintf("SetGroupLimit(%s, %d)", groupModelGroup(o.item), o.priority)
	case groupOpGet, groupOpCancel, groupOpTick, groupOpShutDown:
		return groupOpNames[o.kind]
	}
	return fmt.Sprintf("%s(%d)", groupOpNames[o.kind], o.item)
}

// groupModel is the obvious queue with group limits: the sequential
// queue that the other walks and the linearizability histories check
// against too, with the group limits of queueSpec (core_test.go): for
// the FIFO queues fifoSpec, which hands out the first key whose group
// has a free slot; for the priority queue prioSpec
// (priority_queue_model_test.go: the queued keys, searched in full for
// every Get, the rotations of the fairness keys with something to hand
// out, per priority and node), with MaxWait on the walks' clock.
type groupModel struct {
	priorities bool
	maxWait    time.Duration
	fifo       fifoSpec          // without priorities
	prio       prioSpec          // with priorities
	readyAt    [specKeys]pqReady // of each queued item; a raise keeps it
	seq        uint64
	now        time.Duration
}

// groupModelGroupIndex is the index of item's group, -1 for none.
func groupModelGroupIndex(item int) int {
	if item == 7 {
		return -1
	}
	return item / 3
}

func newGroupModel(config groupModelConfig) *groupModel {
	var groups queueSpec
	for item := range groupModelItems {
		if g := groupModelGroupIndex(item); g >= 0 {
			groups.groupKeys[g] |= 1 << item
		}
	}
	for g := range specGroups {
		groups.limits[g] = int8(groupModelLimits.Default)
		if l, ok := groupModelLimits.Limits[fmt.Sprint("g", g)]; ok {
			groups.limits[g] = int8(l)
		}
	}
	m := &groupModel{priorities: config.priorities, maxWait: config.maxWait, fifo: fifoSpec{queueSpec: groups}}
	if config.priorities {
		m.prio = newPrioSpec(config.dims, func(d int, key int8) int8 { return int8(groupModelFairnessKey(d, int(key))) })
		for d := range config.dims {
			for k := range prioFanout {
				if config.weighted {
					m.prio.weight[d][k] = int8(groupModelWeight(d, fmt.Sprint(k)))
				}
			}
		}
		m.prio.groupKeys, m.prio.limits = groups.groupKeys, groups.limits
	}
	return m
}

// groupModelWeight is the weight of a key of fairness dimension d in the
// weighted walks: keys 1 and 3 weigh two, the others one.
func groupModelWeight(d int, key string) int {
	if key == "1" || key == "3" {
		return 2
	}
	return 1
}

// spec returns what the model's queue keeps apart from its order.
func (m *groupModel) spec() *queueSpec {
	if m.priorities {
		return &m.prio.queueSpec
	}
	return &m.fifo.queueSpec
}

// queued returns the number of queued items.
func (m *groupModel) queued() int {
	if m.priorities {
		return int(m.prio.queued)
	}
	return int(m.fifo.queued)
}

// queuedKeys returns the queued keys.
func (m *groupModel) queuedKeys() []int8 {
	if m.priorities {
		return m.prio.queuedKeys()
	}
	return slices.Clone(m.fifo.fifo[:m.fifo.queued])
}

func (m *groupModel) isQueued(item int) bool { return slices.Contains(m.queuedKeys(), int8(item)) }

func (m *groupModel) add(item, priority int) {
	was := m.isQueued(item)
	if m.priorities {
		m.prio = m.prio.add(int8(item), int8(priority))
	} else {
		m.fifo = m.fifo.add(int8(item))
	}
	if !was && m.isQueued(item) {
		m.seq++
		m.readyAt[item] = pqReady{since: m.now, seq: m.seq}
	}
}

// pick returns the key Get hands out, -1 for none: for the FIFO queues,
// fifoSpec's next; for the priority queue, with MaxWait, the one ready
// longest of those Get may hand out if it has waited that long, out of
// turn; otherwise prioSpec's next, which turns the rotations for it.
func (m *groupModel) pick() int8 {
	if !m.priorities {
		if i := m.fifo.next(); i >= 0 {
			return m.fifo.fifo[i]
		}
		return -1
	}
	best := int8(-1)
	for _, k := range m.prio.queuedKeys() {
		if m.prio.eligible(k) && (best < 0 || m.readyAt[k].seq < m.readyAt[best].seq) {
			best = k
		}
	}
	if best < 0 || m.maxWait > 0 && m.now-m.readyAt[best].since >= m.maxWait {
		return best
	}
	best, m.prio = m.prio.next()
	return best
}

// first returns the items Get would hand out if called again and again now
// with no slot filling up: what Snapshot lists, at most n.
func (m *groupModel) first(n int) []string {
	c := *m
	var out []string
	for len(out) < n {
		key := c.pick()
		if key < 0 {
			break
		}
		out = append(out, fmt.Sprint(key))
		if c.priorities {
			c.prio = c.prio.dequeue(key)
		} else {
			c.fifo = c.fifo.drop(slices.Index(c.fifo.fifo[:c.fifo.queued], key))
		}
	}
	return out
}

// get hands out the next item, -1 for none.
func (m *groupModel) get() int {
	if !m.priorities {
		key, fifo := m.fifo.get()
		m.fifo = fifo
		return int(key)
	}
	key := m.pick()
	if key >= 0 {
		m.prio = m.prio.takeOut(key)
	}
	return int(key)
}

func (m *groupModel) done(item int) {
	was := m.isQueued(item)
	if m.priorities {
		_, m.prio = m.prio.done(int8(item))
	} else {
		_, m.fifo = m.fifo.done(int8(item))
	}
	if !was && m.isQueued(item) {
		m.seq++
		m.readyAt[item] = pqReady{since: m.now, seq: m.seq}
	}
}

func (m *groupModel) remove(item int) (removed bool) {
	if m.priorities {
		removed, m.prio = m.prio.remove(int8(item))
	} else {
		removed, m.fifo = m.fifo.remove(int8(item))
	}
	return removed
}

func (m *groupModel) setLimit(group string, limit int) {
	if group != "" {
		var g int
		fmt.Sscanf(group, "g%d", &g)
		m.spec().limits[g] = int8(limit)
		if m.priorities {
			m.prio = m.prio.reconcile()
		}
	}
}

// waiting returns how many queued items wait for a slot.
func (m *groupModel) waiting() int {
	spec, n := m.spec(), 0
	for g, keys := range spec.groupKeys {
		if l := int(spec.limits[g]); l > 0 {
			queued := 0
			for _, k := range m.queuedKeys() {
				if keys&(1<<k) != 0 {
					queued++
				}
			}
			n += max(0, queued-max(0, l-spec.inFlight(g)))
		}
	}
	return n
}

// groupSubject is a queue with group limits under a walk.
type groupSubject interface {
	add(item string, priority int)
	GetContext(ctx context.Context) (string, error)
	Done(item string)
	Remove(item string) bool
	SetGroupLimit(group string, limit int)
	Len() int
	ShutDown()
	Snapshot(n int) Snapshot[string]
	verify() error
}

type groupTyped struct{ *Typed[string] }

func (q groupTyped) add(item string, _ int) { q.Add(item) }
func (q groupTyped) verify() error          { return verifyQueue(q.Typed) }

type groupRateLimiting struct {
	*TypedRateLimitingQueue[string]
	typed *Typed[string]
}

func (q groupRateLimiting) add(item string, _ int) { q.Add(item) }
func (q groupRateLimiting) verify() error          { return verifyQueue(q.typed) }

type groupPriority struct{ *TypedPriorityQueue[string] }

func (q groupPriority) add(item string, priority int) {
	q.AddWithOpts(AddOpts{Priority: &priority}, item)
}
func (q groupPriority) verify() error { return verifyPriorityQueue(q.TypedPriorityQueue) }

// groupModelConfig is a queue under the walks, with its model.
type groupModelConfig struct {
	name       string
	priorities bool
	dims       int
	weighted   bool
	maxWait    time.Duration
	build      func(clock *clocktesting.FakeClock) groupSubject
}

var groupModelConfigs = []groupModelConfig{
	{name: "queue", build: func(clock *clocktesting.FakeClock) groupSubject {
		return groupTyped{NewTypedWithConfig(TypedQueueConfig[string]{Clock: clock, GroupLimits: &groupModelLimits})}
	}},
	{name: "rate limiting", build: func(clock *clocktesting.FakeClock) groupSubject {
		typed := NewTypedWithConfig(TypedQueueConfig[string]{Clock: clock, GroupLimits: &groupModelLimits})
		delaying := NewTypedDelayingQueueWithConfig(TypedDelayingQueueConfig[string]{Clock: clock, Queue: typed})
		return groupRateLimiting{NewTypedRateLimitingQueueWithConfig(DefaultTypedControllerRateLimiter[string](), TypedRateLimitingQueueConfig[string]{Clock: clock, DelayingQueue: delaying}), typed}
	}},
	{name: "priority", priorities: true, build: priorityGroupSubject(0, false, 0)},
	{name: "priority/fairness", priorities: true, dims: 1, build: priorityGroupSubject(1, false, 0)},
	{name: "priority/nested fairness and MaxWait", priorities: true, dims: 2, maxWait: 3 * time.Second, build: priorityGroupSubject(2, false, 3*time.Second)},
	{name: "priority/weighted nested fairness", priorities: true, dims: 2, weighted: true, build: priorityGroupSubject(2, true, 0)},
	{name: "priority/weighted fairness and MaxWait", priorities: true, dims: 1, weighted: true, maxWait: 3 * time.Second, build: priorityGroupSubject(1, true, 3*time.Second)},
}

func priorityGroupSubject(dims int, weighted bool, maxWait time.Duration) func(*clocktesting.FakeClock) groupSubject {
	return func(clock *clocktesting.FakeClock) groupSubject {
		config := TypedPriorityQueueConfig[string]{Clock: clock, GroupLimits: &groupModelLimits, MaxWait: maxWait}
		for d := range dims {
			config.Fairness = append(config.Fairness, func(item string) string { return groupModelFairness(d, modelItem(item)) })
			if weighted {
				config.FairnessWeights = append(config.FairnessWeights, func(key string) int { return groupModelWeight(d, key) })
			}
		}
		return groupPriority{NewTypedPriorityQueue(DefaultTypedControllerRateLimiter[string](), config)}
	}
}

// groupSleeper is a Get running in a goroutine of its own.
type groupSleeper struct {
	cancel context.CancelFunc
	result chan groupGetResult
}

type groupGetResult struct {
	item string
	err  error
}

// runGroupModelWalk applies ops to a queue and the model, in a synctest
// bubble, and returns how many it applied and the first divergence.
func runGroupModelWalk(config groupModelConfig, ops []groupModelOp) (executed int, divergence string) {
	clock := clocktesting.NewFakeClock(time.Unix(0, 0))
	q := config.build(clock)
	m := newGroupModel(config)
	var sleepers []groupSleeper
	defer func() {
		for _, s := range sleepers {
			s.cancel()
		}
		q.ShutDown()
		synctest.Wait()
	}()
	name := func(item int) string { return fmt.Sprint(item) }
	var history []string
	fail := func(format string, args ...any) (int, string) {
		return executed, fmt.Sprintf("after %d operations, the last %s: %s", len(history), strings.Join(history[max(0, len(history)-30):], ", "), fmt.Sprintf(format, args...))
	}
	for _, op := range ops {
		history = append(history, op.String())
		switch op.kind {
		case groupOpAdd:
			q.add(name(op.item), op.priority)
			m.add(op.item, op.priority)
		case groupOpGet:
			ctx, cancel := context.WithCancel(context.Background())
			s := groupSleeper{cancel: cancel, result: make(chan groupGetResult, 1)}
			go func() {
				item, err := q.GetContext(ctx)
				s.result <- groupGetResult{item, err}
			}()
			sleepers = append(sleepers, s)
		case groupOpDone:
			processing := m.spec().processingKeys()
			if len(processing) == 0 {
				continue
			}
			item := processing[op.item%len(processing)]
			q.Done(name(item))
			m.done(item)
		case groupOpRemove:
			if got, want := q.Remove(name(op.item)), m.remove(op.item); got != want {
				return fail("Remove returned %v, want %v", got, want)
			}
		case groupOpSetLimit:
			q.SetGroupLimit(groupModelGroup(op.item), op.priority)
			m.setLimit(groupModelGroup(op.item), op.priority)
		case groupOpCancel:
			if len(sleepers) == 0 {
				continue
			}
			sleepers[0].cancel()
			synctest.Wait()
			select {
			case r := <-sleepers[0].result:
				if r.err == nil { // it had taken an item before the cancel
					return fail("a sleeping Get returned %q the model did not hand out", r.item)
				}
			default:
				return fail("a cancelled Get did not return")
			}
			sleepers = sleepers[1:]
		case groupOpTick:
			clock.Step(time.Second)
			m.now += time.Second
		case groupOpShutDown:
			q.ShutDown()
			m.spec().shutDown(true)
		}
		synctest.Wait()
		executed++
		// Hand out to the sleepers what the model says they take; with
		// several woken at once, any of them may take any of the items.
		var want []string
		for range sleepers {
			item := m.get()
			if item < 0 {
				break
			}
			want = append(want, name(item))
		}
		var got []string
		shutdowns := 0
		for i := 0; i < len(sleepers); i++ {
			select {
			case r := <-sleepers[i].result:
				if r.err != nil {
					if !m.spec().shutdown || m.queued() > 0 {
						return fail("a Get returned %v with %d queued", r.err, m.queued())
					}
					shutdowns++
				} else {
					got = append(got, r.item)
				}
				sleepers[i].cancel()
				sleepers = slices.Delete(sleepers, i, i+1)
				i--
			default:
			}
		}
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			return fail("the Gets took %v, the model hands out %v (in flight %v, queued %v)", got, want, m.spec().processingKeys(), m.queuedKeys())
		}
		if m.spec().shutdown && m.queued() == 0 && len(sleepers) > 0 {
			return fail("%d Gets asleep after a shutdown with nothing queued", len(sleepers))
		}
		if err := q.verify(); err != nil {
			return fail("invariant: %v", err)
		}
		if got, want := q.Len(), m.queued(); got != want {
			return fail("Len %d, want %d", got, want)
		}
		s := q.Snapshot(5)
		if got, want := s.WaitingForSlot, m.waiting(); got != want {
			return fail("Snapshot.WaitingForSlot %d, want %d", got, want)
		}
		if want := m.first(5); !slices.Equal(s.Queued, want) {
			return fail("Snapshot.Queued %v, want %v", s.Queued, want)
		}
	}
	return executed, ""
}

// randomGroupOps returns n operations drawn from r, with shutdowns rare.
func randomGroupOps(r *rand.Rand, n int) []groupModelOp {
	weights := [groupOpKinds]int{groupOpAdd: 30, groupOpGet: 15, groupOpDone: 20, groupOpRemove: 5, groupOpSetLimit: 4, groupOpCancel: 2, groupOpTick: 3, groupOpShutDown: 0}
	total := 0
	for _, w := range weights {
		total += w
	}
	ops := make([]groupModelOp, n)
	for i := range ops {
		x := r.IntN(total)
		kind := groupOpKind(0)
		for ; x >= weights[kind]; kind++ {
			x -= weights[kind]
		}
		if r.IntN(300) == 0 {
			kind = groupOpShutDown
		}
		ops[i] = groupModelOp{kind: kind, item: r.IntN(groupModelItems), priority: r.IntN(4) - 1}
	}
	return ops
}

func TestGroupLimitsModelWalks(t *testing.T) {
	walks, steps := sized(60, 20, 10), 300
	for _, config := range groupModelConfigs {
		t.Run(config.name, func(t *testing.T) {
			total := 0
			for seed := range uint64(walks) {
				ops := randomGroupOps(rand.New(rand.NewPCG(seed, 36)), steps)
				synctest.Test(t, func(t *testing.T) {
					executed, divergence := runGroupModelWalk(config, ops)
					total += executed
					require.Emptyf(t, divergence, "seed %d", seed)
				})
			}
			t.Logf("%d operations checked", total)
		})
	}
}

// FuzzGroupLimitsModel decodes each input as a configuration and
// operations, two bytes each, and runs them against the model.
func FuzzGroupLimitsModel(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0, 1, 1, 0, 1, 0, 2, 0})
	f.Add([]byte{3, 0, 2, 0, 3, 1, 0, 1, 0, 4, 12, 1, 0, 2, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		config := groupModelConfigs[int(data[0])%len(groupModelConfigs)]
		var ops []groupModelOp
		for b := data[1:]; len(b) >= 2; b = b[2:] {
			ops = append(ops, groupModelOp{kind: groupOpKind(b[0] % byte(groupOpKinds)), item: int(b[1]) % groupModelItems, priority: int(b[1]/groupModelItems)%4 - 1})
		}
		synctest.Test(t, func(t *testing.T) {
			if _, divergence := runGroupModelWalk(config, ops); divergence != "" {
				t.Fatal(divergence)
			}
		})
	})
}
