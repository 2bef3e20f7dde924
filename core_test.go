package workqueue

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"math/bits"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/go-workqueue/workqueue/internal/delayheap"
	"github.com/go-workqueue/workqueue/internal/list"
	"github.com/go-workqueue/workqueue/internal/lock"
	"github.com/go-workqueue/workqueue/internal/table"
	"github.com/go-workqueue/workqueue/metrics"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"
)

// The linearizability test checks that the queues are linearizable: that every history of
// concurrent calls that a queue produces could also have been produced by
// the calls one at a time, each taking effect at some instant between its
// call and its return, on the obvious sequential queue (fifoSpec). Each
// history runs a few workers and a shutdown goroutine on a fresh queue with
// two or three keys, so that deduplication, the dirty mark and shutdown
// collide, records when every call started and returned, and gives the
// history to porcupine, which searches for such an order.
//
// ShutDownWithDrain does not take effect at one instant: it stops adds, then
// waits. It is recorded as two operations over the same interval, drain-begin
// (a ShutDown that releases no drain) and drain-end (legal once nothing is
// queued or processing, or once a ShutDown has released drains).
//
// This file holds the test, the recording of histories, the wiring to
// porcupine, and the sequential specification of the FIFO queue and its
// tests; priority_queue_model_test.go holds the priority queue's, and
// core_broken_test.go the reference queues, right and deliberately broken,
// and the tests that show the checker catches them.

// TestLinearizability checks histories of concurrent calls on every
// configuration of the queue. A failure prints the shortest rejected
// history and writes porcupine's view of it.
func TestLinearizability(t *testing.T) {
	tests := []struct {
		name  string
		setup linSetup
	}{
		{"queue", linSetup{}},
		{"queue/custom storage", linSetup{custom: true}},
		{"queue/metrics", linSetup{metrics: true}},
		{"rate limiting", linSetup{rateLimiting: true}},
		{"rate limiting/custom storage", linSetup{rateLimiting: true, custom: true}},
		{"rate limiting/metrics", linSetup{rateLimiting: true, metrics: true}},
		{"rate limiting/AddCancelsDelay and parking", linSetup{rateLimiting: true, addCancelsDelay: true, parking: true}},
		{"priority queue", linSetup{rateLimiting: true, priority: true}},
		{"priority queue/metrics", linSetup{rateLimiting: true, priority: true, metrics: true}},
		{"priority queue/fairness", linSetup{rateLimiting: true, priority: true, fairness: true}},
		{"priority queue/fairness and metrics", linSetup{rateLimiting: true, priority: true, fairness: true, metrics: true}},
		{"priority queue/fairness and MaxWait", linSetup{rateLimiting: true, priority: true, fairness: true, maxWait: true}},
		{"queue/parking", linSetup{parking: true}},
		{"queue/custom storage and parking", linSetup{custom: true, parking: true}},
		{"rate limiting/parking", linSetup{rateLimiting: true, parking: true}},
		{"rate limiting/parking and metrics", linSetup{rateLimiting: true, parking: true, metrics: true}},
		{"priority queue/parking", linSetup{rateLimiting: true, priority: true, parking: true}},
		{"priority queue/fairness and parking", linSetup{rateLimiting: true, priority: true, fairness: true, parking: true}},
		{"queue/group limits and parking", linSetup{groups: true, parking: true}},
		{"rate limiting/group limits and metrics", linSetup{rateLimiting: true, groups: true, metrics: true}},
		{"priority queue/group limits", linSetup{rateLimiting: true, priority: true, groups: true}},
		{"priority queue/fairness, group limits and parking", linSetup{rateLimiting: true, priority: true, fairness: true, groups: true, parking: true}},
		{"rate limiting/debounce and parking", linSetup{rateLimiting: true, debounce: true, parking: true}},
		{"rate limiting/debounce and metrics", linSetup{rateLimiting: true, debounce: true, metrics: true}},
		{"priority queue/debounce and parking", linSetup{rateLimiting: true, priority: true, debounce: true, parking: true}},
		{"priority queue/fairness, debounce and metrics", linSetup{rateLimiting: true, priority: true, fairness: true, debounce: true, metrics: true}},
	}
	seed := linBaseSeed(t)
	for ti, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			histories := linHistoryCount()
			var (
				operations    int
				rejected      int
				shortest      []porcupine.Operation
				shortestIndex int
			)
			for h := range histories {
				historySeed := seed + uint64(ti)<<32 + uint64(h)
				plan := randomLinPlan(rand.New(rand.NewPCG(historySeed, 0)), tt.setup.rateLimiting, tt.setup.priority && !tt.setup.debounce, tt.setup.parking, tt.setup.debounce, tt.setup.groups)
				ops := runLinHistory(t, tt.setup.build(), plan, historySeed)
				operations += len(ops)
				if !checkLinHistory(t, tt.setup.model(), ops) {
					rejected++
					if shortest == nil || len(ops) < len(shortest) {
						shortest, shortestIndex = ops, h
					}
				}
			}
			t.Logf("%d histories, %d operations, %d not linearizable", histories, operations, rejected)
			if rejected == 0 {
				return
			}
			path := visualizeLinHistory(t, tt.setup.model(), shortest, t.Name())
			assert.Failf(t, "not linearizable", "%d of %d histories are not linearizable; the shortest, history %d with %d operations (view: %s):\n%s",
				rejected, histories, shortestIndex, len(shortest), path, formatLinHistory(shortest))
		})
	}
}

// The harness of the linearizability test: the queue a history runs on
// (linSubject, built from a linSetup), the random plans of workers and
// shutters, the goroutines that run them and record when each call started
// and returned (linRun), and the wiring to porcupine that checks and shows
// the histories.

var (
	linHistories = flag.Int("linhistories", 0, "histories TestLinearizability checks per configuration; 0 means 1500 with WORKQUEUE_SOAK=1 and 300 otherwise")
	linSeed      = flag.Uint64("linseed", 0, "seed of the scripts of TestLinearizability; 0 picks one at random")
	linVisDir    = flag.String("linvis", "", "directory for the HTML visualizations of rejected histories; empty means a new temporary directory")
)

// linSubject is the queue a history runs on. rl is nil for a queue without
// the rate-limiting methods; typed is the core queue, whose invariant is
// checked once the history has ended.
type linSubject struct {
	q     TypedInterface[string]
	rl    TypedRateLimitingInterface[string]
	ext   linExtras
	prio  linPrioritized // nil for a queue without priorities
	typed *Typed[string]
	pq    *TypedPriorityQueue[string]
	park  linParking // nil for a history without parks
	// groups sets the limit of the group of a and b, in a history with
	// group limits.
	groups groupLimiter
	// resched is the queue's Reschedule; nil for the plain queue.
	resched interface {
		Reschedule(item string, duration time.Duration)
	}
}

// linParking are the parking methods.
type linParking interface {
	Park(item string, events ...string)
	Wake(event string) int
	WakeItem(item string) bool
}

// linPrioritized are the methods of a priority queue.
type linPrioritized interface {
	AddWithOpts(opts AddOpts, items ...string)
	GetWithPriority() (item string, priority int, shutdown bool)
}

// linExtras are the methods this package adds to client-go's.
type linExtras interface {
	GetContext(ctx context.Context) (string, error)
	Remove(item string) bool
}

// linLimiter is a rate limiter that delays nothing and counts failures.
type linLimiter struct {
	mu       sync.Mutex
	failures map[string]int
}

func (l *linLimiter) When(item string) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.failures == nil {
		l.failures = make(map[string]int)
	}
	l.failures[item]++
	return 0
}

func (l *linLimiter) Forget(item string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.failures, item)
}

func (l *linLimiter) NumRequeues(item string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.failures[item]
}

// linMetric and linMetricsProvider record metrics with atomics only, so
// that they add no lock of their own to the histories.
type linMetric struct{ v atomic.Int64 }

func (m *linMetric) Inc()            { m.v.Add(1) }
func (m *linMetric) Dec()            { m.v.Add(-1) }
func (m *linMetric) Set(v float64)   { m.v.Store(int64(v)) }
func (m *linMetric) Observe(float64) { m.v.Add(1) }

type linMetricsProvider struct{}

var _ metrics.DelayedItemsProvider = linMetricsProvider{}

func (linMetricsProvider) NewDepthMetric(string) GaugeMetric            { return new(linMetric) }
func (linMetricsProvider) NewAddsMetric(string) CounterMetric           { return new(linMetric) }
func (linMetricsProvider) NewLatencyMetric(string) HistogramMetric      { return new(linMetric) }
func (linMetricsProvider) NewWorkDurationMetric(string) HistogramMetric { return new(linMetric) }
func (linMetricsProvider) NewUnfinishedWorkSecondsMetric(string) SettableGaugeMetric {
	return new(linMetric)
}
func (linMetricsProvider) NewLongestRunningProcessorSecondsMetric(string) SettableGaugeMetric {
	return new(linMetric)
}
func (linMetricsProvider) NewRetriesMetric(string) CounterMetric            { return new(linMetric) }
func (linMetricsProvider) NewDelayedItemsMetric(string) SettableGaugeMetric { return new(linMetric) }

