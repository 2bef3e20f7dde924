package workqueue

import (
	"context"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The reference queues of the linearizability test: queues written to be
// obviously right, one mutex and one condition variable each, which with a
// bug set are wrong on purpose. The checker is trusted because it accepts
// the references and catches every bug.

// linRefQueue is a queue written to be obviously right: one mutex, one
// condition variable, the model's state in maps. With a bug set it is wrong
// on purpose, to show that the checker notices.
type linRefQueue struct {
	mu         sync.Mutex
	changed    *sync.Cond
	fifo       []string
	processing map[string]int // how many workers hold the item
	dirty      map[string]bool
	failures   map[string]int
	shutdown   bool
	released   bool
	bug        linBug
}

type linBug uint8

const (
	linNoBug linBug = iota
	// linBugDoubleHandout: an Add of a processing item queues it at once,
	// so a second worker can get it while the first holds it.
	linBugDoubleHandout
	// linBugLoseDirty: an Add of a processing item is lost, so Done does
	// not queue it again.
	linBugLoseDirty
)

var _ TypedRateLimitingInterface[string] = (*linRefQueue)(nil)

func newLinRefQueue(bug linBug) *linRefQueue {
	q := &linRefQueue{processing: map[string]int{}, dirty: map[string]bool{}, failures: map[string]int{}, bug: bug}
	q.changed = sync.NewCond(&q.mu)
	return q
}

func (q *linRefQueue) Add(item string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.addLocked(item)
}

func (q *linRefQueue) addLocked(item string) {
	switch {
	case q.shutdown, slices.Contains(q.fifo, item):
	case q.processing[item] > 0 && q.bug == linBugLoseDirty:
	case q.processing[item] > 0 && q.bug != linBugDoubleHandout:
		q.dirty[item] = true
	default:
		q.fifo = append(q.fifo, item)
		q.changed.Broadcast()
	}
}

// AddAfter supports the delays the histories use, zero or less, only.
func (q *linRefQueue) AddAfter(item string, d time.Duration) {
	if d > 0 {
		panic("linRefQueue: AddAfter with a positive delay")
	}
	q.Add(item)
}

func (q *linRefQueue) AddRateLimited(item string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.shutdown {
		q.failures[item]++
		q.addLocked(item)
	}
}

func (q *linRefQueue) Forget(item string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.failures, item)
}

func (q *linRefQueue) NumRequeues(item string) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.failures[item]
}

func (q *linRefQueue) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.fifo)
}

func (q *linRefQueue) Get() (string, bool) {
	item, err := q.GetContext(context.Background())
	return item, err != nil
}

func (q *linRefQueue) GetContext(ctx context.Context) (string, error) {
	stop := context.AfterFunc(ctx, func() {
		q.mu.Lock()
		defer q.mu.Unlock()
		q.changed.Broadcast()
	})
	defer stop()
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.fifo) == 0 && !q.shutdown {
		if err := ctx.Err(); err != nil {
			return "", err
		}
		q.changed.Wait()
	}
	if err := ctx.Err(); err != nil {
		return "", err
	}
	if len(q.fifo) == 0 {
		return "", ErrShutDown
	}
	item := q.fifo[0]
	q.fifo = q.fifo[1:]
	q.processing[item]++
	return item, nil
}

func (q *linRefQueue) Remove(item string) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.failures, item)
	removed := q.dirty[item]
	delete(q.dirty, item)
	if i := slices.Index(q.fifo, item); i >= 0 {
		q.fifo = slices.Delete(q.fifo, i, i+1)
		removed = true
	}
	if removed {
		q.changed.Broadcast()
	}
	return removed
}

func (q *linRefQueue) Done(item string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.processing[item] == 0 {
		return
	}
	if q.processing[item]--; q.processing[item] == 0 {
		delete(q.processing, item)
	}
	if q.dirty[item] {
		delete(q.dirty, item)
		q.fifo = append(q.fifo, item)
	}
	q.changed.Broadcast()
}

func (q *linRefQueue) ShutDown() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.shutdown, q.released = true, true
	q.changed.Broadcast()
}

func (q *linRefQueue) ShutDownWithDrain() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.shutdown = true
	q.changed.Broadcast()
	for !q.released && (len(q.fifo) > 0 || len(q.processing) > 0) {
		q.changed.Wait()
	}
}

func (q *linRefQueue) ShuttingDown() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.shutdown
}

// linRefPriorityQueue is a priority queue written to be obviously right:
// one mutex, one condition variable, and the model's state. With a bug set
// it is wrong on purpose, to show that the checker notices.
type linRefPriorityQueue struct {
	mu      sync.Mutex
	changed *sync.Cond
	s       prioSpec
	bug     linPrioBug
}

type linPrioBug uint8

const (
	linPrioNoBug linPrioBug = iota
	// linBugRaiseKeepsPlace: a queued item raised to a higher priority
	// keeps its place in the FIFO instead of going to the back of its new
	// level.
	linBugRaiseKeepsPlace
	// linBugRequeueAtZero: Done queues an item added while processed at
	// priority 0 instead of the priority asked for.
	linBugRequeueAtZero
	// linBugUnfair: Get ignores the fairness rotation and hands out the
	// first item of the level.
	linBugUnfair
)

