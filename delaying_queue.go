package workqueue

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// TypedDelayingQueue's row of the capabilities table (capabilities.go).
var (
	_ addStopper        = (*TypedDelayingQueue[int])(nil)
	_ parkingQueue[int] = (*TypedDelayingQueue[int])(nil)
	_ rescheduler[int]  = (*TypedDelayingQueue[int])(nil)
	_ retryAdder[int]   = (*TypedDelayingQueue[int])(nil)
	_ additions[int]    = (*TypedDelayingQueue[int])(nil)
)

// TypedDelayingQueueConfig configures [NewTypedDelayingQueueWithConfig]; the
// zero value is valid, and shared fields are as in [TypedQueueConfig].
type TypedDelayingQueueConfig[T comparable] struct {
	Name            string
	Logger          *slog.Logger
	MetricsProvider MetricsProvider
	Clock           clock.WithTicker
	MaxParkTime     time.Duration
	Queue           TypedInterface[T] // takes the items whose delay ended; nil means a new Typed
	AddCancelsDelay bool              // see Add; by default an item's waiting add stays
	GroupLimits     *GroupLimits[T]
	Debounce        Debounce // see Add; merged with a pending delay; over an outside Queue, debounces adds of ready items too
}

// NewTypedDelayingQueue is NewTypedDelayingQueueWithConfig of a zero config.
func NewTypedDelayingQueue[T comparable]() *TypedDelayingQueue[T] {
	return NewTypedDelayingQueueWithConfig(TypedDelayingQueueConfig[T]{})
}

// TypedNewDelayingQueue is NewTypedDelayingQueue under client-go's other name.
//
// Deprecated: use NewTypedDelayingQueue.
func TypedNewDelayingQueue[T comparable]() *TypedDelayingQueue[T] {
	return NewTypedDelayingQueue[T]()
}

// NewTypedDelayingQueueWithConfig returns a delaying queue; it panics on a
// negative MaxParkTime, a bad Debounce, or GroupLimits with Queue or no Group.
func NewTypedDelayingQueueWithConfig[T comparable](config TypedDelayingQueueConfig[T]) *TypedDelayingQueue[T] {
	config.MetricsProvider = withDefaultProvider(config.MetricsProvider)
	if config.Clock == nil {
		config.Clock = clock.RealClock{}
	}
	maxPark := maxParkTime("NewTypedDelayingQueueWithConfig", config.MaxParkTime)
	debounce := config.Debounce.checked("NewTypedDelayingQueueWithConfig")
	if config.Logger == nil {
		config.Logger = slog.Default()
	}
	if config.Queue == nil {
		config.Queue = NewTypedWithConfig(TypedQueueConfig[T]{
			Name:            config.Name,
			MetricsProvider: config.MetricsProvider,
			Clock:           config.Clock,
			Logger:          config.Logger,
			MaxParkTime:     maxPark,
			GroupLimits:     config.GroupLimits,
		})
	} else if config.GroupLimits != nil {
		panic("workqueue: NewTypedDelayingQueueWithConfig: GroupLimits with a Queue; set it in the Queue's own config")
	}
	q := &TypedDelayingQueue[T]{
		queue:           config.Queue,
		addCancelsDelay: config.AddCancelsDelay,
		debounce:        debounce,
	}
	if typed, ok := config.Queue.(*Typed[T]); ok {
		q.typed = typed
		q.Base = Base[T]{top: q, c: &typed.core, delayedAdds: true, provider: config.MetricsProvider, name: config.Name}
		typed.core.attachDelays(func(item T) { typed.addLocked(item, typed.core.items.Hash(item)) }, config.MetricsProvider, config.Name)
		return q
	}
	q.own = &ownDelays[T]{queue: config.Queue, logger: config.Logger, maxPark: maxPark}
	q.Base = Base[T]{top: q, below: q.own, provider: config.MetricsProvider, name: config.Name}
	q.own.delays = newDelayer[T](config.Clock, config.MetricsProvider, config.Name)
	q.own.delays.start(&q.own.mu, q.queue.Add, q.own.finished, q.own.logger)
	return q
}