// linSetup options: the ingredients of a configuration.
type linSetup struct {
	metrics      bool
	custom       bool
	rateLimiting bool
	// priority makes a TypedPriorityQueue, whose histories add at
	// priorities 0 to 2 too; fairness gives it a fairness dimension that
	// puts a and b under one key and c under another (linTenant).
	priority bool
	fairness bool
	// maxWait gives the priority queue a MaxWait that the histories'
	// fake clock never reaches: the age list is kept, never used.
	maxWait bool
	// parking adds parks and wakes to the histories. MaxParkTime is never
	// reached on the fake clock.
	parking bool
	// addCancelsDelay sets AddCancelsDelay on the delaying layer. The
	// histories add with no delay, so the specification is the same; it
	// runs Add and AddRateLimited through the delaying layer's lock,
	// against every other call.
	addCancelsDelay bool
	// debounce sets a Debounce that the histories' clock never ends, and
	// adds Reschedule to the histories; the priority queue's then add at
	// priority 0 only.
	debounce bool
	// groups gives the queue group limits: a and b in a group of limit 1
	// at first, c in none; the histories change the limit.
	groups bool
}

// linGroupLimits are the group limits of the histories with groups.
var linGroupLimits = GroupLimits[string]{
	Group: func(item string) string {
		if item == "c" {
			return ""
		}
		return "ab"
	},
	Default: 1,
}

// model returns the specification the setup's queue must meet.
func (c linSetup) model() porcupine.Model {
	if c.debounce {
		return linDebounceModel(c)
	}
	switch {
	case c.groups && c.priority:
		return linPrioGroupModelFor(c.fairness)
	case c.groups:
		return linGroupModel
	case c.priority && c.fairness:
		return linFairModel
	case c.priority:
		return linPriorityModel
	case c.custom:
		return linCustomModel
	}
	return linModel
}

func (c linSetup) build() linSubject {
	clock := clocktesting.NewFakeClock(time.Unix(0, 0))
	config := TypedQueueConfig[string]{Clock: clock, MaxParkTime: time.Hour}
	if c.metrics {
		config.Name, config.MetricsProvider = "lin", linMetricsProvider{}
	}
	if c.custom {
		config.Queue = DefaultQueue[string]() // custom storage, with FIFO order
	}
	if c.groups {
		config.GroupLimits = &linGroupLimits
	}
	if c.priority {
		pqConfig := TypedPriorityQueueConfig[string]{Name: config.Name, MetricsProvider: config.MetricsProvider, Clock: clock, MaxParkTime: time.Hour, ParkBackoff: &linLimiter{},
			Debounce: c.debounceConfig()}
		if c.fairness {
			pqConfig.Fairness = []func(string) string{func(item string) string { return fmt.Sprint(linTenant(linKeyIndex(item))) }}
		}
		if c.maxWait {
			pqConfig.MaxWait = time.Hour
		}
		pqConfig.GroupLimits = config.GroupLimits
		pq := NewTypedPriorityQueue[string](&linLimiter{}, pqConfig)
		return linSubject{q: pq, rl: pq, ext: pq, prio: pq, pq: pq, park: pq, groups: pq, resched: pq}
	}
	typed := NewTypedWithConfig(config)
	if !c.rateLimiting {
		return linSubject{q: typed, ext: typed, typed: typed, park: typed, groups: typed}
	}
	delaying := NewTypedDelayingQueueWithConfig(TypedDelayingQueueConfig[string]{
		Name: config.Name, MetricsProvider: config.MetricsProvider, Clock: clock, Queue: typed,
		AddCancelsDelay: c.addCancelsDelay, Debounce: c.debounceConfig(),
	})
	rl := NewTypedRateLimitingQueueWithConfig[string](&linLimiter{}, TypedRateLimitingQueueConfig[string]{
		Name: config.Name, MetricsProvider: config.MetricsProvider, Clock: clock, DelayingQueue: delaying, ParkBackoff: &linLimiter{},
	})
	return linSubject{q: rl, rl: rl, ext: rl, typed: typed, park: rl, groups: rl, resched: rl}
}

// linPlan is what the goroutines of one history do.
type linPlan struct {
	keys int
	// workers are the scripts of the workers. A worker then marks done what
	// it still holds, and gets and marks done items until Get reports
	// shutdown, so that every drain ends.
	workers [][]linInput
	// shutters are the goroutines that shut the queue down; they never
	// call Get.
	shutters []linShutter
	// trigger is how many worker operations start before the shutters go
	// on; they go on earlier if every worker is waiting in Get or done.
	// With trigger -1 they go on when every worker has run its script,
	// whose Gets must then never wait: the history is sequential.
	trigger int
	// yield makes the goroutines call runtime.Gosched between operations
	// at random, for other interleavings.
	yield bool
}

type linShutter struct {
	before []linInput // run before the trigger
	after  []linInput // run after it: shutdowns and then checks
}

// randomLinPlan returns a plan for a queue with (rateLimiting) or without
// the rate-limiting methods, with priorities or without, with parks and
// wakes or without, with Reschedule or without, and with group limits or
// without.
func randomLinPlan(rng *rand.Rand, rateLimiting, priorities, parking, reschedule, groups bool) linPlan {
	p := linPlan{keys: 2 + rng.IntN(linMaxKeys-1), yield: rng.IntN(2) == 0}
	key := func() int8 { return int8(rng.IntN(p.keys)) }
	type weighted struct {
		kind   linKind
		weight int
	}
	kinds := []weighted{{linAdd, 30}, {linGet, 20}, {linGetContext, 8}, {linRemove, 6}, {linLen, 10}, {linShuttingDown, 4}}
	if rateLimiting {
		kinds = append(kinds, []weighted{{linAddAfterZero, 8}, {linAddAfterNegative, 4}, {linAddRateLimited, 12}, {linForget, 5}, {linNumRequeues, 10}}...)
	}
	if priorities {
		kinds = append(kinds, weighted{linAddPriority, 40})
	}
	if parking {
		kinds = append(kinds, []weighted{{linPark, 14}, {linWake, 10}, {linWakeItem, 4}}...)
	}
	if reschedule {
		kinds = append(kinds, []weighted{{linRescheduleZero, 8}, {linRescheduleLater, 10}}...)
	}
	// A worker of a queue with group limits gets only while it holds
	// nothing: one that held an item of a full group could wait for a
	// slot it holds itself.
	maxHeld := 2
	if groups {
		kinds = append(kinds, weighted{linSetGroupLimit, 6})
		maxHeld = 1
	}
	total := 0
	for _, k := range kinds {
		total += k.weight
	}
	// pick picks an operation for a worker that holds held items, or for a
	// shutter (held -1): only a worker that holds fewer than two gets, and
	// only one that holds one parks.
	pick := func(held int) linKind {
		for {
			r := rng.IntN(total)
			for _, k := range kinds {
				if r < k.weight {
					if (k.kind == linGet || k.kind == linGetContext) && (held < 0 || held >= maxHeld) || k.kind == linPark && held <= 0 {
						break
					}
					return k.kind
				}
				r -= k.weight
			}
		}
	}
	input := func(kind linKind) linInput {
		switch kind {
		case linLen, linShuttingDown, linGet, linGetContext, linShutDown, linDrain:
			return linInput{kind: kind, key: -1}
		case linAddPriority:
			return linInput{kind: kind, key: key(), prio: int8(rng.IntN(linLevels))}
		case linSetGroupLimit:
			return linInput{kind: kind, key: -1, prio: int8(rng.IntN(3))}
		case linPark:
			return linInput{kind: kind, key: -1, events: uint8(1 + rng.IntN(3))}
		case linWake:
			return linInput{kind: kind, key: -1, events: uint8(1 << rng.IntN(2))}
		}
		return linInput{kind: kind, key: key()}
	}

	workers := 3
	ops := 0
	for range workers {
		n := 8 + rng.IntN(5)
		script := make([]linInput, 0, n)
		held := 0
		for range n {
			if held > 0 && rng.IntN(3) == 0 {
				script = append(script, linInput{kind: linDone, key: -1})
				held--
				continue
			}
			kind := pick(held)
			if kind == linGet || kind == linGetContext {
				held++
			}
			script = append(script, input(kind))
		}
		p.workers = append(p.workers, script)
		ops += len(script)
	}
	p.trigger = rng.IntN(ops + 1)

	checks := func() []linInput {
		in := []linInput{input(linShuttingDown), input(linLen), input(linAdd)}
		if rateLimiting {
			in = append(in, input(linAddRateLimited))
			for k := range p.keys {
				in = append(in, linInput{kind: linNumRequeues, key: int8(k)})
			}
		}
		return in
	}
	main := linShutter{}
	for range rng.IntN(4) {
		main.before = append(main.before, input(pick(-1)))
	}
	for range rng.IntN(2) {
		main.after = append(main.after, input(pick(-1)))
	}
	var second *linShutter
	switch rng.IntN(8) {
	case 0, 1:
		main.after = append(main.after, input(linShutDown))
	case 2, 3:
		main.after = append(main.after, input(linDrain))
	case 4:
		main.after = append(main.after, input(linShutDown), input(linDrain))
	case 5:
		main.after = append(main.after, input(linDrain), input(linShutDown))
	case 6:
		main.after = append(main.after, input(linDrain))
		second = &linShutter{after: []linInput{input(linShutDown)}}
	case 7:
		main.after = append(main.after, input(linDrain))
		second = &linShutter{after: []linInput{input(linDrain)}}
	}
	main.after = append(main.after, checks()...)
	p.shutters = append(p.shutters, main)
	if second != nil {
		if rng.IntN(2) == 0 {
			second.before = []linInput{input(pick(-1))}
		}
		second.after = append(second.after, input(linShuttingDown))
		p.shutters = append(p.shutters, *second)
	}
	return p
}