var (
	_ TypedRateLimitingInterface[string] = (*linRefPriorityQueue)(nil)
	_ linPrioritized                     = (*linRefPriorityQueue)(nil)
)

func newLinRefPriorityQueue(fair bool, bug linPrioBug) *linRefPriorityQueue {
	q := &linRefPriorityQueue{s: newLinPrioSpec(fair), bug: bug}
	q.changed = sync.NewCond(&q.mu)
	return q
}

func (q *linRefPriorityQueue) do(f func()) {
	q.mu.Lock()
	defer q.mu.Unlock()
	f()
	q.changed.Broadcast()
}

func (q *linRefPriorityQueue) addLocked(key, priority int8) {
	s := q.s
	if q.bug == linBugRaiseKeepsPlace && !s.shutdown && s.processing&(1<<key) == 0 && s.isQueued(key) && priority > s.prio[key] {
		q.s.prio[key] = priority
		return
	}
	q.s = s.add(key, priority)
}

func (q *linRefPriorityQueue) Add(item string) {
	q.do(func() { q.addLocked(linKeyIndex(item), 0) })
}

func (q *linRefPriorityQueue) AddWithOpts(opts AddOpts, items ...string) {
	q.do(func() {
		for _, item := range items {
			q.addLocked(linKeyIndex(item), int8(*opts.Priority))
		}
	})
}

func (q *linRefPriorityQueue) AddAfter(item string, d time.Duration) { q.Add(item) }

func (q *linRefPriorityQueue) AddRateLimited(item string) {
	q.do(func() {
		if !q.s.shutdown {
			q.s.failures[linKeyIndex(item)]++
			q.addLocked(linKeyIndex(item), 0)
		}
	})
}

func (q *linRefPriorityQueue) Forget(item string) {
	q.do(func() { q.s.failures[linKeyIndex(item)] = 0 })
}

func (q *linRefPriorityQueue) NumRequeues(item string) (n int) {
	q.do(func() { n = int(q.s.failures[linKeyIndex(item)]) })
	return n
}

func (q *linRefPriorityQueue) Len() (n int) {
	q.do(func() { n = int(q.s.queued) })
	return n
}

func (q *linRefPriorityQueue) Get() (string, bool) {
	item, _, shutdown := q.GetWithPriority()
	return item, shutdown
}

func (q *linRefPriorityQueue) GetWithPriority() (string, int, bool) {
	item, priority, err := q.get(context.Background())
	return item, priority, err != nil
}

func (q *linRefPriorityQueue) GetContext(ctx context.Context) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	stop := context.AfterFunc(ctx, func() { q.do(func() {}) })
	defer stop()
	item, _, err := q.get(ctx)
	return item, err
}

func (q *linRefPriorityQueue) get(ctx context.Context) (string, int, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for q.s.queued == 0 {
		if q.s.shutdown {
			return "", 0, ErrShutDown
		}
		if err := ctx.Err(); err != nil {
			return "", 0, err
		}
		q.changed.Wait()
	}
	var key int8
	s := q.s
	if q.bug == linBugUnfair {
		plain := s
		plain.dims = 0
		key, _ = plain.next()
	} else {
		key, s = s.next()
	}
	priority := s.prio[key]
	s = s.dequeue(key)
	s.processing |= 1 << key
	q.s = s
	q.changed.Broadcast()
	return linKeyNames[key], int(priority), nil
}

func (q *linRefPriorityQueue) Remove(item string) (removed bool) {
	q.do(func() { removed, q.s = q.s.remove(linKeyIndex(item)) })
	return removed
}

func (q *linRefPriorityQueue) Done(item string) {
	q.do(func() {
		key := linKeyIndex(item)
		if q.bug == linBugRequeueAtZero && q.s.dirty&(1<<key) != 0 {
			q.s.prio[key] = 0
		}
		_, q.s = q.s.done(key)
	})
}

func (q *linRefPriorityQueue) ShutDown() {
	q.do(func() { q.s.shutdown, q.s.released = true, true })
}

func (q *linRefPriorityQueue) ShutDownWithDrain() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.s.shutdown = true
	q.changed.Broadcast()
	for !q.s.released && (q.s.queued > 0 || q.s.processing != 0) {
		q.changed.Wait()
	}
}

func (q *linRefPriorityQueue) ShuttingDown() (down bool) {
	q.do(func() { down = q.s.shutdown })
	return down
}

