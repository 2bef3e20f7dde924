package workqueue

import (
	"context"
	"errors"
	"fmt"
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

// TypedDelayingInterface is client-go's delaying queue interface.
type TypedDelayingInterface[T comparable] interface {
	TypedInterface[T]
	AddAfter(item T, duration time.Duration)
}

// TypedDelayingQueueConfig configures [NewTypedDelayingQueueWithConfig]. The
// zero value is valid.
type TypedDelayingQueueConfig[T comparable] struct {
	// Name, Logger, MetricsProvider, Clock and MaxParkTime are as in
	// [TypedQueueConfig].
	Name            string
	Logger          *slog.Logger
	MetricsProvider MetricsProvider
	Clock           clock.WithTicker
	MaxParkTime     time.Duration
	// Queue receives the items whose delay has ended; nil means a new
	// Typed with this config's settings.
	Queue TypedInterface[T]
	// AddCancelsDelay makes an Add (or an AddAfter of no delay) of an
	// item waiting for its delay take it out of the waiting items, so it
	// is handed out once, now, as on [TypedPriorityQueue]. By default, as
	// in client-go, the waiting add stays and adds the item again when
	// its delay ends.
	AddCancelsDelay bool
	// GroupLimits is [TypedQueueConfig.GroupLimits] for the queue this
	// layer makes; it cannot be set with Queue.
	GroupLimits *GroupLimits[T]
	// Debounce, if set, makes an Add (or an AddAfter of no delay) of an
	// item not ready already wait for the end of its burst of adds, as
	// [Debounce] says, merged with the delay it waits for already, so that
	// AddCancelsDelay changes nothing. Over a Queue from outside this
	// package, an item queued there is debounced too.
	Debounce Debounce
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

// NewTypedDelayingQueueWithConfig returns a new delaying queue. It panics if
// MaxParkTime is negative, if Debounce is not valid (see [Debounce]), or if
// GroupLimits is set with Queue or has a nil Group.
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
		queue:    config.Queue,
		provider: config.MetricsProvider,
		name:     config.Name,
		logger:   config.Logger,
		maxPark:  maxPark,

		addCancelsDelay: config.AddCancelsDelay,
		debounce:        debounce,
	}
	if typed, ok := config.Queue.(*Typed[T]); ok {
		q.typed = typed
		typed.core.attachDelays(func(item T) { typed.addLocked(item, typed.core.items.Hash(item)) }, config.MetricsProvider, config.Name)
		return q
	}
	q.delays = newDelayer[T](config.Clock, config.MetricsProvider, config.Name)
	q.delays.start(&q.mu, q.queue.Add, q.finished, q.logger)
	return q
}

// TypedDelayingQueue is a [TypedDelayingInterface] that adds Reschedule,
// GetContext, Remove, Snapshot, Park, Wake, WakeFunc and WakeItem, and in
// its config Debounce; its methods are safe for concurrent use. The zero
// value is not usable: make one with [NewTypedDelayingQueue]. Over a config
// Queue from outside this package, the additions do what that queue
// supports: GetContext returns an error wrapping
// [errors.ErrUnsupported], Park adds the item after MaxParkTime, the others
// cover the delayed items or nothing.
type TypedDelayingQueue[T comparable] struct {
	queue TypedInterface[T]
	// typed is queue when it is this package's Typed: the delayed adds
	// then wait in its core's delays, under its core's lock, so that an
	// item is always in one of the two for Remove and Snapshot, and one
	// goroutine ends every delay and park.
	typed *Typed[T]
	// provider and name are the config's, for MetricsConfig.
	provider MetricsProvider
	name     string
	logger   *slog.Logger
	maxPark  time.Duration // for Park over a queue that cannot park
	// addCancelsDelay and debounce are the config's.
	addCancelsDelay bool
	debounce        Debounce

	// Over a queue from outside this package (typed nil), the delayed adds
	// wait in delays, which mu guards. Their goroutine holds mu while it
	// moves ready items to the queue, so that an item is always in one of
	// the two for Remove and Snapshot.
	mu     sync.Mutex
	delays *delayer[T]
	// stopped is set when the shutdown begins or the goroutine is told to
	// stop: nothing more waits for a delay. dropped counts the waiting
	// items that dropped, for the log.
	stopped bool
	dropped int
}