// linGate tells the shutters when to go on: once trigger worker operations
// have started, or once every worker is waiting in Get or has finished, so
// that a Get never waits for a shutdown that waits for it. With trigger -1,
// once every worker has run its script.
type linGate struct {
	started atomic.Int64
	trigger int64
	// waiting is the number of workers still running in its high half and
	// the number of them in Get in its low half.
	waiting atomic.Int64
	// scripts is the number of workers still running their scripts.
	scripts atomic.Int64
	once    sync.Once
	ch      chan struct{}
}

func newLinGate(workers, trigger int) *linGate {
	g := &linGate{trigger: int64(trigger), ch: make(chan struct{})}
	g.waiting.Store(int64(workers) << 32)
	g.scripts.Store(int64(workers))
	if trigger == 0 {
		g.fire()
	}
	return g
}

func (g *linGate) fire() { g.once.Do(func() { close(g.ch) }) }

func (g *linGate) check(waiting int64) {
	if g.trigger >= 0 && waiting&(1<<32-1) >= waiting>>32 {
		g.fire()
	}
}

func (g *linGate) scriptEnded() {
	if g.scripts.Add(-1) == 0 && g.trigger < 0 {
		g.fire()
	}
}

func (g *linGate) opStarted() {
	if g.started.Add(1) == g.trigger {
		g.fire()
	}
}
func (g *linGate) enterGet()    { g.check(g.waiting.Add(1)) }
func (g *linGate) leaveGet()    { g.waiting.Add(-1) }
func (g *linGate) workerEnded() { g.check(g.waiting.Add(-1 << 32)) }

// linRun records one history.
type linRun struct {
	subject linSubject
	plan    linPlan
	clock   atomic.Int64
	gate    *linGate
	// arrived counts the goroutines at the starting line; they start
	// together once all are there.
	arrived atomic.Int32
	clients int32
	// logs holds each goroutine's operations; each goroutine appends to
	// its own.
	logs [][]porcupine.Operation
	// runaway is set by a worker whose final loop got too many items: a
	// queue that hands items out forever.
	runaway atomic.Bool
}

// linTailLimit bounds the items a worker's final loop gets.
const linTailLimit = 100

// call runs one operation of client and records it.
func (r *linRun) call(client int, in linInput, rng *rand.Rand) linOutput {
	if r.plan.yield && rng.IntN(3) == 0 {
		runtime.Gosched()
	}
	q := r.subject.q
	var key string
	if in.key >= 0 {
		key = linKeyNames[in.key]
	}
	var out linOutput
	begin := r.clock.Add(1)
	switch in.kind {
	case linAdd:
		q.Add(key)
	case linAddAfterZero:
		r.subject.rl.AddAfter(key, 0)
	case linAddAfterNegative:
		r.subject.rl.AddAfter(key, -time.Second)
	case linAddRateLimited:
		r.subject.rl.AddRateLimited(key)
	case linForget:
		r.subject.rl.Forget(key)
	case linNumRequeues:
		out.n = r.subject.rl.NumRequeues(key)
	case linLen:
		out.n = q.Len()
	case linShuttingDown:
		out.shutdown = q.ShuttingDown()
	case linAddPriority:
		priority := int(in.prio)
		r.subject.prio.AddWithOpts(AddOpts{Priority: &priority}, key)
	case linGet:
		out.prio = -1
		if r.subject.prio != nil {
			item, priority, shutdown := r.subject.prio.GetWithPriority()
			out.key, out.shutdown = linKeyIndex(item), shutdown
			if !shutdown {
				out.prio = int8(priority)
			}
			break
		}
		item, shutdown := q.Get()
		out.key, out.shutdown = linKeyIndex(item), shutdown
	case linGetContext:
		out.prio = -1
		ctx, cancel := context.WithTimeout(context.Background(), time.Duration(rng.IntN(30))*time.Microsecond)
		if rng.IntN(4) == 0 {
			cancel()
		}
		item, err := r.subject.ext.GetContext(ctx)
		cancel()
		out.key, out.shutdown = linKeyIndex(item), errors.Is(err, ErrShutDown)
		out.cancelled = err != nil && !out.shutdown
	case linRemove:
		if r.subject.ext.Remove(key) {
			out.n = 1
		}
	case linSetGroupLimit:
		r.subject.groups.SetGroupLimit("ab", int(in.prio))
	case linDone:
		q.Done(key)
	case linShutDown:
		q.ShutDown()
	case linDrain:
		q.ShutDownWithDrain()
	case linPark:
		r.subject.park.Park(key, linEvents(in.events)...)
	case linWake:
		out.n = r.subject.park.Wake(linEventNames[bits.TrailingZeros8(in.events)])
	case linWakeItem:
		if r.subject.park.WakeItem(key) {
			out.n = 1
		}
	case linRescheduleZero:
		r.subject.resched.Reschedule(key, 0)
	case linRescheduleLater:
		r.subject.resched.Reschedule(key, time.Hour)
	default:
		panic(fmt.Sprintf("linRun.call: unexpected operation %v", in.kind))
	}
	end := r.clock.Add(1)
	record := func(in linInput) {
		r.logs[client] = append(r.logs[client], porcupine.Operation{ClientId: client, Input: in, Call: begin, Output: out, Return: end})
	}
	if in.kind == linDrain {
		record(linInput{kind: linDrainBegin, key: -1})
		record(linInput{kind: linDrainEnd, key: -1})
	} else {
		record(in)
	}
	return out
}

// startLine waits until every goroutine of the history is running. A
// channel closed for all would wake them one by one, and the first could
// finish before the last is awake.
func (r *linRun) startLine() {
	r.arrived.Add(1)
	for r.arrived.Load() < r.clients {
		runtime.Gosched()
	}
}

func (r *linRun) get(client int, kind linKind, rng *rand.Rand) linOutput {
	r.gate.enterGet()
	defer r.gate.leaveGet()
	return r.call(client, linInput{kind: kind, key: -1}, rng)
}

func (r *linRun) worker(client int, script []linInput, rng *rand.Rand) {
	defer r.gate.workerEnded()
	r.startLine()
	var held []int8
	for _, in := range script {
		r.gate.opStarted()
		switch in.kind {
		case linGet, linGetContext:
			if out := r.get(client, in.kind, rng); !out.shutdown && !out.cancelled {
				held = append(held, out.key)
			}
		case linDone:
			if len(held) > 0 {
				r.call(client, linInput{kind: linDone, key: held[0]}, rng)
				held = held[1:]
			}
		case linPark:
			if len(held) > 0 {
				r.call(client, linInput{kind: in.kind, key: held[0], events: in.events}, rng)
			}
		default:
			r.call(client, in, rng)
		}
	}
	for _, key := range held {
		r.call(client, linInput{kind: linDone, key: key}, rng)
	}
	r.gate.scriptEnded()
	for range linTailLimit {
		out := r.get(client, linGet, rng)
		if out.shutdown {
			return
		}
		r.call(client, linInput{kind: linDone, key: out.key}, rng)
	}
	r.runaway.Store(true)
}

func (r *linRun) shutter(client int, s linShutter, rng *rand.Rand) {
	r.startLine()
	for _, in := range s.before {
		r.call(client, in, rng)
	}
	<-r.gate.ch
	for _, in := range s.after {
		r.call(client, in, rng)
	}
}

// linHistoryTimeout bounds one history; a correct queue takes milliseconds.
const linHistoryTimeout = time.Minute

// runLinHistory runs plan on subject and returns the operations in the
// order of their calls. The queue is shut down when it returns.
func runLinHistory(t *testing.T, subject linSubject, plan linPlan, seed uint64) []porcupine.Operation {
	t.Helper()
	r := &linRun{
		subject: subject,
		plan:    plan,
		gate:    newLinGate(len(plan.workers), plan.trigger),
		clients: int32(len(plan.workers) + len(plan.shutters)),
		logs:    make([][]porcupine.Operation, len(plan.workers)+len(plan.shutters)),
	}
	var wg sync.WaitGroup
	for i, script := range plan.workers {
		rng := rand.New(rand.NewPCG(seed, uint64(i)))
		wg.Go(func() { r.worker(i, script, rng) })
	}
	for i, s := range plan.shutters {
		client := len(plan.workers) + i
		rng := rand.New(rand.NewPCG(seed, uint64(client)))
		wg.Go(func() { r.shutter(client, s, rng) })
	}
	finished := make(chan struct{})
	go func() {
		wg.Wait()
		close(finished)
	}()
	timer := time.NewTimer(linHistoryTimeout)
	defer timer.Stop()
	select {
	case <-finished:
	case <-timer.C:
		subject.q.ShutDown() // releases every Get and drain, unrecorded
		<-finished
		require.FailNowf(t, "history did not finish", "after %v; partial history:\n%s", linHistoryTimeout, formatLinHistory(r.operations()))
	}
	ops := r.operations()
	require.Falsef(t, r.runaway.Load(), "a worker got more than %d items after its script:\n%s", linTailLimit, formatLinHistory(ops))
	if subject.pq != nil {
		require.NoError(t, verifyPriorityQueue(subject.pq), "the queue's invariant after the history:\n%s", formatLinHistory(ops))
	}
	if subject.typed != nil {
		require.NoError(t, verifyQueue(subject.typed), "the queue's invariant after the history:\n%s", formatLinHistory(ops))
	}
	return ops
}