// TypedDelayingQueue is a [TypedDelayingInterface] with [Base]'s methods and
// Reschedule, safe for concurrent use.
type TypedDelayingQueue[T comparable] struct {
	Base[T]
	queue TypedInterface[T] // the config's
	// typed is queue when it is this package's Typed: the delayed adds
	// then wait in its core's delays, under its core's lock, so that an
	// item is always in one of the two for Remove and Snapshot, and one
	// goroutine ends every delay and park. own holds them otherwise.
	typed *Typed[T]
	own   *ownDelays[T]
	// addCancelsDelay and debounce are the config's.
	addCancelsDelay bool
	debounce        Debounce
}

// ownDelays is the delaying layer over a queue from outside this package,
// whose lock it cannot take, and the queue below that layer's Base: the
// delayed adds wait in delays, which mu guards. Their goroutine holds mu
// while it moves ready items to the queue, so that an item is always in
// one of the two for Remove and Snapshot.
type ownDelays[T comparable] struct {
	queue   TypedInterface[T]
	logger  *slog.Logger
	maxPark time.Duration // for Park over a queue that cannot park
	mu      sync.Mutex
	delays  *delayer[T]
	// stopped is set when the shutdown begins or the goroutine is told to
	// stop: nothing more waits for a delay. dropped counts the waiting
	// items that dropped, for the log.
	stopped bool
	dropped int
}

// Add adds item at once as [Typed.Add] does; with AddCancelsDelay it also ends
// its wait for a delay, with Debounce item waits for its burst's end.
func (q *TypedDelayingQueue[T]) Add(item T) {
	switch {
	case q.debounce.enabled():
		q.addDebounced(item)
	case q.addCancelsDelay:
		q.addCancellingDelay(item, false)
	default:
		q.queue.Add(item)
	}
}

// addCancellingDelay takes item out of the waiting items and adds it as
// one step: the delay goroutine, which moves ready items under the same
// lock, cannot add it in between. With retry, an accepted add counts as a
// retry.
func (q *TypedDelayingQueue[T]) addCancellingDelay(item T, retry bool) {
	q.addCancellingDelayLinked(item, retry, nil)
}

// addCancellingDelayLinked is addCancellingDelay that links the add to
// link, if not nil, over this package's Typed.
func (q *TypedDelayingQueue[T]) addCancellingDelayLinked(item T, retry bool, link *TraceLink) {
	t := q.typed
	if t == nil {
		add := q.own.queue.Add
		if retry {
			add = q.own.addNow
		}
		q.own.addCancellingDelay(item, add)
		return
	}
	hash := t.core.items.Hash(item)
	t.core.mu.Lock()
	defer t.core.mu.Unlock()
	t.core.removeDelayedAdd(item)
	if t.addLocked(item, hash) {
		if retry {
			t.core.delays.countRetry()
			t.core.carryServed(item, false)
		}
		if link != nil {
			t.core.noteLink(item, hash, *link)
		}
	}
}

// AddAfter adds item after duration; if it waits already, the earlier time
// wins. A duration of zero or less is Add.
func (q *TypedDelayingQueue[T]) AddAfter(item T, duration time.Duration) {
	if duration <= 0 && q.debounce.enabled() {
		q.addDebounced(item)
		return
	}
	q.addRetry(item, duration)
}

// addRetry is AddAfter without Debounce, for AddRateLimited.
func (q *TypedDelayingQueue[T]) addRetry(item T, duration time.Duration) {
	switch {
	case duration <= 0 && (q.addCancelsDelay || q.debounce.enabled()):
		q.addCancellingDelay(item, true)
	case duration <= 0:
		q.addNow(item)
	default:
		q.wait(item, func(d *delayer[delayKey[T]]) bool {
			d.countRetry()
			first := d.add(delayedAdd(item), duration)
			q.typed.core.carryServed(item, true)
			return first
		}, func(d *delayer[T]) bool {
			d.countRetry()
			return d.add(item, duration)
		})
	}
}

// addNow adds item at once and counts the retry if the add was accepted.
func (q *TypedDelayingQueue[T]) addNow(item T) {
	t := q.typed
	if t == nil {
		q.own.addNow(item)
		return
	}
	hash := t.core.items.Hash(item)
	t.core.mu.Lock()
	defer t.core.mu.Unlock()
	if t.addLocked(item, hash) {
		t.core.delays.countRetry()
		t.core.carryServed(item, false)
	}
}