// Add adds item at once; see [Typed.Add]. With AddCancelsDelay it also
// takes item out of the items waiting for their delay; with Debounce it
// adds item at the end of its burst of adds instead.
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
	if t := q.typed; t != nil {
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
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.delays.remove(item)
	if retry {
		q.addNow(item)
		return
	}
	q.queue.Add(item)
}

// Len returns the number of ready items; see [Typed.Len].
func (q *TypedDelayingQueue[T]) Len() int { return q.queue.Len() }

// SetGroupLimit sets a group's limit in the queue below; see
// [Typed.SetGroupLimit]. Over a config Queue from outside this package it
// calls that queue's SetGroupLimit(string, int) if it has one, and
// otherwise does nothing.
func (q *TypedDelayingQueue[T]) SetGroupLimit(group string, limit int) {
	if q.typed != nil {
		q.typed.SetGroupLimit(group, limit)
	} else if g, ok := q.queue.(groupLimiter); ok {
		g.SetGroupLimit(group, limit)
	}
}

// Get hands out the next ready item; see [Typed.Get].
func (q *TypedDelayingQueue[T]) Get() (T, bool) { return q.queue.Get() }

// Done marks item as done processing; see [Typed.Done].
func (q *TypedDelayingQueue[T]) Done(item T) { q.queue.Done(item) }

// ShuttingDown reports whether a shutdown has begun.
func (q *TypedDelayingQueue[T]) ShuttingDown() bool { return q.queue.ShuttingDown() }

// GetContext is Get with a context; see [Typed.GetContext].
func (q *TypedDelayingQueue[T]) GetContext(ctx context.Context) (T, error) {
	if q.typed != nil {
		return q.typed.GetContext(ctx)
	}
	return getContext(ctx, q.queue)
}