func (r *linRun) operations() []porcupine.Operation {
	ops := slices.Concat(r.logs...)
	slices.SortFunc(ops, func(a, b porcupine.Operation) int { return int(a.Call - b.Call) })
	return ops
}

func formatLinHistory(ops []porcupine.Operation) string {
	var b strings.Builder
	for _, op := range ops {
		fmt.Fprintf(&b, "  [%3d,%3d] client %d: %s\n", op.Call, op.Return, op.ClientId,
			linDescribe(op.Input.(linInput), op.Output.(linOutput)))
	}
	return b.String()
}

// linCheckTimeout bounds porcupine's search on one history; the histories
// here take it milliseconds.
const linCheckTimeout = time.Minute

// checkLinHistory reports whether porcupine finds ops linearizable. Unknown
// (the search timed out) fails the test.
func checkLinHistory(t *testing.T, model porcupine.Model, ops []porcupine.Operation) bool {
	t.Helper()
	result := porcupine.CheckOperationsTimeout(model, ops, linCheckTimeout)
	require.NotEqualf(t, porcupine.Unknown, result, "porcupine timed out on:\n%s", formatLinHistory(ops))
	return result == porcupine.Ok
}

// linTempDir is the directory of a run's visualizations, made at the first:
// not t.TempDir, which is removed when the failed test ends.
var linTempDir = sync.OnceValues(func() (string, error) {
	return os.MkdirTemp("", "workqueue-linearizability-")
})

// visualizeLinHistory writes porcupine's HTML view of ops, with the longest
// orders it found, and returns the file's path.
func visualizeLinHistory(t *testing.T, model porcupine.Model, ops []porcupine.Operation, name string) string {
	t.Helper()
	_, info := porcupine.CheckOperationsVerbose(model, ops, linCheckTimeout)
	dir := *linVisDir
	if dir == "" {
		var err error
		dir, err = linTempDir()
		require.NoError(t, err)
	}
	path := filepath.Join(dir, strings.NewReplacer("/", "_", " ", "_").Replace(name)+".html")
	require.NoError(t, porcupine.VisualizePath(model, info, path))
	return path
}

// linHistoryCount is the number of histories per configuration.
func linHistoryCount() int {
	if *linHistories > 0 {
		return *linHistories
	}
	return sized(1500, 300, 300)
}

func linBaseSeed(t *testing.T) uint64 {
	seed := *linSeed
	if seed == 0 {
		seed = rand.Uint64()
	}
	t.Logf("scripts from -linseed=%d", seed)
	return seed
}

// The sequential specification of the queues: the FIFO queue (fifoSpec)
// with what every queue shares (queueSpec: the processing and dirty keys,
// failures, shutdown, parking and group limits), which the model walks of
// rate_limiting_queue_model_test.go and the linearizability histories both
// check against; the operations a history records (linInput, linOutput)
// and the porcupine model built from them. The priority queue's
// specification is in priority_queue_model_test.go.

// linMaxKeys is the most keys a history uses; the model keeps one bit per key.
const linMaxKeys = 3

var linKeyNames = [linMaxKeys]string{"a", "b", "c"}

// linKeyIndex returns the index of a key, -1 for the zero value (what Get
// returns at shutdown) and -2 for anything else, which no step accepts.
func linKeyIndex(item string) int8 {
	if item == "" {
		return -1
	}
	for i, name := range linKeyNames {
		if item == name {
			return int8(i)
		}
	}
	return -2
}

type linKind uint8

const (
	linAdd linKind = iota
	linAddAfterZero
	linAddAfterNegative
	linAddRateLimited
	linForget
	linNumRequeues
	linLen
	linShuttingDown
	linGet
	linDone
	linShutDown
	// linDrain is what a plan asks for; the history records it as the two
	// operations below.
	linDrain
	linDrainBegin
	linDrainEnd
	// linGetContext is GetContext with a context that has ended already or
	// ends within microseconds.
	linGetContext
	linRemove
	// linAddPriority is a priority queue's AddWithOpts with the input's
	// priority.
	linAddPriority
	// linPark is Park, which records no failure, even on a queue with a
	// rate limiter; linWake is Wake of the one event in the input's events.
	linPark
	linWake
	linWakeItem
	// linSetGroupLimit is SetGroupLimit of the group of a and b, with
	// the input's prio as the limit.
	linSetGroupLimit
	// linRescheduleZero and linRescheduleLater are Reschedule with no
	// delay and with an hour, which the histories' clock never reaches
	// (linDebounced).
	linRescheduleZero
	linRescheduleLater
)

var linKindNames = [...]string{
	linAdd: "Add", linAddAfterZero: "AddAfter0", linAddAfterNegative: "AddAfter-1", linAddRateLimited: "AddRateLimited",
	linForget: "Forget", linNumRequeues: "NumRequeues", linLen: "Len", linShuttingDown: "ShuttingDown",
	linGet: "Get", linDone: "Done", linShutDown: "ShutDown", linDrain: "ShutDownWithDrain",
	linDrainBegin: "ShutDownWithDrain(begin)", linDrainEnd: "ShutDownWithDrain(end)",
	linGetContext: "GetContext", linRemove: "Remove", linAddPriority: "AddWithOpts",
	linPark: "Park", linWake: "Wake", linWakeItem: "WakeItem", linSetGroupLimit: "SetGroupLimit",
	linRescheduleZero: "Reschedule0", linRescheduleLater: "Reschedule1h",
}

// linEventNames name the events of the parking histories, by bit.
var linEventNames = [...]string{"e0", "e1"}

// linEvents returns the names of the events in mask.
func linEvents(mask uint8) []string {
	var names []string
	for i, name := range linEventNames {
		if mask&(1<<i) != 0 {
			names = append(names, name)
		}
	}
	return names
}

// linInput is an operation's input: its kind and key, -1 for none, for
// linAddPriority the priority, and for a park or a wake the events, a bit
// per event. In a worker's plan a Done or a Park has key -1: it marks the
// oldest item the worker holds.
type linInput struct {
	kind   linKind
	key    int8
	prio   int8
	events uint8
}

// linOutput is what an operation returned: Get's and GetContext's item
// (key) and shutdown (for GetContext: ErrShutDown), ShuttingDown's result
// (shutdown), Len's and NumRequeues' result and whether Remove removed
// anything (n), and whether GetContext returned its context's error
// (cancelled), and the priority a priority queue's Get handed the item out
// at (prio; -1 where the call does not say).
type linOutput struct {
	key       int8
	shutdown  bool
	n         int
	cancelled bool
	prio      int8
}

func linKeyName(key int8) string {
	switch {
	case key >= 0:
		return linKeyNames[key]
	case key == -1:
		return `""`
	default:
		return "?"
	}
}

func linDescribe(in linInput, out linOutput) string {
	name := linKindNames[in.kind]
	switch in.kind {
	case linGet, linGetContext:
		switch {
		case out.shutdown:
			return fmt.Sprintf("%s() -> %s, shutdown", name, linKeyName(out.key))
		case out.cancelled:
			return fmt.Sprintf("%s() -> %s, cancelled", name, linKeyName(out.key))
		case out.prio >= 0 && in.kind == linGet:
			return fmt.Sprintf("GetWithPriority() -> %s, %d", linKeyName(out.key), out.prio)
		}
		return fmt.Sprintf("%s() -> %s", name, linKeyName(out.key))
	case linAddPriority:
		return fmt.Sprintf("AddWithOpts(Priority %d, %s)", in.prio, linKeyName(in.key))
	case linSetGroupLimit:
		return fmt.Sprintf("SetGroupLimit(ab, %d)", in.prio)
	case linRemove, linWakeItem:
		return fmt.Sprintf("%s(%s) -> %v", name, linKeyName(in.key), out.n == 1)
	case linPark:
		return fmt.Sprintf("Park(%s, %s)", linKeyName(in.key), strings.Join(linEvents(in.events), ", "))
	case linWake:
		return fmt.Sprintf("Wake(%s) -> %d", strings.Join(linEvents(in.events), ", "), out.n)
	case linLen:
		return fmt.Sprintf("Len() -> %d", out.n)
	case linNumRequeues:
		return fmt.Sprintf("NumRequeues(%s) -> %d", linKeyName(in.key), out.n)
	case linShuttingDown:
		return fmt.Sprintf("ShuttingDown() -> %v", out.shutdown)
	case linShutDown, linDrain, linDrainBegin, linDrainEnd:
		return name + "()"
	}
	return fmt.Sprintf("%s(%s)", name, linKeyName(in.key))
}

// fifoSpec is the sequential FIFO queue: a value, so that porcupine can
// keep states and compare them with ==. An item is in at most one of the
// FIFO and the processing set; dirty items are processing items added
// again. Its keys are 0 to specKeys-1.
type fifoSpec struct {
	queueSpec
	fifo   [specKeys]int8
	queued int8
	// custom is set for a queue with custom storage, where a removed item
	// stays in the FIFO, hidden (bit per key), until a Get passes it or an
	// add shows it again in its old place.
	custom bool
	hidden uint16
}

