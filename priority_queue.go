package workqueue

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"
)

// AddOpts says how [TypedPriorityQueue.AddWithOpts] adds its items. The
// zero value adds them at once at priority 0, as Add does.
type AddOpts struct {
	// After delays the add: the items become ready once it has passed on
	// the queue's clock. Zero or less adds them at once.
	After time.Duration
	// RateLimited delays the add by the delay the queue's rate limiter
	// gives each item, which records a failure for it, as AddRateLimited
	// does. With After also set, the shorter of the two delays wins.
	RateLimited bool
	// Priority is the items' priority: higher priorities are handed out
	// first. Nil means 0.
	Priority *int
}

// TypedPriorityQueueConfig configures a queue made by
// [NewTypedPriorityQueue]. The zero value is valid.
type TypedPriorityQueueConfig[T comparable] struct {
	// Name identifies the queue in metrics. A queue without a name records
	// no metrics.
	Name string

	// MetricsProvider creates the queue's metrics: the Kubernetes ones of
	// [MetricsProvider], the delayed items of
	// [DelayedItemsMetricsProvider], and the depth by priority of
	// [PriorityMetricsProvider] when the provider offers them. A nil
	// provider records nothing and costs nothing.
	MetricsProvider MetricsProvider

	// Clock decides when delays end and MaxWait passes. Nil means the real
	// clock.
	Clock clock.WithTicker

	// Logger receives the queue's rare log lines: items dropped at
	// shutdown (debug level). Nil means slog.Default().
	Logger *slog.Logger

	// Fairness, if not empty, shares each priority level fairly among the
	// keys these functions give the items: within a level, the first
	// function's keys take turns, one item each, round-robin; within one
	// such key the second function's keys take turns, and so on (for
	// example cluster, then namespace). An item whose key has nothing
	// queued at its level waits for at most one item of each other key
	// with items queued there, at each dimension, whatever their backlog.
	// Empty means first-in, first-out within each level. The functions
	// are called with the queue's lock held, once per dimension whenever
	// an item is queued at a level; they must return the same key for the
	// same item every time, and must neither panic nor call the queue.
	Fairness []func(item T) string

	// MaxWait, if positive, bounds how long a ready item waits behind
	// higher priorities: an item that has been ready for MaxWait or longer
	// is handed out before any other, the oldest such item first,
	// whatever its priority and fairness key. Such an item is handed out
	// out of turn: its keys keep their places in the fairness rotations.
	// It costs a clock reading per Get and per item that becomes ready. Zero means no bound: a higher
	// priority always goes first.
	MaxWait time.Duration
}

// TypedPriorityQueue is a rate-limiting work queue that hands out items of
// higher priority first, first-in first-out within one priority, or fairly
// among keys with [TypedPriorityQueueConfig.Fairness]. It satisfies
// [TypedRateLimitingQueue] (and so client-go's
// TypedRateLimitingInterface), and adds [TypedPriorityQueue.AddWithOpts]
// and [TypedPriorityQueue.GetWithPriority], the shape of controller-runtime's
// priority queue.
//
// An item is held once, however often it is added:
//   - a re-add keeps the highest priority and the earliest ready time
//     asked for;
//   - an item whose priority rises goes behind the items already queued
//     at its new priority; a re-add at the same or a lower priority does
//     not move it;
//   - an item is never handed to two workers at once: one added while it
//     is processed is queued again when it is marked done, at the highest
//     priority asked for meanwhile;
//   - Len counts only items ready to be handed out.
//
// Shutdown follows the package's other queues: from ShutDown or
// ShutDownWithDrain on, every add does nothing, items waiting for their
// delay are dropped, and Get keeps handing out what is queued.
//
// Create one with [NewTypedPriorityQueue]; the zero value is not usable.
// All methods are safe for concurrent use, and each takes effect at one
// instant between its call and its return (Get and ShutDownWithDrain may
// block before that instant).
type TypedPriorityQueue[T comparable] struct {
	// mu guards everything below but the shutdown flag's reads.
	mu      yieldingMutex
	drained sync.Cond

	// items holds a record of every item that is queued, processing or
	// waiting for its delay. Invariant (verifyPriorityQueue checks it): an
	// item is in a level's lists if and only if its record is ready and
	// not processing, and in waiting if and only if its record says so.
	items itemTable[T, prioRecord]
	// levels holds the levels, lowest priority first; the empty ones are
	// kept for reuse up to maxIdleLevels.
	levels     []*prioLevel
	idleLevels int
	queued     int // items in the levels' lists
	processing int // items handed out and not yet done
	fairness   []func(T) string

	// With Fairness, leaves holds by id the leaf each queued item is
	// listed in; with MaxWait, ages links the queued items in the order
	// they became ready, oldest first. They are kept beside the records,
	// not in them, so that a queue with neither option keeps a record of
	// 48 bytes instead of 72: 64.9 instead of 88.9 bytes of heap per item
	// with a million queued (the bench module's BenchmarkMemory), at the
	// same speed within the noise of the cycle and parallel cases.
	leaves            chunked[*fairNode]
	ages              chunked[ageLink]
	maxWait           int64
	ageHead, ageTail  int32
	waiting           *delayHeap[T]
	clock             clock.WithTicker
	epoch             time.Time
	logger            *slog.Logger
	rateLimiter       TypedRateLimiter[T]
	sleepers          waiterLine
	wakeupsPending    int
	drainWaiters      int
	drainReleased     bool
	shuttingDown      atomic.Bool
	adds              uint64
	flight            flightList
	metrics           *queueMetrics[T]
	retries           CounterMetric
	delayed           SettableGaugeMetric
	depthByPriority   PriorityGaugeMetric
	wake              chan struct{}
	stopOnce          sync.Once
	stopCh, loopDone  chan struct{}
	droppedAtShutdown int
}