// addDebounced is Add under Debounce: one more add of item's burst,
// unless the queue below holds it ready already.
func (q *TypedDelayingQueue[T]) addDebounced(item T) { q.addDebouncedLinked(item, nil) }

// addDebouncedLinked is addDebounced that links the add to link, if not
// nil, over this package's Typed.
func (q *TypedDelayingQueue[T]) addDebouncedLinked(item T, link *TraceLink) {
	q.wait(item, func(d *delayer[delayKey[T]]) bool {
		hash := q.typed.core.items.Hash(item)
		first := !q.typed.holdsReadyLocked(item, hash) && d.debounce(delayedAdd(item), q.debounce)
		if link != nil {
			q.typed.core.noteLink(item, hash, *link)
		}
		return first
	}, func(d *delayer[T]) bool {
		return d.debounce(item, q.debounce)
	})
}

// Reschedule is AddAfter where the latest call wins: it replaces item's
// pending delay, even an earlier one, or the rest of its Debounce burst; zero
// or less adds item at once, undebounced, cancelling its delay. It undoes no
// add that made item ready and does nothing once a shutdown has begun.
func (q *TypedDelayingQueue[T]) Reschedule(item T, duration time.Duration) {
	if duration <= 0 {
		q.addCancellingDelay(item, true)
		return
	}
	q.wait(item, func(d *delayer[delayKey[T]]) bool {
		d.countRetry()
		first := d.reschedule(delayedAdd(item), duration)
		q.typed.core.carryServed(item, true)
		return first
	}, func(d *delayer[T]) bool {
		d.countRetry()
		return d.reschedule(item, duration)
	})
}

// wait puts item in the delays, with their lock held, unless a shutdown
// has begun: by core over this package's Typed, by own over a queue from
// outside it. Each reports whether item is now the first to be ready, and
// then the delay goroutine looks at the heap again. An item put in the
// delays before the shutdown began is dropped by it: the same outcome as
// an add that came after.
func (q *TypedDelayingQueue[T]) wait(item T, core func(*delayer[delayKey[T]]) bool, own func(*delayer[T]) bool) {
	t := q.typed
	if t == nil {
		q.own.wait(own)
		return
	}
	t.core.mu.Lock()
	defer t.core.mu.Unlock() // a panic (an item that cannot be hashed) leaves it unlocked
	if !t.core.shuttingDown.Load() && core(t.core.delays) {
		t.core.delays.poke()
	}
}

// stopAdds begins the underlying queue's shutdown, when it is one of this
// package's, without waiting for a drain, and drops the delayed items at
// the same instant, so that no call sees the one without the other.
// Another queue begins its shutdown only in its ShutDown or
// ShutDownWithDrain; until then Add and AddAfter(item, 0) go on adding.
func (q *TypedDelayingQueue[T]) stopAdds() {
	if q.typed != nil {
		q.typed.stopAdds() // drops the delayed adds, which wait in its core
		return
	}
	q.own.stopAdds()
}

// The methods of ownDelays are those of the delaying layer over a queue
// from outside this package; Base calls them.

func (o *ownDelays[T]) Add(item T)         { o.queue.Add(item) }
func (o *ownDelays[T]) Len() int           { return o.queue.Len() }
func (o *ownDelays[T]) Get() (T, bool)     { return o.queue.Get() }
func (o *ownDelays[T]) Done(item T)        { o.queue.Done(item) }
func (o *ownDelays[T]) ShuttingDown() bool { return o.queue.ShuttingDown() }
func (o *ownDelays[T]) SetGroupLimit(group string, limit int) {
	if g, ok := o.queue.(groupLimiter); ok {
		g.SetGroupLimit(group, limit)
	}
}

func (o *ownDelays[T]) GetContext(ctx context.Context) (T, error) {
	return getContext(ctx, o.queue)
}

func (o *ownDelays[T]) GetWithInfoContext(ctx context.Context) (T, ItemInfo, error) {
	return getWithInfo(ctx, o.queue)
}