// Remove also takes back a delayed item; see [Typed.Remove].
func (q *TypedDelayingQueue[T]) Remove(item T) bool {
	if t := q.typed; t != nil {
		hash := t.core.items.Hash(item)
		t.core.mu.Lock()
		defer t.core.mu.Unlock()
		removed := t.core.removeDelayedAdd(item)
		return t.removeLocked(item, hash) || removed
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	removed := q.delays.remove(item)
	if r, ok := q.queue.(remover[T]); ok && r.Remove(item) {
		removed = true
	}
	return removed
}

// getContext calls q's GetContext, if it has one.
func getContext[T comparable](ctx context.Context, q TypedInterface[T]) (item T, err error) {
	if g, ok := q.(contextGetter[T]); ok {
		return g.GetContext(ctx)
	}
	return item, fmt.Errorf("workqueue: GetContext needs an underlying queue with a GetContext method, %T has none: %w", q, errors.ErrUnsupported)
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
// A queue from outside this package does not report that, so its flag is
// read before the add.
func (q *TypedDelayingQueue[T]) addNow(item T) {
	if t := q.typed; t != nil {
		hash := t.core.items.Hash(item)
		t.core.mu.Lock()
		defer t.core.mu.Unlock()
		if t.addLocked(item, hash) {
			t.core.delays.countRetry()
			t.core.carryServed(item, false)
		}
		return
	}
	if !q.queue.ShuttingDown() {
		q.delays.countRetry()
	}
	q.queue.Add(item)
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

// Reschedule makes item ready duration from now, replacing the delay it
// waits for, even an earlier one, or the rest of its Debounce burst: the
// latest call wins, where AddAfter keeps the earliest. With a duration of
// zero or less it takes item out of the waiting items and adds it at once,
// never debounced. Like AddAfter, it does not take back an add that has
// made item ready. After a shutdown has begun it does nothing.
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

// wait puts item in the delays, with mu held, unless a shutdown has
// begun: by core over this package's Typed, by own over a queue from
// outside it. Each reports whether item is now the first to be ready, and
// then the delay goroutine looks at the heap again. An item put in the
// delays before the shutdown began is dropped by it: the same outcome as
// an add that came after.
func (q *TypedDelayingQueue[T]) wait(item T, core func(*delayer[delayKey[T]]) bool, own func(*delayer[T]) bool) {
	if t := q.typed; t != nil {
		t.core.mu.Lock()
		defer t.core.mu.Unlock() // a panic (an item that cannot be hashed) leaves it unlocked
		if !t.core.shuttingDown.Load() && core(t.core.delays) {
			t.core.delays.poke()
		}
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.stopped && !q.queue.ShuttingDown() && own(q.delays) {
		q.delays.poke()
	}
}

// Park holds item until one of events; see [Typed.Park].
func (q *TypedDelayingQueue[T]) Park(item T, events ...string) { q.park(item, nil, events) }

// park is Park with a backoff, for the rate-limiting layer.
func (q *TypedDelayingQueue[T]) park(item T, backoff func() time.Duration, events []string) {
	if q.typed != nil {
		q.typed.park(item, backoff, events)
		return
	}
	if p, ok := q.queue.(parkingQueue[T]); ok {
		p.park(item, backoff, events)
		return
	}
	wait := q.maxPark
	if backoff != nil {
		wait = max(backoff(), wait)
	}
	q.AddAfter(item, wait)
}

// Wake ends the parks that wait for event; see [Typed.Wake].
func (q *TypedDelayingQueue[T]) Wake(event string) int { return q.WakeFunc(event, nil) }

// WakeFunc ends the parks that accept accepts; see [Typed.WakeFunc].
func (q *TypedDelayingQueue[T]) WakeFunc(event string, accept func(item T) bool) int {
	if q.typed != nil {
		return q.typed.WakeFunc(event, accept)
	}
	if p, ok := q.queue.(parkingQueue[T]); ok {
		return p.WakeFunc(event, accept)
	}
	return 0
}

// WakeItem ends item's park; see [Typed.WakeItem].
func (q *TypedDelayingQueue[T]) WakeItem(item T) bool {
	if q.typed != nil {
		return q.typed.WakeItem(item)
	}
	if p, ok := q.queue.(parkingQueue[T]); ok {
		return p.WakeItem(item)
	}
	return false
}

// ShutDown also drops delayed items; see [Typed.ShutDown].
func (q *TypedDelayingQueue[T]) ShutDown() {
	if q.typed != nil {
		q.typed.ShutDown()
		return
	}
	q.stopAdds()
	q.queue.ShutDown()
	q.stopWaiting()
}

// ShutDownWithDrain also drops delayed items; see [Typed.ShutDownWithDrain].
func (q *TypedDelayingQueue[T]) ShutDownWithDrain() {
	if q.typed != nil {
		q.typed.ShutDownWithDrain()
		return
	}
	q.stopAdds()
	q.stopWaiting()
	q.queue.ShutDownWithDrain()
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
	q.mu.Lock()
	defer q.mu.Unlock()
	if s, ok := q.queue.(addStopper); ok {
		s.stopAdds()
		q.dropWaitingLocked()
	}
}

func (q *TypedDelayingQueue[T]) stopWaiting() {
	q.dropWaiting()
	q.delays.stop()
	q.mu.Lock()
	dropped := q.dropped
	q.dropped = 0
	q.mu.Unlock()
	if dropped > 0 {
		q.logger.Debug("workqueue: dropped items still waiting for their delay at shutdown", "count", dropped)
	}
}

// finished ends the delay goroutine when the underlying queue was shut
// down on its own: nothing it would add would be accepted any more.
func (q *TypedDelayingQueue[T]) finished() bool {
	if q.queue.ShuttingDown() {
		q.dropWaiting()
		return true
	}
	return false
}

// dropWaiting stops the delays, so later AddAfter calls with a delay do
// nothing, and drops the waiting items, counting them for the shutdown's
// log line.
func (q *TypedDelayingQueue[T]) dropWaiting() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.dropWaitingLocked()
}

func (q *TypedDelayingQueue[T]) dropWaitingLocked() {
	q.stopped = true
	q.dropped += q.delays.dropAll(nil)
}

// Snapshot lists delayed items too; see [Typed.Snapshot].
func (q *TypedDelayingQueue[T]) Snapshot(n int) Snapshot[T] {
	if q.typed != nil {
		return q.typed.Snapshot(n) // the delayed adds wait in its core
	}
	q.mu.Lock() // held while the queue below takes its part: one instant
	defer q.mu.Unlock()
	var s Snapshot[T]
	if inner, ok := q.queue.(snapshotter[T]); ok {
		s = inner.Snapshot(n)
	} else {
		s = Snapshot[T]{Taken: q.delays.clock.Now(), ShuttingDown: q.queue.ShuttingDown(), Depth: q.queue.Len()}
	}
	waiting, delayed := snapshotDelays(q.delays, n, func(item T) T { return item })
	s.Waiting += waiting // the queue below may wait for parks' backoffs
	s.Delayed = soonestDelayed(append(s.Delayed, delayed...), n)
	return s
}