// prioRecord is what the queue knows of an item.
type prioRecord struct {
	// While queued: the item's neighbours in its leaf's list, -1 for none.
	prev, next int32
	processing bool
	pending    pendingAdd
	// priority is the pending add's priority: the highest asked for since
	// the item was last handed out.
	priority int
}

// ageLink is a queued item's place in the age list, with MaxWait: its
// neighbours (-1 for none) and when it became ready (nanoseconds since the
// epoch).
type ageLink struct {
	prev, next int32
	readySince int64
}

// pendingAdd is what an item waits for apart from being processed.
type pendingAdd uint8

const (
	// pendingNone: nothing; the item is being processed.
	pendingNone pendingAdd = iota
	// pendingReady: to be handed out: queued, or, while processing, to be
	// queued by Done.
	pendingReady
	// pendingDelay: waiting for its delay in the heap.
	pendingDelay
)

// maxIdleLevels is how many empty levels the queue keeps for reuse, so that
// a level that empties and fills again, as in an Add/Get/Done loop, costs
// no allocation and keeps its fairness keys.
const maxIdleLevels = 16

// prioLevel holds the queued items of one priority.
type prioLevel struct {
	priority int
	root     fairNode
}

// NewTypedPriorityQueue returns a new priority queue configured by config
// that takes the delays of AddRateLimited from rateLimiter. It starts one
// goroutine, which queues items when their delay ends, and, with a name
// and a metrics provider, one that refreshes the unfinished-work metrics;
// ShutDown and ShutDownWithDrain stop both and wait for them to exit. It
// panics if rateLimiter is nil, if a Fairness function is nil, or if
// MaxWait is negative.
func NewTypedPriorityQueue[T comparable](rateLimiter TypedRateLimiter[T], config TypedPriorityQueueConfig[T]) *TypedPriorityQueue[T] {
	if rateLimiter == nil {
		panic("workqueue: NewTypedPriorityQueue needs a rate limiter, got nil")
	}
	if config.MaxWait < 0 {
		panic(fmt.Sprintf("workqueue: NewTypedPriorityQueue: MaxWait must not be negative, got %v", config.MaxWait))
	}
	for i, f := range config.Fairness {
		if f == nil {
			panic(fmt.Sprintf("workqueue: NewTypedPriorityQueue: Fairness[%d] is nil", i))
		}
	}
	if config.Clock == nil {
		config.Clock = clock.RealClock{}
	}
	if config.Logger == nil {
		config.Logger = slog.Default()
	}
	q := &TypedPriorityQueue[T]{
		items:       newItemTable[T, prioRecord](),
		fairness:    slices.Clone(config.Fairness),
		maxWait:     int64(config.MaxWait),
		ageHead:     -1,
		ageTail:     -1,
		waiting:     newDelayHeap[T](),
		clock:       config.Clock,
		epoch:       config.Clock.Now(),
		logger:      config.Logger,
		rateLimiter: rateLimiter,
		flight:      newFlightList(),
		wake:        make(chan struct{}, 1),
		stopCh:      make(chan struct{}),
		loopDone:    make(chan struct{}),
	}
	q.drained.L = &q.mu
	q.metrics = newQueueMetrics[T](config.MetricsProvider, config.Name, config.Clock, &q.mu)
	q.retries, q.delayed = delayingMetrics(config.MetricsProvider, config.Name)
	q.depthByPriority = priorityDepthMetric(config.MetricsProvider, config.Name)
	go q.waitingLoop()
	return q
}