// addCancellingDelay takes item out of the waiting items and adds it with
// add as one step, under mu: the delay goroutine cannot add it in between.
func (o *ownDelays[T]) addCancellingDelay(item T, add func(T)) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.delays.remove(item)
	add(item)
}

// addNow adds item at once and counts the retry if the add will be
// accepted: the queue does not report that, so its flag is read before
// the add.
func (o *ownDelays[T]) addNow(item T) {
	if !o.queue.ShuttingDown() {
		o.delays.countRetry()
	}
	o.queue.Add(item)
}

func (o *ownDelays[T]) wait(own func(*delayer[T]) bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.stopped && !o.queue.ShuttingDown() && own(o.delays) {
		o.delays.poke()
	}
}

func (o *ownDelays[T]) Remove(item T) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	removed := o.delays.remove(item)
	if r, ok := o.queue.(remover[T]); ok && r.Remove(item) {
		removed = true
	}
	return removed
}

// park parks item in the queue below if it can, and otherwise adds it
// after MaxParkTime, or after backoff if longer.
func (o *ownDelays[T]) park(item T, backoff func() time.Duration, events []string) {
	if p, ok := parkingBelow(o.queue); ok {
		p.park(item, backoff, events)
		return
	}
	wait := o.maxPark
	if backoff != nil {
		wait = max(backoff(), wait)
	}
	o.wait(func(d *delayer[T]) bool {
		d.countRetry()
		return d.add(item, wait)
	})
}

func (o *ownDelays[T]) WakeFunc(event string, accept func(item T) bool) int {
	if p, ok := parkingBelow(o.queue); ok {
		return p.WakeFunc(event, accept)
	}
	return 0
}

func (o *ownDelays[T]) WakeItem(item T) bool {
	if p, ok := parkingBelow(o.queue); ok {
		return p.WakeItem(item)
	}
	return false
}

func (o *ownDelays[T]) ShutDown() {
	o.stopAdds()
	o.queue.ShutDown()
	o.stopWaiting()
}

func (o *ownDelays[T]) ShutDownWithDrain() {
	o.stopAdds()
	o.stopWaiting()
	o.queue.ShutDownWithDrain()
}

// stopAdds begins the shutdown of a queue below that can begin one apart
// from its drain, and drops the delayed items at the same instant.
func (o *ownDelays[T]) stopAdds() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if s, ok := o.queue.(addStopper); ok {
		s.stopAdds()
		o.dropWaitingLocked()
	}
}

func (o *ownDelays[T]) stopWaiting() {
	o.dropWaiting()
	o.delays.stop()
	o.mu.Lock()
	dropped := o.dropped
	o.dropped = 0
	o.mu.Unlock()
	if dropped > 0 {
		o.logger.Debug("workqueue: dropped items still waiting for their delay at shutdown", "count", dropped)
	}
}

// finished ends the delay goroutine when the underlying queue was shut
// down on its own: nothing it would add would be accepted any more.
func (o *ownDelays[T]) finished() bool {
	if o.queue.ShuttingDown() {
		o.dropWaiting()
		return true
	}
	return false
}

// dropWaiting stops the delays, so later AddAfter calls with a delay do
// nothing, and drops the waiting items, counting them for the shutdown's
// log line.
func (o *ownDelays[T]) dropWaiting() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.dropWaitingLocked()
}

func (o *ownDelays[T]) dropWaitingLocked() {
	o.stopped = true
	o.dropped += o.delays.dropAll(nil)
}

// Snapshot lists the delayed items with the queue's own view.
func (o *ownDelays[T]) Snapshot(n int) Snapshot[T] {
	o.mu.Lock() // held while the queue below takes its part: one instant
	defer o.mu.Unlock()
	var s Snapshot[T]
	if inner, ok := o.queue.(snapshotter[T]); ok {
		s = inner.Snapshot(n)
	} else {
		s = Snapshot[T]{Taken: o.delays.clock.Now(), ShuttingDown: o.queue.ShuttingDown(), Depth: o.queue.Len()}
	}
	waiting, delayed := snapshotDelays(o.delays, n, func(item T) T { return item })
	s.Waiting += waiting // the queue below may wait for parks' backoffs
	s.Delayed = soonestDelayed(append(s.Delayed, delayed...), n)
	return s
}