// queueSpec is what the sequential queues (fifoSpec, prioSpec) keep
// apart from their order: the keys being processed, those added again
// meanwhile, the failures, the shutdown, the parks and the group limits.
type queueSpec struct {
	processing uint16 // bit per key
	dirty      uint16 // bit per key
	failures   [specKeys]uint8
	shutdown   bool
	released   bool // a ShutDown has released every drain

	// parks are the parks, by the specification the model walks apply
	// too.
	parks parkSpec

	// groupKeys holds the keys of each group, a bit per key, and limits
	// each group's limit (0 or less: none); a key in no group has none.
	groupKeys [specGroups]uint16
	limits    [specGroups]int8
}

// specKeys is the number of keys a spec holds: the model walks' items;
// a history uses linMaxKeys of them. specGroups is the number of groups:
// the group walks'.
const (
	specKeys   = modelItems
	specGroups = 3
)

// linGrouped returns the histories' group limits: a and b form group 0,
// of limit 1 at first, and c has no group.
func linGrouped() queueSpec {
	return queueSpec{groupKeys: [specGroups]uint16{0b011}, limits: [specGroups]int8{1}}
}

// eligible reports whether Get may hand out key: its group, if it has
// one, has a free slot.
func (c *queueSpec) eligible(key int8) bool {
	for g, keys := range c.groupKeys {
		if keys&(1<<key) != 0 {
			return c.limits[g] <= 0 || c.inFlight(g) < int(c.limits[g])
		}
	}
	return true
}

// inFlight returns the number of keys of group g being processed.
func (c *queueSpec) inFlight(g int) int { return bits.OnesCount16(c.processing & c.groupKeys[g]) }

// handOut marks key, just handed out by Get, as processing.
func (c *queueSpec) handOut(key int8) {
	c.processing |= 1 << key
	c.parks.handOut(int(key))
}

// unpark ends key's park, if it has one, and reports whether it was
// parked since its Done and whether it was parked by its worker.
func (c *queueSpec) unpark(key int8) (parked, parking bool) {
	had, settled := c.parks.drop(int(key))
	return settled, had && !settled
}

// park applies a worker's Park(key, events): nothing after a shutdown, for
// a key not processing, or for one added again since its Get; a Done that
// queues it again if one of events woke since its Get; otherwise a park
// that takes effect at Done, replacing one asked for before.
func (c *queueSpec) park(key int8, events uint8) {
	if c.mayPark(key) && c.parks.park(int(key), events) {
		c.dirty |= 1 << key
	}
}

// mayPark reports whether a worker's Park of key can park it: not after a
// shutdown, only for a key processing and not added again since its Get.
func (c *queueSpec) mayPark(key int8) bool {
	bit := uint16(1) << key
	return !c.shutdown && c.processing&bit != 0 && c.dirty&bit == 0
}

// wake applies Wake(events): it ends the parks waiting for them, in the
// order they were asked for, returning the keys parked since their Done
// (to queue, in that order) and the number of parks it ended. A key still
// processing is queued again at its Done.
func (c *queueSpec) wake(events uint8) (woken []int8, n int) {
	if c.shutdown {
		return nil, 0
	}
	ended := c.parks.wake(events)
	for _, p := range ended {
		if p.settled {
			woken = append(woken, int8(p.item))
		} else {
			c.dirty |= 1 << p.item
		}
	}
	return woken, len(ended)
}

// wakeItem applies WakeItem(key): it ends key's park, if it has one, and
// reports whether it did and whether to queue key now (parked since its
// Done). A key still processing is queued again at its Done.
func (c *queueSpec) wakeItem(key int8) (woken, queue bool) {
	woken, settled := c.parks.wakeItem(int(key))
	if woken && !settled {
		c.dirty |= 1 << key
	}
	return woken, settled
}

// shutDown begins a shutdown: every park ends, and nothing is queued;
// release says whether it releases the drains (a ShutDown, not a
// ShutDownWithDrain).
func (c *queueSpec) shutDown(release bool) {
	c.shutdown = true
	c.released = c.released || release
	c.parks.shutDown()
}

// isProcessing reports whether key is handed out and not yet done.
func (c *queueSpec) isProcessing(key int8) bool { return c.processing&(1<<key) != 0 }

// processingKeys returns the keys being processed, in key order.
func (c *queueSpec) processingKeys() []int {
	var keys []int
	for key := range specKeys {
		if c.processing&(1<<key) != 0 {
			keys = append(keys, key)
		}
	}
	return keys
}

// stepCommon applies in if it does not depend on the order, and reports
// whether it did and whether out is what the queue could have returned.
// queued is the number of items Get can hand out.
func (c *queueSpec) stepCommon(in linInput, out linOutput, queued int) (handled, ok bool) {
	switch in.kind {
	case linForget:
		c.failures[in.key] = 0
	case linNumRequeues:
		return true, out.n == int(c.failures[in.key])
	case linLen:
		return true, out.n == queued
	case linShuttingDown:
		return true, out.shutdown == c.shutdown
	case linShutDown:
		c.shutDown(true)
	case linDrainBegin:
		c.shutDown(false)
	case linPark:
		c.park(in.key, in.events)
	case linDrainEnd:
		return true, c.released || c.shutdown && queued == 0 && c.processing == 0
	case linGet, linGetContext:
		switch {
		case out.cancelled:
			return true, in.kind == linGetContext && out.key == -1 && !out.shutdown
		case out.shutdown:
			return true, out.key == -1 && queued == 0 && c.shutdown
		}
		return false, false
	default:
		return false, false
	}
	return true, true
}

// validKey reports whether in names a key where it must.
func validKey(in linInput) bool {
	switch in.kind {
	case linAdd, linAddAfterZero, linAddAfterNegative, linAddRateLimited, linForget, linNumRequeues, linDone, linRemove, linAddPriority,
		linPark, linWakeItem:
		return in.key >= 0 && in.key < linMaxKeys
	}
	return true
}

// hash mixes c into h.
func (c queueSpec) hash(h uint64) uint64 {
	parked, parking := c.parks.masks()
	h ^= uint64(c.processing)<<40 | uint64(c.dirty)<<44 | uint64(parked)<<32 | uint64(parking)<<36
	for i, n := range c.failures[:linMaxKeys] {
		h ^= uint64(n) << (48 + 4*i)
	}
	if c.shutdown {
		h ^= 1 << 62
	}
	if c.released {
		h ^= 1 << 63
	}
	return h ^ uint64(c.limits[0]&15)<<28
}

// describe writes the processing keys, each with pending(key) if it was
// added again meanwhile, then the failures and the shutdown.
func (c queueSpec) describe(b *strings.Builder, pending func(key int8) string) {
	b.WriteString(" processing {")
	sep := ""
	for key := range int8(linMaxKeys) {
		if c.processing&(1<<key) != 0 {
			b.WriteString(sep + linKeyNames[key])
			if c.dirty&(1<<key) != 0 {
				b.WriteString(pending(key))
			}
			sep = " "
		}
	}
	b.WriteString("}")
	for key, n := range c.failures {
		if n > 0 {
			fmt.Fprintf(b, " failures(%s)=%d", linKeyNames[key], n)
		}
	}
	if c.parks.parks > 0 {
		_, parking := c.parks.masks()
		b.WriteString(" parks [")
		for i, key := range c.parks.order[:c.parks.parks] {
			if i > 0 {
				b.WriteString(" ")
			}
			b.WriteString(linKeyNames[key] + "(" + strings.Join(linEvents(c.parks.events[key]), ",") + ")")
			if parking&(1<<key) != 0 {
				b.WriteString("@Done")
			}
		}
		b.WriteString("]")
	}
	if c.released {
		b.WriteString(" shut down")
	} else if c.shutdown {
		b.WriteString(" draining")
	}
}

// visible returns the number of items Get can hand out.
func (s fifoSpec) visible() int {
	return int(s.queued) - bits.OnesCount16(s.hidden)
}

// add applies an add of key: nothing after a shutdown; otherwise it ends
// key's park, and queues key at the back, or again at its Done if it is
// processing, unless it is queued already.
func (s fifoSpec) add(key int8) fifoSpec {
	bit := uint16(1) << key
	if !s.shutdown {
		s.unpark(key)
	}
	switch {
	case s.shutdown:
	case s.processing&bit != 0:
		s.dirty |= bit
	case slices.Contains(s.fifo[:s.queued], key):
		s.hidden &^= bit
	default:
		s.fifo[s.queued] = key
		s.queued++
	}
	return s
}

// step applies one operation with its output to s. It reports false if the
// queue could not have returned out at this point.
func (s fifoSpec) step(in linInput, out linOutput) (bool, fifoSpec) {
	if !validKey(in) {
		return false, s // a Done of something no Get returned
	}
	if handled, ok := s.stepCommon(in, out, s.visible()); handled {
		return ok, s
	}
	key := in.key
	switch in.kind {
	case linAdd, linAddAfterZero, linAddAfterNegative:
		return true, s.add(key)
	case linAddPriority:
		return false, s // not an operation of this model's queues
	case linAddRateLimited:
		if s.shutdown {
			return true, s // the limiter is not consulted
		}
		s.failures[key]++
		return true, s.add(key)
	case linWake:
		woken, n := s.wake(in.events)
		for _, k := range woken {
			s = s.add(k)
		}
		return out.n == n, s
	case linWakeItem:
		woken, queue := s.wakeItem(key)
		if queue {
			s = s.add(key)
		}
		return out.n == 1 == woken, s
	case linRemove:
		removed, s := s.remove(key)
		return out.n == 1 == removed, s
	case linGet, linGetContext:
		got, s := s.get()
		return got >= 0 && got == out.key, s
	case linSetGroupLimit:
		s.limits[0] = in.prio
		return true, s
	case linDone:
		_, s := s.done(key)
		return true, s
	}
	panic(fmt.Sprintf("fifoSpec.step: unexpected operation %v", in.kind))
}