// Add adds item at once at priority 0; it is shorthand for
// AddWithOpts(AddOpts{}, item).
func (q *TypedPriorityQueue[T]) Add(item T) {
	hash := q.items.hash(item) // before the lock: the hot path's one hash
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.shuttingDown.Load() {
		q.addLocked(item, hash, 0, 0) // no delay: the delay goroutine need not look
	}
}

// AddAfter adds item at priority 0 once duration has passed; it is
// shorthand for AddWithOpts(AddOpts{After: duration}, item).
func (q *TypedPriorityQueue[T]) AddAfter(item T, duration time.Duration) {
	q.AddWithOpts(AddOpts{After: duration}, item)
}

// AddRateLimited adds item at priority 0 after the delay the rate limiter
// gives it; it is shorthand for AddWithOpts(AddOpts{RateLimited: true},
// item). After a shutdown has begun it does nothing, and does not consult
// the rate limiter, so no failure is recorded for an item that will never
// be retried.
func (q *TypedPriorityQueue[T]) AddRateLimited(item T) {
	q.AddWithOpts(AddOpts{RateLimited: true}, item)
}

// AddWithOpts adds each of items as opts says, merging it with what the
// queue holds of it already: the highest priority and the earliest ready
// time win, an item whose priority rises goes behind the items queued at
// its new priority, and an item being processed is queued again when it is
// marked done. All items are added at one instant. After a shutdown has
// begun it does nothing. It never blocks on a worker or on the delay
// goroutine.
func (q *TypedPriorityQueue[T]) AddWithOpts(opts AddOpts, items ...T) {
	priority := 0
	if opts.Priority != nil {
		priority = *opts.Priority
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.shuttingDown.Load() {
		return
	}
	wakeLoop := false
	for _, item := range items {
		after := opts.After
		if opts.RateLimited {
			if d := q.rateLimiter.When(item); after <= 0 || d < after {
				after = d
			}
		}
		if q.addLocked(item, q.items.hash(item), priority, after) {
			wakeLoop = true
		}
	}
	if wakeLoop {
		select {
		case q.wake <- struct{}{}:
		default:
		}
	}
}

// addLocked merges one add into item's record and reports whether the
// delay goroutine must look at the heap again. The caller holds mu.
func (q *TypedPriorityQueue[T]) addLocked(item T, hash uint32, priority int, after time.Duration) (wakeLoop bool) {
	record, id := q.items.lookup(item, hash)
	if after > 0 {
		if q.retries != nil {
			q.retries.Inc()
		}
		switch {
		case record == nil:
			q.items.insert(item, hash, prioRecord{pending: pendingDelay, priority: priority, prev: -1, next: -1})
		case record.val.pending == pendingReady: // ready already: the earliest wins
			q.raise(record, id, priority)
			return false
		case record.val.pending == pendingDelay:
			record.val.priority = max(record.val.priority, priority)
		default: // processing
			record.val.pending, record.val.priority = pendingDelay, priority
		}
		isFirst := q.waiting.add(item, q.readyAt(after))
		q.setDelayedGauge()
		return isFirst
	}
	switch {
	case record == nil:
		_, id = q.items.insert(item, hash, prioRecord{pending: pendingReady, priority: priority, prev: -1, next: -1})
		q.makeQueued(id)
	case record.val.pending == pendingReady:
		q.raise(record, id, priority)
		return false
	case record.val.pending == pendingDelay:
		q.waiting.remove(item)
		q.setDelayedGauge()
		record.val.pending, record.val.priority = pendingReady, max(record.val.priority, priority)
		if !record.val.processing {
			q.makeQueued(id)
		}
	default: // processing
		record.val.pending, record.val.priority = pendingReady, priority
	}
	q.countAdd(item, q.items.at(id).val.priority)
	return false
}

// countAdd records an add that made an item ready.
func (q *TypedPriorityQueue[T]) countAdd(item T, priority int) {
	q.adds++
	if q.metrics != nil {
		q.metrics.add(item)
	}
	if q.depthByPriority != nil {
		q.depthByPriority.Inc(priority)
	}
}

// raise sets the priority of the ready item with record and id to priority
// if that is higher, moving a queued item to the back of its new level.
func (q *TypedPriorityQueue[T]) raise(record *tableEntry[T, prioRecord], id int32, priority int) {
	old := record.val.priority
	if priority <= old {
		return
	}
	if q.depthByPriority != nil {
		q.depthByPriority.Dec(old)
		q.depthByPriority.Inc(priority)
	}
	if record.val.processing {
		record.val.priority = priority
		return
	}
	q.dequeue(id, q.leafOf(id)) // before the raise, which changes the leaf; the age list keeps its place
	q.items.at(id).val.priority = priority
	q.enqueue(id)
}

// makeQueued queues the item with id, ready and not processing, at the
// back of its level and, with MaxWait, of the age list, as ready since now:
// only then does it read the clock.
func (q *TypedPriorityQueue[T]) makeQueued(id int32) {
	q.enqueue(id)
	if q.maxWait > 0 {
		for q.ages.len() <= int(id) {
			q.ages.push(ageLink{prev: -1, next: -1})
		}
		*q.ages.at(int(id)) = ageLink{prev: q.ageTail, next: -1, readySince: q.sinceEpoch()}
		if q.ageTail >= 0 {
			q.ages.at(int(q.ageTail)).next = id
		} else {
			q.ageHead = id
		}
		q.ageTail = id
	}
}

// enqueue puts the item with id, ready and not processing, at the back of
// its priority's level: of its leaf's list, whose fairness keys join their
// rotations at the back if they had nothing queued. It wakes a Get caller
// if one should take the item.
func (q *TypedPriorityQueue[T]) enqueue(id int32) {
	record := q.items.at(id)
	level := q.level(record.val.priority)
	node := &level.root
	for d, key := range q.fairness {
		node = node.child(key(record.item), d+1 == len(q.fairness))
	}
	if len(q.fairness) > 0 {
		for q.leaves.len() <= int(id) {
			q.leaves.push(nil)
		}
		*q.leaves.at(int(id)) = node
	}
	record.val.prev, record.val.next = node.tail, -1
	if node.tail >= 0 {
		q.items.at(node.tail).val.next = id
	} else {
		node.head = id
	}
	node.tail = id
	for n := node; n != nil; n = n.parent {
		n.n++
	}
	if level.root.n == 1 {
		q.idleLevels--
	}
	q.queued++
	q.wakeOne()
}

// leafOf returns the leaf whose list holds the queued item with id.
func (q *TypedPriorityQueue[T]) leafOf(id int32) *fairNode {
	if len(q.fairness) > 0 {
		return *q.leaves.at(int(id))
	}
	return &q.level(q.items.at(id).val.priority).root
}

// dequeue takes the queued item with id out of leaf, the leaf that lists
// it; keys left with nothing queued leave their rotations.
func (q *TypedPriorityQueue[T]) dequeue(id int32, leaf *fairNode) {
	if len(q.fairness) > 0 {
		*q.leaves.at(int(id)) = nil
	}
	record := &q.items.at(id).val
	if record.prev >= 0 {
		q.items.at(record.prev).val.next = record.next
	} else {
		leaf.head = record.next
	}
	if record.next >= 0 {
		q.items.at(record.next).val.prev = record.prev
	} else {
		leaf.tail = record.prev
	}
	record.prev, record.next = -1, -1
	root := leaf
	for n := leaf; n != nil; n = n.parent {
		n.n--
		if n.n == 0 && n.parent != nil {
			n.parent.deactivate(n)
		}
		root = n
	}
	q.queued--
	if root.n == 0 {
		q.idleLevels++
		q.dropIdleLevels()
	}
}

// unqueue takes the queued item with id out of leaf, the leaf that lists
// it, and out of the age list.
func (q *TypedPriorityQueue[T]) unqueue(id int32, leaf *fairNode) {
	q.dequeue(id, leaf)
	if q.maxWait > 0 {
		link := q.ages.at(int(id))
		if link.prev >= 0 {
			q.ages.at(int(link.prev)).next = link.next
		} else {
			q.ageHead = link.next
		}
		if link.next >= 0 {
			q.ages.at(int(link.next)).prev = link.prev
		} else {
			q.ageTail = link.prev
		}
		*link = ageLink{prev: -1, next: -1}
	}
}

// level returns the level of priority, making it if needed.
func (q *TypedPriorityQueue[T]) level(priority int) *prioLevel {
	i, found := slices.BinarySearchFunc(q.levels, priority, func(l *prioLevel, p int) int {
		switch {
		case l.priority < p:
			return -1
		case l.priority > p:
			return 1
		}
		return 0
	})
	if found {
		return q.levels[i]
	}
	l := &prioLevel{priority: priority, root: fairNode{leaf: len(q.fairness) == 0, head: -1, tail: -1}}
	q.levels = slices.Insert(q.levels, i, l)
	q.idleLevels++
	return l
}

// dropIdleLevels forgets the empty levels once more than maxIdleLevels are
// kept, so that many distinct priorities do not pin memory.
func (q *TypedPriorityQueue[T]) dropIdleLevels() {
	if q.idleLevels <= maxIdleLevels {
		return
	}
	q.levels = slices.DeleteFunc(q.levels, func(l *prioLevel) bool { return l.root.n == 0 })
	q.idleLevels = 0
}

// wakeOne wakes a sleeping Get caller if one should take a newly queued
// item: if more items are queued than wakeups are pending.
func (q *TypedPriorityQueue[T]) wakeOne() {
	if q.sleepers.n > 0 && q.queued > q.wakeupsPending {
		q.wakeupsPending++
		q.sleepers.wakeFirst()
	}
}

// Len returns the number of items ready to be handed out by Get. Items
// waiting for their delay, and items added again while being processed,
// are not counted.
func (q *TypedPriorityQueue[T]) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.queued
}