// TestLinearizabilityCheckerCatchesBrokenQueues shows that the harness finds
// real bugs: it runs histories on the reference queue, which must all pass,
// and on two broken ones, which must each be caught. A fixed script that
// any single worker could run catches both broken queues every time; the
// random histories must catch them too, within a bound that random scripts
// meet with overwhelming probability (each history gives every bug many
// chances).
func TestLinearizabilityCheckerCatchesBrokenQueues(t *testing.T) {
	// Add a, Get a, Add a (now dirty), Len, Done a (queued again), Len.
	scripted := linPlan{
		keys: 1,
		workers: [][]linInput{{
			{kind: linAdd, key: 0}, {kind: linGet, key: -1}, {kind: linAdd, key: 0},
			{kind: linLen, key: -1}, {kind: linDone, key: -1}, {kind: linLen, key: -1},
		}},
		shutters: []linShutter{{after: []linInput{{kind: linShutDown, key: -1}}}},
		trigger:  -1,
	}
	tests := []struct {
		name string
		bug  linBug
	}{
		{"reference", linNoBug},
		{"double handout", linBugDoubleHandout},
		{"lost dirty mark", linBugLoseDirty},
	}
	seed := linBaseSeed(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ops := runLinHistory(t, linSubject{q: newLinRefQueue(tt.bug)}, scripted, seed)
			assert.Equalf(t, tt.bug == linNoBug, checkLinHistory(t, linModel, ops), "scripted history:\n%s", formatLinHistory(ops))

			checkBrokenQueue(t, linModel, seed, tt.bug != linNoBug, false, func() linSubject {
				q := newLinRefQueue(tt.bug)
				return linSubject{q: q, rl: q, ext: q}
			})
		})
	}
}

// checkBrokenQueue runs random histories, with priorities or without, on
// the queues build makes. If broken, one of the first linCatchLimit must
// be rejected; otherwise every history of linHistoryCount must pass.
func checkBrokenQueue(t *testing.T, model porcupine.Model, seed uint64, broken, priorities bool, build func() linSubject) {
	t.Helper()
	histories := linCatchLimit
	if !broken {
		histories = linHistoryCount()
	}
	for h := range histories {
		historySeed := seed + uint64(h)
		plan := randomLinPlan(rand.New(rand.NewPCG(historySeed, 0)), true, priorities, false, false, false)
		ops := runLinHistory(t, build(), plan, historySeed)
		if !checkLinHistory(t, model, ops) {
			if !broken {
				require.Failf(t, "reference queue rejected", "history %d (view: %s):\n%s", h, visualizeLinHistory(t, model, ops, t.Name()), formatLinHistory(ops))
			}
			t.Logf("caught by random history %d", h+1)
			return
		}
	}
	if broken {
		require.Failf(t, "bug not caught", "no history of %d caught the bug", histories)
	}
}

// linCatchLimit bounds the random histories that must catch a broken
// queue. Most bugs are caught within a few dozen; the unfair priority
// queue's needs two keys of one tenant and one of the other queued at one
// level, and under -race took a median of 38 histories, 128 at the 90th
// percentile and more than 300 in one run of 40, so the bound leaves it a
// chance of about e^-25 to be missed.
const linCatchLimit = 2000

// TestLinearizabilityCheckerCatchesBrokenPriorityQueues shows that the
// priority histories can fail: they must accept a reference priority queue
// and catch three broken ones. A fixed sequential script of one worker
// catches each broken queue every time, and the random histories must
// catch it too, within linCatchLimit.
func TestLinearizabilityCheckerCatchesBrokenPriorityQueues(t *testing.T) {
	addAt := func(key, prio int8) linInput { return linInput{kind: linAddPriority, key: key, prio: prio} }
	get, done := linInput{kind: linGet, key: -1}, linInput{kind: linDone, key: -1}
	// Keys a and b are tenant 0, c tenant 1.
	unfair := []linInput{addAt(0, 0), addAt(1, 0), addAt(2, 0), get, get, done, done}  // fair: a, then c
	raise := []linInput{addAt(0, 0), addAt(1, 1), addAt(0, 1), get, done}              // a raised goes behind b
	requeue := []linInput{addAt(0, 0), get, addAt(0, 1), addAt(1, 0), done, get, done} // a queued again at 1, before b
	tests := []struct {
		name   string
		fair   bool
		bug    linPrioBug
		script []linInput // the script, run on the reference queue too
	}{
		{"reference", false, linPrioNoBug, raise},
		{"reference with fairness", true, linPrioNoBug, unfair},
		{"raise keeps its place", false, linBugRaiseKeepsPlace, raise},
		{"requeued at priority 0", false, linBugRequeueAtZero, requeue},
		{"fairness ignored", true, linBugUnfair, unfair},
	}
	seed := linBaseSeed(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			build := func() linSubject {
				q := newLinRefPriorityQueue(tt.fair, tt.bug)
				return linSubject{q: q, rl: q, ext: q, prio: q}
			}
			scripted := linPlan{
				keys:     linMaxKeys,
				workers:  [][]linInput{tt.script},
				shutters: []linShutter{{after: []linInput{{kind: linShutDown, key: -1}}}},
				trigger:  -1,
			}
			model := linPrioModelFor(tt.fair)
			ops := runLinHistory(t, build(), scripted, seed)
			assert.Equalf(t, tt.bug == linPrioNoBug, checkLinHistory(t, model, ops), "scripted history:\n%s", formatLinHistory(ops))
			checkBrokenQueue(t, model, seed, tt.bug != linPrioNoBug, true, build)
		})
	}
}
