package workqueue

import (
	"context"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"
)

// groupRefQueue is a FIFO queue with group limits written to be obviously
// right: one mutex, one condition variable, a slice searched in full. With
// a bug set it is wrong on purpose, to show that the group-limit model
// walks and the linearizability histories catch each kind of bug. It keeps
// its own group rule rather than the spec's (queueSpec.eligible): it is
// the checkers' control, so a wrong rule in the spec shows as the
// reference diverging, which a shared rule would hide, and its bugs are
// changes to that rule.
type groupRefQueue struct {
	mu         sync.Mutex
	changed    *sync.Cond
	limits     GroupLimits[string]
	fifo       []string
	processing map[string]bool
	dirty      map[string]bool
	shutdown   bool
	bug        groupBug
}

type groupBug uint8

const (
	groupNoBug groupBug = iota
	// groupBugOffByOne lets one item more than the limit be in flight.
	groupBugOffByOne
	// groupBugNoWake frees a slot at Done without waking a sleeping Get.
	groupBugNoWake
	// groupBugHeadOfLine hands out only the first queued item: an item
	// of a full group holds back the items of every other group.
	groupBugHeadOfLine
)

func newGroupRefQueue(limits GroupLimits[string], bug groupBug) *groupRefQueue {
	limits.Limits = maps.Clone(limits.Limits)
	if limits.Limits == nil {
		limits.Limits = map[string]int{}
	}
	q := &groupRefQueue{limits: limits, processing: map[string]bool{}, dirty: map[string]bool{}, bug: bug}
	q.changed = sync.NewCond(&q.mu)
	return q
}

func (q *groupRefQueue) limit(group string) int {
	if group == "" {
		return 0
	}
	if l, ok := q.limits.Limits[group]; ok {
		return max(l, 0)
	}
	return q.limits.Default
}

func (q *groupRefQueue) inFlight(group string) int {
	n := 0
	for item := range q.processing {
		if q.limits.Group(item) == group {
			n++
		}
	}
	return n
}

func (q *groupRefQueue) eligible(item string) bool {
	g := q.limits.Group(item)
	l := q.limit(g)
	if q.bug == groupBugOffByOne && l > 0 {
		l++
	}
	return l == 0 || q.inFlight(g) < l
}

func (q *groupRefQueue) Add(item string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	switch {
	case q.shutdown || slices.Contains(q.fifo, item):
	case q.processing[item]:
		q.dirty[item] = true
	default:
		q.fifo = append(q.fifo, item)
		q.changed.Broadcast()
	}
}

func (q *groupRefQueue) add(item string, _ int) { q.Add(item) }

func (q *groupRefQueue) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.fifo)
}

func (q *groupRefQueue) Get() (string, bool) {
	item, err := q.GetContext(context.Background())
	return item, err != nil
}

// next returns the index of the item to hand out, -1 for none.
func (q *groupRefQueue) next() int {
	if q.bug == groupBugHeadOfLine {
		if len(q.fifo) > 0 && q.eligible(q.fifo[0]) {
			return 0
		}
		return -1
	}
	return slices.IndexFunc(q.fifo, q.eligible)
}

func (q *groupRefQueue) GetContext(ctx context.Context) (string, error) {
	stop := context.AfterFunc(ctx, func() {
		q.mu.Lock()
		defer q.mu.Unlock()
		q.changed.Broadcast()
	})
	defer stop()
	q.mu.Lock()
	defer q.mu.Unlock()
	for {
		if err := ctx.Err(); err != nil {
			return "", err
		}
		if i := q.next(); i >= 0 {
			item := q.fifo[i]
			q.fifo = slices.Delete(q.fifo, i, i+1)
			q.processing[item] = true
			return item, nil
		}
		if q.shutdown && len(q.fifo) == 0 {
			return "", ErrShutDown
		}
		q.changed.Wait()
	}
}

func (q *groupRefQueue) Done(item string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.processing[item] {
		return
	}
	delete(q.processing, item)
	if q.dirty[item] {
		delete(q.dirty, item)
		q.fifo = append(q.fifo, item)
	}
	if q.bug != groupBugNoWake {
		q.changed.Broadcast()
	}
}