// Get is GetWithPriority without the priority.
func (q *TypedPriorityQueue[T]) Get() (item T, shutdown bool) {
	item, _, err := q.get(context.Background())
	return item, err != nil
}

// GetWithPriority blocks until an item is ready, marks it as being
// processed and returns it with the priority it was queued at: the item
// with the highest priority, the one that became ready first among them
// (or the next in turn with Fairness), unless an item has waited longer
// than MaxWait. The caller must call Done with the item when it has
// finished with it. After a shutdown has begun it keeps handing out queued
// items; once none is left it returns shutdown true at once.
func (q *TypedPriorityQueue[T]) GetWithPriority() (item T, priority int, shutdown bool) {
	item, priority, err := q.get(context.Background())
	return item, priority, err != nil
}

// GetContext is Get with a context; see [Typed.GetContext].
func (q *TypedPriorityQueue[T]) GetContext(ctx context.Context) (item T, err error) {
	if err := ctx.Err(); err != nil {
		return item, err
	}
	item, _, err = q.get(ctx)
	return item, err
}

func (q *TypedPriorityQueue[T]) get(ctx context.Context) (item T, priority int, err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for q.queued == 0 {
		if q.shuttingDown.Load() {
			return item, 0, ErrShutDown
		}
		if q.drained.L == nil {
			panic("workqueue: Get on a zero TypedPriorityQueue; make one with NewTypedPriorityQueue")
		}
		if err := sleepInLine(ctx, &q.mu, &q.sleepers, &q.wakeupsPending, q.wakeOne); err != nil {
			return item, 0, err
		}
	}
	id, leaf := q.next()
	q.unqueue(id, leaf)
	record := q.items.at(id)
	record.val.processing, record.val.pending = true, pendingNone
	q.processing++
	item, priority = record.item, record.val.priority
	if q.flight.tracking {
		q.flight.link(id, q.clock.Now())
	}
	if q.metrics != nil {
		q.metrics.get(item)
	}
	if q.depthByPriority != nil {
		q.depthByPriority.Dec(priority)
	}
	return item, priority, nil
}