// get applies a Get that does not wait: it passes the removed items at
// the front and hands out the first key whose group has a free slot, -1
// if there is none.
func (s fifoSpec) get() (int8, fifoSpec) {
	for s.queued > 0 && s.hidden&(1<<s.fifo[0]) != 0 { // Get passes removed items
		s.hidden &^= 1 << s.fifo[0]
		s = s.drop(0)
	}
	i := s.next()
	if i < 0 {
		return -1, s
	}
	key := s.fifo[i]
	s = s.drop(i)
	s.handOut(key)
	return key, s
}

// next returns the position in the FIFO of the key Get hands out, the
// first whose group has a free slot, -1 for none; Get has passed the
// removed items at the front.
func (s *fifoSpec) next() int { return slices.IndexFunc(s.fifo[:s.queued], s.eligible) }

// done applies Done(key): for a key processing, its park takes effect, if
// it has one, and done reports whether one did; a key added again
// meanwhile is queued at the back.
func (s fifoSpec) done(key int8) (settled bool, _ fifoSpec) {
	bit := uint16(1) << key
	if s.processing&bit == 0 {
		return false, s
	}
	settled = s.parks.done(int(key))
	s.processing &^= bit
	if s.dirty&bit != 0 {
		s.dirty &^= bit
		s.fifo[s.queued] = key
		s.queued++
	}
	return settled, s
}

// remove applies Remove(key): it ends key's park, takes it out of the
// FIFO (with custom storage, hides it there) and forgets its failures; a
// processing key stays processing, but is not queued again. It reports
// whether key was queued, parked or to be queued at its Done.
func (s fifoSpec) remove(key int8) (bool, fifoSpec) {
	bit := uint16(1) << key
	parked, parking := s.unpark(key)
	removed := s.dirty&bit != 0 || parked || parking
	s.dirty &^= bit
	if i := slices.Index(s.fifo[:s.queued], key); i >= 0 && s.hidden&bit == 0 {
		if s.custom {
			s.hidden |= bit
		} else {
			s = s.drop(i)
		}
		removed = true
	}
	s.failures[key] = 0
	return removed, s
}

// order returns the queued keys, first to be handed out first; s has
// neither custom storage nor group limits.
func (s fifoSpec) order() []int {
	keys := make([]int, 0, s.queued)
	for _, key := range s.fifo[:s.queued] {
		keys = append(keys, int(key))
	}
	return keys
}

// withOrder returns s with the queued keys in the order of keys, which
// holds the same keys.
func (s fifoSpec) withOrder(keys []int) fifoSpec {
	if len(keys) != int(s.queued) {
		panic(fmt.Sprintf("fifoSpec.withOrder(%v) of %d queued keys", keys, s.queued))
	}
	for i, key := range keys {
		s.fifo[i] = int8(key)
	}
	return s
}

// drop takes the item at position i out of the FIFO.
func (s fifoSpec) drop(i int) fifoSpec {
	copy(s.fifo[i:], s.fifo[i+1:s.queued])
	s.queued--
	s.fifo[s.queued] = 0
	return s
}

func (s fifoSpec) hash() uint64 {
	h := uint64(s.queued) | uint64(s.hidden)<<8
	for i := range linMaxKeys {
		h |= uint64(s.fifo[i]&3) << (16 + 2*i)
	}
	return s.queueSpec.hash(h)
}

func (s fifoSpec) String() string {
	var b strings.Builder
	b.WriteString("queued [")
	for i, key := range s.fifo[:s.queued] {
		if i > 0 {
			b.WriteString(" ")
		}
		b.WriteString(linKeyNames[key])
		if s.hidden&(1<<key) != 0 {
			b.WriteString("(removed)")
		}
	}
	b.WriteString("]")
	s.describe(&b, func(int8) string { return "*" })
	return b.String()
}

// linModel is the sequential specification for porcupine, and
// linCustomModel the same for a queue with custom storage.
var (
	linModel       = linModelFor(false)
	linCustomModel = linModelFor(true)
)

func linModelFor(custom bool) porcupine.Model { return linModelOf(fifoSpec{custom: custom}) }

// linGroupModel is the specification of a queue with group limits: a and
// b share a group of limit 1 at first.
var linGroupModel = linModelOf(fifoSpec{queueSpec: linGrouped()})

// linSpec is a sequential queue of the models: a comparable value.
type linSpec[S any] interface {
	comparable
	step(in linInput, out linOutput) (bool, S)
	hash() uint64
	String() string
}

// linModelOf returns the porcupine model that starts from init.
func linModelOf[S linSpec[S]](init S) porcupine.Model {
	return porcupine.Model{
		Init: func() any { return init },
		Step: func(state, input, output any) (bool, any) {
			return state.(S).step(input.(linInput), output.(linOutput))
		},
		Hash: func(state any) uint64 { return state.(S).hash() },
		DescribeOperation: func(input, output any) string {
			return linDescribe(input.(linInput), output.(linOutput))
		},
		DescribeState: func(state any) string { return state.(S).String() },
	}
}

// TestLinearizabilityModel checks the model and porcupine on hand-written
// histories: operations with the same number run one after the other,
// call i*10 to return i*10+5; overlap stretches an operation's return.
func TestLinearizabilityModel(t *testing.T) {
	type op = linStep
	add := func(key int8) op { return op{in: linInput{kind: linAdd, key: key}} }
	get := func(key int8) op { return op{in: linInput{kind: linGet, key: -1}, out: linOutput{key: key}} }
	getShutdown := op{in: linInput{kind: linGet, key: -1}, out: linOutput{key: -1, shutdown: true}}
	done := func(key int8) op { return op{in: linInput{kind: linDone, key: key}} }
	length := func(n int) op { return op{in: linInput{kind: linLen, key: -1}, out: linOutput{n: n}} }
	requeues := func(key int8, n int) op {
		return op{in: linInput{kind: linNumRequeues, key: key}, out: linOutput{n: n}}
	}
	rateLimited := func(key int8) op { return op{in: linInput{kind: linAddRateLimited, key: key}} }
	shutDown := op{in: linInput{kind: linShutDown, key: -1}}
	drain := func(overlap int) []op {
		return []op{{in: linInput{kind: linDrainBegin, key: -1}, overlap: overlap}, {in: linInput{kind: linDrainEnd, key: -1}, overlap: overlap}}
	}
	overlapping := func(o op, by int) op { o.overlap = by; return o }

	tests := []struct {
		name  string
		steps [][]op // steps[i] run at time i*10; the operations of one step overlap
		want  bool
	}{
		{"fifo", [][]op{{add(0)}, {add(1)}, {add(0)}, {length(2)}, {get(0)}, {get(1)}, {length(0)}}, true},
		{"fifo inverted", [][]op{{add(0)}, {add(1)}, {get(1)}}, false},
		{"concurrent adds in either order", [][]op{{add(0), add(1)}, {get(1)}, {get(0)}}, true},
		{"dirty item queued again by Done", [][]op{{add(0)}, {get(0)}, {add(0)}, {length(0)}, {done(0)}, {length(1)}, {get(0)}}, true},
		{"dirty item handed out twice", [][]op{{add(0)}, {get(0)}, {add(0)}, {get(0)}}, false},
		{"dirty mark lost", [][]op{{add(0)}, {get(0)}, {add(0)}, {done(0)}, {length(0)}}, false},
		{"Len 0 after own Add", [][]op{{add(0)}, {length(0)}}, false},
		{"Len during Add", [][]op{{overlapping(add(0), 10)}, {length(0)}}, true},
		{"Get after shutdown drains", [][]op{{add(0)}, {shutDown}, {get(0)}, {getShutdown}}, true},
		{"shutdown Get while queued", [][]op{{add(0)}, {shutDown}, {getShutdown}}, false},
		{"Add after shutdown ignored", [][]op{{shutDown}, {add(0)}, {length(0)}, {getShutdown}}, true},
		{"rate limited after shutdown records nothing", [][]op{{shutDown}, {rateLimited(0)}, {requeues(0, 0)}}, true},
		{"rate limited dropped yet counted", [][]op{{overlapping(rateLimited(0), 10), shutDown}, {getShutdown}, {requeues(0, 1)}}, false},
		{"drain waits for Done", [][]op{{add(0)}, {get(0)}, append(drain(10), done(0))}, true},
		{"drain ends while processing", [][]op{{add(0)}, {get(0)}, drain(0), {done(0)}}, false},
		{"drain released by ShutDown", [][]op{{add(0)}, {get(0)}, append(drain(10), shutDown)}, true},
		{"drain ends while queued", [][]op{{add(0)}, drain(0), {get(0)}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ops := linStepOps(tt.steps)
			assert.Equalf(t, tt.want, checkLinHistory(t, linModel, ops), "history:\n%s", formatLinHistory(ops))
		})
	}
}