func (q *groupRefQueue) Remove(item string) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	removed := q.dirty[item]
	delete(q.dirty, item)
	if i := slices.Index(q.fifo, item); i >= 0 {
		q.fifo = slices.Delete(q.fifo, i, i+1)
		removed = true
		q.changed.Broadcast() // a shutdown may have emptied the queue
	}
	return removed
}

func (q *groupRefQueue) SetGroupLimit(group string, limit int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if group != "" {
		q.limits.Limits[group] = limit
		q.changed.Broadcast()
	}
}

func (q *groupRefQueue) ShutDown() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.shutdown = true
	q.changed.Broadcast()
}

func (q *groupRefQueue) ShutDownWithDrain() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.shutdown = true
	q.changed.Broadcast()
	for len(q.fifo) > 0 || len(q.processing) > 0 {
		q.changed.Wait()
	}
}

func (q *groupRefQueue) ShuttingDown() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.shutdown
}

func (q *groupRefQueue) Snapshot(n int) Snapshot[string] {
	q.mu.Lock()
	defer q.mu.Unlock()
	queued := map[string]int{}
	var first []string
	for _, item := range q.fifo {
		queued[q.limits.Group(item)]++
		if len(first) < n && q.eligible(item) {
			first = append(first, item)
		}
	}
	waiting := 0
	for g, n := range queued {
		if l := q.limit(g); l > 0 {
			waiting += max(0, n-max(0, l-q.inFlight(g)))
		}
	}
	return Snapshot[string]{Depth: len(q.fifo), Queued: first, WaitingForSlot: waiting}
}

func (q *groupRefQueue) verify() error { return nil }

// TestGroupLimitsCheckersCatchBrokenQueues shows that the checks of group
// limits find real bugs: the model walks and the linearizability histories
// accept the reference queue, and catch each broken one: the walks every
// kind of bug, among them the two no history can show, since a Get that
// waits too long gives no wrong answer; the histories the one that hands
// out too many.
func TestGroupLimitsCheckersCatchBrokenQueues(t *testing.T) {
	tests := []struct {
		name         string
		bug          groupBug
		historyBug   bool // whether the linearizability histories must catch it
		walksToCatch int
	}{
		{"reference", groupNoBug, false, 0},
		{"limit off by one", groupBugOffByOne, true, 20},
		{"freed slot wakes no sleeper", groupBugNoWake, false, 20},
		{"blocked group holds back the others", groupBugHeadOfLine, false, 20},
	}
	walk := groupModelConfig{name: "reference"}
	seed := linBaseSeed(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			walk.build = func(*clocktesting.FakeClock) groupSubject { return newGroupRefQueue(groupModelLimits, tt.bug) }
			walks := tt.walksToCatch
			if tt.bug == groupNoBug {
				walks = 30
			}
			caught := false
			for w := range uint64(walks) {
				ops := randomGroupOps(rand.New(rand.NewPCG(seed+w, 36)), 300)
				synctest.Test(t, func(t *testing.T) {
					if _, divergence := runGroupModelWalk(walk, ops); divergence != "" {
						require.NotEqualf(t, groupNoBug, tt.bug, "the reference diverged: %s", divergence)
						caught = true
					}
				})
				if caught {
					t.Logf("caught by walk %d", w+1)
					break
				}
			}
			assert.Equal(t, tt.bug != groupNoBug, caught, "caught by the model walks")
			if tt.bug != groupNoBug && !tt.historyBug {
				return // a Get of these could wait for good at the end of a history
			}
			histories := linCatchLimit
			if !tt.historyBug {
				histories = 100
			}
			rejected := 0
			for h := range histories {
				historySeed := seed + uint64(h)
				plan := randomLinPlan(rand.New(rand.NewPCG(historySeed, 0)), false, false, false, false, true)
				q := newGroupRefQueue(linGroupLimits, tt.bug)
				ops := runLinHistory(t, linSubject{q: q, ext: q, groups: q}, plan, historySeed)
				if !checkLinHistory(t, linGroupModel, ops) {
					rejected++
					if tt.historyBug {
						t.Logf("caught by history %d", h+1)
						break
					}
				}
			}
			assert.Equal(t, tt.historyBug, rejected > 0, "caught by the linearizability histories")
		})
	}
}