// next returns the id of the item to hand out next, at least one being
// queued, and the leaf that lists it, and turns the fairness rotations it
// passes, unless the item is overdue.
func (q *TypedPriorityQueue[T]) next() (int32, *fairNode) {
	if q.maxWait > 0 && q.sinceEpoch()-q.ages.at(int(q.ageHead)).readySince >= q.maxWait {
		return q.ageHead, q.leafOf(q.ageHead) // out of turn: the rotations stay as they are
	}
	var level *prioLevel
	for i := len(q.levels) - 1; ; i-- {
		if level = q.levels[i]; level.root.n > 0 {
			break
		}
	}
	node := &level.root
	for !node.leaf {
		node = node.first
	}
	node.turn()
	return node.head, node
}

// Done marks item as done processing. If it was added while being
// processed, it is queued again, even after a shutdown has begun. Done for
// an item that is not being processed does nothing.
func (q *TypedPriorityQueue[T]) Done(item T) {
	hash := q.items.hash(item)
	q.mu.Lock()
	defer q.mu.Unlock()
	record, id := q.items.lookup(item, hash)
	if record == nil || !record.val.processing {
		return
	}
	if q.flight.tracking {
		q.flight.unlink(id)
	}
	record.val.processing = false
	q.processing--
	switch record.val.pending {
	case pendingReady:
		q.makeQueued(id)
	case pendingNone:
		q.forget(id)
	}
	if q.metrics != nil {
		q.metrics.done(item)
	}
}