// TestLinearizabilityParkingModel checks the parking rules of the model on
// hand-written histories, among them the lost wakeup: a wake between an
// item's Get and its park must not leave it parked.
func TestLinearizabilityParkingModel(t *testing.T) {
	type op = linStep
	add := func(key int8) op { return op{in: linInput{kind: linAdd, key: key}} }
	get := func(key int8) op { return op{in: linInput{kind: linGet, key: -1}, out: linOutput{key: key}} }
	done := func(key int8) op { return op{in: linInput{kind: linDone, key: key}} }
	length := func(n int) op { return op{in: linInput{kind: linLen, key: -1}, out: linOutput{n: n}} }
	park := func(key int8, events uint8) op { return op{in: linInput{kind: linPark, key: key, events: events}} }
	wake := func(events uint8, n int) op {
		return op{in: linInput{kind: linWake, key: -1, events: events}, out: linOutput{n: n}}
	}
	wakeItem := func(key int8, ok bool) op {
		o := op{in: linInput{kind: linWakeItem, key: key}}
		if ok {
			o.out.n = 1
		}
		return o
	}
	remove := func(key int8, ok bool) op {
		o := op{in: linInput{kind: linRemove, key: key}}
		if ok {
			o.out.n = 1
		}
		return o
	}
	shutDown := op{in: linInput{kind: linShutDown, key: -1}}
	// parked returns the steps that park key until events, then after.
	parked := func(key int8, events uint8, after ...[]op) [][]op {
		return append([][]op{{add(key)}, {get(key)}, {park(key, events)}, {done(key)}}, after...)
	}
	tests := []struct {
		name  string
		steps [][]op
		want  bool
	}{
		{"parked items are not queued", [][]op{{add(0)}, {get(0)}, {park(0, 1)}, {done(0)}, {length(0)}}, true},
		{"a wake queues them", [][]op{{add(0)}, {get(0)}, {park(0, 1)}, {done(0)}, {wake(1, 1)}, {length(1)}, {get(0)}}, true},
		{"another event does not", [][]op{{add(0)}, {get(0)}, {park(0, 1)}, {done(0)}, {wake(2, 0)}, {length(0)}}, true},
		{"wake after Get, before Park: lost", [][]op{{add(0)}, {get(0)}, {wake(1, 0)}, {park(0, 1)}, {done(0)}, {length(0)}}, false},
		{"wake after Get, before Park: queued at Done", [][]op{{add(0)}, {get(0)}, {wake(1, 0)}, {park(0, 1)}, {done(0)}, {length(1)}}, true},
		{"wake before Get is waited for", [][]op{{wake(1, 0)}, {add(0)}, {get(0)}, {park(0, 1)}, {done(0)}, {length(0)}}, true},
		{"wake between Park and Done", [][]op{{add(0)}, {get(0)}, {park(0, 1)}, {wake(1, 1)}, {length(0)}, {done(0)}, {length(1)}}, true},
		{"a wake queues in park order", slices.Concat(parked(1, 1), parked(0, 1, []op{wake(1, 2)}, []op{get(1)}, []op{get(0)})), true},
		{"a wake queues in key order", slices.Concat(parked(1, 1), parked(0, 1, []op{wake(1, 2)}, []op{get(0)})), false},
		{"an add queues a parked item", parked(0, 1, []op{add(0)}, []op{length(1)}, []op{wake(1, 0)}), true},
		{"an add since Get wins", [][]op{{add(0)}, {get(0)}, {add(0)}, {park(0, 1)}, {done(0)}, {length(1)}}, true},
		{"WakeItem", parked(0, 1, []op{wakeItem(0, true)}, []op{wakeItem(0, false)}, []op{get(0)}), true},
		{"Remove", parked(0, 1, []op{remove(0, true)}, []op{wake(1, 0)}, []op{length(0)}), true},
		{"shutdown drops parked items", parked(0, 1, []op{shutDown}, []op{wake(1, 0)}, []op{length(0)}), true},
		{"concurrent wake and park: either order", [][]op{{add(0)}, {get(0)}, {park(0, 1), wake(1, 1)}, {done(0)}, {length(1)}}, true},
		{"concurrent wake and park: never lost", [][]op{{add(0)}, {get(0)}, {park(0, 1), wake(1, 0)}, {done(0)}, {length(0)}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ops := linStepOps(tt.steps)
			assert.Equalf(t, tt.want, checkLinHistory(t, linModel, ops), "history:\n%s", formatLinHistory(ops))
		})
	}
}

// linStep is one operation of a hand-written history.
type linStep struct {
	in      linInput
	out     linOutput
	overlap int // extra length of the interval, to overlap later operations
}

// linStepOps turns a hand-written history into operations: those of
// steps[i] start at time i*10, overlap each other, and return at i*10+5
// plus their overlap.
func linStepOps(steps [][]linStep) []porcupine.Operation {
	var ops []porcupine.Operation
	for i, step := range steps {
		for c, o := range step {
			ops = append(ops, porcupine.Operation{
				ClientId: c, Input: o.in, Output: o.out,
				Call: int64(i * 10), Return: int64(i*10 + 5 + o.overlap),
			})
		}
	}
	return ops
}

// The linearizability specification of Debounce and Reschedule on a clock
// that never moves: the histories' Debounce waits an hour, so a debounced
// add, like a Reschedule of an hour, leaves its key waiting until a call
// takes it back (Remove, a Reschedule of no delay, AddRateLimited, whose
// delay is zero) or a shutdown drops it. linDebounced wraps a sequential
// queue of the other models with the set of waiting keys.

// linDebounceQuiet is the histories' Debounce.Quiet; their clock never
// reaches it.
const linDebounceQuiet = time.Hour

// debounceConfig returns the setup's Debounce.
func (c linSetup) debounceConfig() Debounce {
	if !c.debounce {
		return Debounce{}
	}
	return Debounce{Quiet: linDebounceQuiet}
}

// linDebounceInner is what linDebounced needs of the queue it wraps.
type linDebounceInner[S any] interface {
	linSpec[S]
	// holdsReady reports whether key is queued, or processing and to be
	// queued again at Done.
	holdsReady(key int8) bool
	// withoutPark returns the state with key's park ended and nothing
	// queued for it: what an add does first on the priority queue.
	withoutPark(key int8) S
	isShutdown() bool
}

func (s fifoSpec) holdsReady(key int8) bool {
	bit := uint16(1) << key
	return s.dirty&bit != 0 || slices.Contains(s.fifo[:s.queued], key) && s.hidden&bit == 0
}

func (s fifoSpec) withoutPark(key int8) fifoSpec { s.unpark(key); return s }
func (s fifoSpec) isShutdown() bool              { return s.shutdown }

func (s prioSpec) holdsReady(key int8) bool {
	return s.dirty&(1<<key) != 0 || s.isQueued(key)
}

func (s prioSpec) withoutPark(key int8) prioSpec { s.unpark(key); return s }
func (s prioSpec) isShutdown() bool              { return s.shutdown }

// linDebounced is a sequential queue with Debounce on a clock that never
// moves. prio selects the priority queue's rules, where a key waits in the
// core: an add ends its park first, a Reschedule of a ready key changes
// nothing, and a Park of a waiting key does nothing. On the delaying
// layer the waiting keys are apart from the queue below, whose parks and
// queued keys they leave alone.
type linDebounced[S linDebounceInner[S]] struct {
	inner   S
	waiting uint8 // bit per key
	prio    bool
}

func (s linDebounced[S]) step(in linInput, out linOutput) (bool, linDebounced[S]) {
	key := in.key
	var bit uint8
	if key >= 0 && key < linMaxKeys {
		bit = 1 << key
	}
	switch in.kind {
	case linAdd, linAddAfterZero, linAddAfterNegative, linRescheduleLater:
		if bit == 0 {
			return false, s
		}
		debounced := in.kind != linRescheduleLater
		if s.inner.isShutdown() || s.inner.holdsReady(key) && (debounced || s.prio) {
			return true, s
		}
		if s.prio {
			s.inner = s.inner.withoutPark(key)
		}
		s.waiting |= bit
		return true, s
	case linRescheduleZero:
		if bit == 0 {
			return false, s
		}
		if !s.inner.isShutdown() {
			s.waiting &^= bit
		}
		ok, inner := s.inner.step(linInput{kind: linAdd, key: key}, out)
		s.inner = inner
		return ok, s
	case linAddRateLimited:
		if bit != 0 && !s.inner.isShutdown() {
			s.waiting &^= bit // its zero delay wins
		}
	case linRemove:
		if bit == 0 {
			return false, s
		}
		removedInner, inner := s.inner.step(in, linOutput{n: 1})
		removed := removedInner || s.waiting&bit != 0
		s.inner, s.waiting = inner, s.waiting&^bit
		return out.n == 1 == removed, s
	case linPark:
		if s.prio && s.waiting&bit != 0 {
			return true, s
		}
	case linShutDown, linDrainBegin:
		s.waiting = 0
	}
	ok, inner := s.inner.step(in, out)
	s.inner = inner
	return ok, s
}

func (s linDebounced[S]) hash() uint64 { return s.inner.hash() ^ uint64(s.waiting)<<56 }

