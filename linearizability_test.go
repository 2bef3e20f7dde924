package workqueue

import (
	"context"
	"errors"
	"flag"
	"fmt"
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
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"
)

// The linearizability test checks that the queues are linearizable: that every history of
// concurrent calls that a queue produces could also have been produced by
// the calls one at a time, each taking effect at some instant between its
// call and its return, on the obvious sequential queue (linState). Each
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
// The test is in four files: this one holds the test, the recording of
// histories and the wiring to porcupine; linearizability_model_test.go the
// sequential specification and its tests (and
// linearizability_priority_test.go the priority queue's); and
// linearizability_broken_test.go the reference queues, right and
// deliberately broken, and the tests that show the checker catches them.

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

var _ DelayedItemsMetricsProvider = linMetricsProvider{}

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