// forget removes the record with id, neither queued, processing nor
// waiting, and releases a drain if the queue is idle.
func (q *TypedPriorityQueue[T]) forget(id int32) {
	q.items.remove(id)
	if q.items.len() == 0 {
		if q.flight.tracking {
			q.flight.links.reset()
		}
		q.leaves.shrink()
		q.ages.shrink()
	}
	if q.drainWaiters > 0 && q.items.len() == 0 {
		q.drained.Broadcast()
	}
}

// Remove takes item back: a queued item or one waiting for its delay
// leaves the queue, and an item being processed that was added again
// meanwhile is not queued again by Done; its failures are forgotten as by
// Forget. It reports whether it took anything back; an item being
// processed keeps being processed.
func (q *TypedPriorityQueue[T]) Remove(item T) bool {
	hash := q.items.hash(item)
	q.mu.Lock()
	defer q.mu.Unlock()
	q.rateLimiter.Forget(item)
	record, id := q.items.lookup(item, hash)
	if record == nil || record.val.pending == pendingNone {
		return false
	}
	switch {
	case record.val.pending == pendingDelay:
		q.waiting.remove(item)
		q.setDelayedGauge()
	case !record.val.processing:
		q.unqueue(id, q.leafOf(id))
		fallthrough
	default:
		if q.metrics != nil {
			q.metrics.remove(item)
		}
		if q.depthByPriority != nil {
			q.depthByPriority.Dec(record.val.priority)
		}
	}
	record = q.items.at(id)
	record.val.pending = pendingNone
	if !record.val.processing {
		q.forget(id)
	}
	return true
}

// Forget tells the rate limiter that item is finished with, so its failure
// history is cleared. The queue itself is unchanged: Done must still be
// called.
func (q *TypedPriorityQueue[T]) Forget(item T) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.rateLimiter.Forget(item)
}

// NumRequeues returns how many failures the rate limiter counts for item.
func (q *TypedPriorityQueue[T]) NumRequeues(item T) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.rateLimiter.NumRequeues(item)
}

// ShuttingDown reports whether a shutdown has begun.
func (q *TypedPriorityQueue[T]) ShuttingDown() bool { return q.shuttingDown.Load() }