func (s linDebounced[S]) String() string {
	var b strings.Builder
	b.WriteString(s.inner.String())
	if s.waiting != 0 {
		b.WriteString(" waiting {")
		sep := ""
		for key := range int8(linMaxKeys) {
			if s.waiting&(1<<key) != 0 {
				b.WriteString(sep + linKeyNames[key])
				sep = " "
			}
		}
		b.WriteString("}")
	}
	return b.String()
}

// linDebounceModel returns the specification of c's queue with Debounce.
func linDebounceModel(c linSetup) porcupine.Model {
	switch {
	case c.priority:
		return linModelOf(linDebounced[prioSpec]{inner: newLinPrioSpec(c.fairness), prio: true})
	case c.custom:
		panic(fmt.Sprintf("linDebounceModel: no model for %+v", c))
	}
	return linModelOf(linDebounced[fifoSpec]{})
}

// The invariant checkers, one per concept, as container/heap's tests check
// a heap's. The model, fuzz and stress tests call them after every step.
// The checkers of the orders, the groups and the parking are in the test
// files of their source files.

// verifyQueue checks the invariants of q's core; see verifyCoreLocked. It
// takes the queue's lock.
func verifyQueue[T comparable](q *Typed[T]) error {
	q.core.mu.Lock()
	defer q.core.mu.Unlock()
	return verifyCoreLocked(&q.core)
}

// verifyCoreLocked checks a core, whose lock the caller holds: the item
// table is sound; every record is processing or has something pending;
// the hand-out order lists exactly the queued records, each once, as the
// order's own checker says; an item is in the delays' heap if and only if
// its record waits for a delay, and in the parking if and only if it
// waits for an event, and neither after a shutdown; the counts match the
// records; enough sleeping Get callers are being woken for the queued
// items; and the in-flight list holds only items being processed.
func verifyCoreLocked[T comparable](c *core[T]) error {
	if err := table.Verify(&c.items); err != nil {
		return err
	}
	delayed := func(e *table.Entry[T, record]) bool {
		return c.delays != nil && c.delays.heap.Contains(ownDelay(e.Item))
	}
	if c.delays != nil {
		if err := delayheap.Verify(c.delays.heap); err != nil {
			return fmt.Errorf("delay heap: %w", err)
		}
	}
	queued, processing, waiting, parked := map[int32]bool{}, 0, 0, map[int32]bool{}
	for id := range c.items.IDLimit() {
		if !c.items.IsLive(id) {
			continue
		}
		e := c.items.At(id)
		r := e.Val
		if !r.processing && r.pending == pendingNone {
			return fmt.Errorf("item %v: a record neither processing nor pending", e.Item)
		}
		if r.processing {
			processing++
		}
		if !r.processing && r.pending == pendingReady {
			queued[id] = true
		}
		if delayed(e) != (r.pending == pendingDelay) {
			return fmt.Errorf("item %v: pending %d, waiting for a delay %v", e.Item, r.pending, delayed(e))
		}
		switch r.pending {
		case pendingDelay:
			waiting++
		case pendingParked:
			parked[id] = true
		}
	}
	if c.delays != nil {
		own, added := 0, 0
		for _, w := range c.delays.heap.First(c.delays.heap.Len()) {
			if w.Item.added {
				added++
			} else {
				own++
			}
		}
		if waiting != own {
			return fmt.Errorf("%d records wait for a delay, the heap holds %d", waiting, own)
		}
		if c.shuttingDown.Load() && added > 0 {
			return fmt.Errorf("shut down with %d delayed adds", added)
		}
	}
	if c.shuttingDown.Load() && (waiting > 0 || len(parked) > 0) {
		return fmt.Errorf("shut down with %d items waiting for a delay and %d parked", waiting, len(parked))
	}
	if err := verifyParking(c, parked); err != nil {
		return err
	}
	if err := verifyTrace(c); err != nil {
		return err
	}
	if len(queued) != c.queued || processing != c.processing {
		return fmt.Errorf("records: %d queued, %d processing; counts: %d, %d", len(queued), processing, c.queued, c.processing)
	}
	var err error
	switch o := c.order.(type) {
	case *fifoOrder:
		err = verifyListed(o.list, &o.links, queued, "the FIFO")
	case *storageOrder[T]:
		if stored := o.storage.Len() - len(o.removed); stored != c.queued {
			err = fmt.Errorf("storage holds %d items and %d removed ones, %d are queued", o.storage.Len(), len(o.removed), c.queued)
		}
		for item := range o.removed {
			if e, _ := c.items.Lookup(item, c.items.Hash(item)); e != nil && !e.Val.processing && e.Val.pending == pendingReady {
				err = fmt.Errorf("item %v is queued and marked removed in the storage", item)
			}
		}
	case *priorityOrder[T]:
		err = verifyPriorityOrder(o, queued)
	case *groupedFIFO[T]:
		var listed map[int32]bool
		if listed, err = verifyGroupedList(o.list, "the FIFO"); err == nil && !maps.Equal(listed, queued) {
			err = fmt.Errorf("the FIFO lists %d ids, %d are queued", len(listed), len(queued))
		}
	default:
		err = fmt.Errorf("unknown order %T", o)
	}
	if err != nil {
		return err
	}
	if err := verifyFlight(c); err != nil {
		return err
	}
	if err := verifyGroups(c, queued); err != nil {
		return err
	}
	return verifySleepers(&c.sleepers, c.wakeupsPending, c.queued-c.slotWaits, c.shuttingDown.Load() && c.queued == 0)
}

// verifyListed checks that list is sound and lists exactly the ids in want.
func verifyListed(ids list.IDs, links *list.Links, want map[int32]bool, name string) error {
	listed, err := list.Verify(ids, links)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if len(listed) != len(want) {
		return fmt.Errorf("%s lists %d ids, %d are queued", name, len(listed), len(want))
	}
	for _, id := range listed {
		if !want[id] {
			return fmt.Errorf("%s lists id %d, which is not queued", name, id)
		}
	}
	return nil
}

// verifySleepers checks the Get callers of a queue with queued items:
// none asleep while an item waits for a wakeup, and none after a shutdown.
func verifySleepers(line *lock.Line, wakeupsPending, queued int, shuttingDown bool) error {
	if err := line.Verify(); err != nil {
		return err
	}
	if wakeupsPending < 0 {
		return fmt.Errorf("%d wakeups pending", wakeupsPending)
	}
	if line.Len() > 0 && queued > wakeupsPending {
		return fmt.Errorf("%d items queued, only %d Get callers woken, %d more asleep", queued, wakeupsPending, line.Len())
	}
	if shuttingDown && line.Len() > 0 {
		return fmt.Errorf("shutting down, yet %d sleeping Get callers not woken", line.Len())
	}
	return nil
}

// verifyFlight checks the list of items in flight: it is sound, and it
// holds only items being processed, each once, oldest first, each marked
// linked, and no other id is marked linked.
func verifyFlight[T comparable](c *core[T]) error {
	f := &c.flight
	ids, err := list.Verify(f.list, &f.links)
	if err != nil {
		return fmt.Errorf("in-flight list: %w", err)
	}
	for i, id := range ids {
		if !c.items.IsLive(id) || !c.items.At(id).Val.processing {
			return fmt.Errorf("in-flight id %d is not being processed", id)
		}
		if int(id) >= f.handouts.Len() || !f.handouts.At(int(id)).linked {
			return fmt.Errorf("in-flight id %d is not marked linked", id)
		}
		if i > 0 && f.since(id).Before(f.since(ids[i-1])) {
			return fmt.Errorf("in-flight id %d was handed out before the one ahead of it", id)
		}
	}
	linked := 0
	for i := range f.handouts.Len() {
		if f.handouts.At(i).linked {
			linked++
		}
	}
	if linked != len(ids) {
		return fmt.Errorf("%d ids marked linked, %d in the in-flight list", linked, len(ids))
	}
	if !f.tracking && len(ids) > 0 {
		return fmt.Errorf("%d items in flight listed without tracking", len(ids))
	}
	return nil
}

// verifyTrace checks the core's links: each entry is of a held item, not
// empty, with at most MaxTraceLinks links per set, and links of a hand-out
// only while it is processed; each delayed add's links have a delayed add
// in the delays.
func verifyTrace[T comparable](c *core[T]) error {
	if c.trace == nil {
		return nil
	}
	for id, t := range c.trace.items {
		if !c.items.IsLive(id) {
			return fmt.Errorf("links of id %d, which holds no item", id)
		}
		e := c.items.At(id)
		switch {
		case t.next.empty() && t.served.empty():
			return fmt.Errorf("item %v: an empty links entry", e.Item)
		case len(t.next.links) > MaxTraceLinks || len(t.served.links) > MaxTraceLinks:
			return fmt.Errorf("item %v: %d and %d links", e.Item, len(t.next.links), len(t.served.links))
		case !t.served.empty() && !e.Val.processing:
			return fmt.Errorf("item %v: links of a hand-out, not processing", e.Item)
		case !t.next.empty() && e.Val.pending == pendingNone:
			return fmt.Errorf("item %v: links of a next hand-out, none pending", e.Item)
		}
	}
	for item := range c.trace.delayed {
		if c.delays == nil || !c.delays.heap.Contains(delayedAdd(item)) {
			return fmt.Errorf("item %v: links of a delayed add that is not waiting", item)
		}
	}
	return nil
}