// ShutDown makes the queue ignore further adds, drops the items waiting for
// their delay, wakes every Get caller (which then drain what is queued and
// return shutdown true), releases every ShutDownWithDrain caller, and stops
// the queue's goroutines, waiting for them to exit. Calling it again does
// nothing.
func (q *TypedPriorityQueue[T]) ShutDown() {
	q.mu.Lock()
	q.stopAddsLocked()
	q.drainReleased = true
	q.drained.Broadcast()
	q.mu.Unlock()
	q.stopGoroutines()
}

// ShutDownWithDrain makes the queue ignore further adds, drops the items
// waiting for their delay, and waits until no item is queued or being
// processed, including items added while being processed and queued again
// by Done. Workers must keep calling Get and Done meanwhile, or it waits
// forever. A concurrent ShutDown releases it at once; after ShutDown it
// returns at once. It stops the queue's goroutines before it returns. It
// panics on a zero TypedPriorityQueue.
func (q *TypedPriorityQueue[T]) ShutDownWithDrain() {
	if q.drained.L == nil {
		panic("workqueue: ShutDownWithDrain on a zero TypedPriorityQueue; make one with NewTypedPriorityQueue")
	}
	q.mu.Lock()
	q.stopAddsLocked()
	q.drainWaiters++
	for !q.drainReleased && q.items.len() > 0 {
		q.drained.Wait()
	}
	q.drainWaiters--
	q.mu.Unlock()
	q.stopGoroutines()
}

// stopAddsLocked is the instant a shutdown begins: adds are ignored from
// then on, the items waiting for their delay are dropped, and sleeping Get
// callers are woken.
func (q *TypedPriorityQueue[T]) stopAddsLocked() {
	if !q.shuttingDown.Load() {
		q.shuttingDown.Store(true)
		q.droppedAtShutdown = q.waiting.len()
		for q.waiting.len() > 0 {
			item := q.waiting.popFirst()
			record, id := q.items.lookup(item, q.items.hash(item))
			record.val.pending = pendingNone
			if !record.val.processing {
				q.forget(id)
			}
		}
		q.setDelayedGauge()
	}
	for q.sleepers.n > 0 {
		q.wakeupsPending++
		q.sleepers.wakeFirst()
	}
}

func (q *TypedPriorityQueue[T]) stopGoroutines() {
	q.stopOnce.Do(func() {
		close(q.stopCh)
		<-q.loopDone
		if q.droppedAtShutdown > 0 {
			q.logger.Debug("workqueue: dropped items still waiting for their delay at shutdown", "count", q.droppedAtShutdown)
		}
	})
	<-q.loopDone
	if q.metrics != nil {
		q.metrics.stop()
	}
}

// sinceEpoch returns the clock's current time as an offset from the epoch.
func (q *TypedPriorityQueue[T]) sinceEpoch() int64 {
	return int64(q.clock.Since(q.epoch))
}

// readyAt returns the offset from the epoch at which a delay that starts now
// ends, clamped so that huge delays do not overflow.
func (q *TypedPriorityQueue[T]) readyAt(delay time.Duration) int64 {
	return readyAfter(q.sinceEpoch(), delay)
}

func (q *TypedPriorityQueue[T]) setDelayedGauge() {
	if q.delayed != nil {
		q.delayed.Set(float64(q.waiting.len()))
	}
}

// waitingLoop queues the items whose delay has ended, until the queue is
// shut down.
func (q *TypedPriorityQueue[T]) waitingLoop() {
	defer close(q.loopDone)
	runDelayLoop(q.clock, q.sinceEpoch, q.moveReady, func() bool { return false }, q.wake, q.stopCh)
}

// moveReady queues up to waitingBatch items whose delay has ended. It
// returns when to look next (at most a heartbeat from now) and whether the
// batch was full, so that more may be ready.
func (q *TypedPriorityQueue[T]) moveReady() (next int64, more bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.sinceEpoch()
	moved := 0
	for ; moved < waitingBatch && q.waiting.len() > 0 && q.waiting.firstReadyAt() <= now; moved++ {
		item := q.waiting.popFirst()
		record, id := q.items.lookup(item, q.items.hash(item))
		record.val.pending = pendingReady
		if !record.val.processing {
			q.makeQueued(id)
		}
		q.countAdd(item, record.val.priority)
	}
	if moved > 0 {
		q.setDelayedGauge()
	}
	return nextLook(q.waiting, now, moved)
}
