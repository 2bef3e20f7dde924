package workqueue

import (
	"context"
	"log/slog"
	"time"

	"github.com/go-workqueue/workqueue/internal/list"
	"k8s.io/utils/clock"
)

// Typed's row of the capabilities table (capabilities.go).
var (
	_ addStopper        = (*Typed[int])(nil)
	_ parkingQueue[int] = (*Typed[int])(nil)
	_ additions[int]    = (*Typed[int])(nil)
)

// TypedInterface is client-go's work queue interface; see [Typed].
type TypedInterface[T comparable] interface {
	Add(item T)
	Len() int
	Get() (item T, shutdown bool)
	Done(item T)
	ShutDown()
	ShutDownWithDrain()
	ShuttingDown() bool
}

// TypedQueueConfig configures [NewTypedWithConfig]. The zero value is valid.
type TypedQueueConfig[T comparable] struct {
	Name            string           // the queue's name in metrics
	MetricsProvider MetricsProvider  // nil means SetProvider's; none records no metrics
	Clock           clock.WithTicker // nil means the real clock
	Logger          *slog.Logger     // nil means slog.Default()
	MaxParkTime     time.Duration    // see Typed.Park; 0 means DefaultMaxParkTime
	Queue           Queue[T]         // custom storage; nil means FIFO
	// GroupLimits, if not nil, limits the items of each group in flight
	// at once; it cannot be set with Queue.
	GroupLimits *GroupLimits[T]
}

// Typed is a work queue with the guarantees listed in the package
// documentation; its methods are safe for concurrent use. The zero value is
// not usable: make one with [NewTyped] or [NewTypedWithConfig].
type Typed[T comparable] struct {
	core core[T]
	// storage is the order of custom storage, nil for FIFO: it is told of
	// adds of queued items, and its Push may panic.
	storage *storageOrder[T]
}

// NewTyped is shorthand for NewTypedWithConfig(TypedQueueConfig[T]{}).
func NewTyped[T comparable]() *Typed[T] {
	return NewTypedWithConfig(TypedQueueConfig[T]{})
}

// NewTypedWithConfig returns a new queue. It panics if MaxParkTime < 0, or if
// GroupLimits is set with a nil Group or with Queue.
func NewTypedWithConfig[T comparable](config TypedQueueConfig[T]) *Typed[T] {
	config.MetricsProvider = withDefaultProvider(config.MetricsProvider)
	if config.Clock == nil {
		config.Clock = clock.RealClock{}
	}
	maxPark := maxParkTime("NewTypedWithConfig", config.MaxParkTime)
	if config.Logger == nil {
		config.Logger = slog.Default()
	}
	q := &Typed[T]{}
	var order handOutOrder
	var prefilled []T
	groups := newGroupSet("NewTypedWithConfig", config.GroupLimits)
	switch {
	case groups != nil && config.Queue != nil:
		panic("workqueue: NewTypedWithConfig: GroupLimits cannot be set with a custom Queue, which cannot pass over the items of a group at its limit")
	case groups != nil:
		grouped := newGroupedFIFO(groups)
		q.core.groups, q.core.grouped, order = groups, grouped, grouped
	case config.Queue == nil:
		order = &fifoOrder{list: list.New()}
	default:
		for config.Queue.Len() > 0 {
			prefilled = append(prefilled, config.Queue.Pop())
		}
		q.storage = &storageOrder[T]{storage: config.Queue, items: &q.core.items}
		order = q.storage
	}
	q.core.init(order, config.MetricsProvider, config.Name, config.Clock, config.Logger, maxPark)
	for _, item := range prefilled {
		q.Add(item)
	}
	q.core.start()
	return q
}

// Add marks item as needing processing; after a shutdown it does nothing.
func (q *Typed[T]) Add(item T) {
	hash := q.core.items.Hash(item)
	q.core.mu.Lock()
	defer q.core.mu.Unlock()
	q.addLocked(item, hash)
}

// addLocked is Add with mu held and item's hash computed; it reports
// whether the add was accepted, that is whether no shutdown had begun, so
// that the delaying layer counts only accepted retries.
func (q *Typed[T]) addLocked(item T, hash uint32) (accepted bool) {
	if q.core.shuttingDown.Load() {
		return false
	}
	entry, id := q.core.items.Lookup(item, hash)
	switch {
	case entry == nil && q.storage != nil:
		q.insertStored(item, hash)
	case entry == nil:
		q.core.insertQueued(item, hash)
	case entry.Val.pending == pendingReady: // queued, or to be by Done
		if !entry.Val.processing && q.storage != nil {
			q.storage.touch(id)
		}
		return true
	default: // processing, parked, or waiting for a park's backoff
		if !entry.Val.processing {
			q.core.queueHeld(id) // first: if custom storage's Push panics, nothing changed
		}
		q.core.cancelWait(id)
		entry.Val.pending = pendingReady
	}
	q.core.countAdd(item)
	return true
}

// insertStored is insertQueued into custom storage, whose Push may panic:
// then the add has not happened, and the record filed for it must go.
func (q *Typed[T]) insertStored(item T, hash uint32) {
	stored := false
	defer func() {
		if !stored {
			_, id := q.core.items.Lookup(item, hash)
			q.core.items.Remove(id)
		}
	}()
	q.core.insertQueued(item, hash)
	stored = true
}

// Len returns the number of items waiting to be handed out.
func (q *Typed[T]) Len() int { return q.core.length() }

// Get blocks until an item is queued, marks it as being processed and returns
// it; the caller must call Done with it. Once a shutdown has left no item, it
// returns shutdown true.
func (q *Typed[T]) Get() (item T, shutdown bool) {
	item, err := q.get(context.Background())
	return item, err != nil
}

// GetContext is Get that returns ctx.Err(), taking no item, if ctx ends first,
// and [ErrShutDown] where Get returns shutdown true.
func (q *Typed[T]) GetContext(ctx context.Context) (item T, err error) {
	if err := ctx.Err(); err != nil {
		return item, err
	}
	return q.get(ctx)
}

func (q *Typed[T]) get(ctx context.Context) (item T, err error) {
	q.core.mu.Lock()
	defer q.core.mu.Unlock()
	item, _, err = q.core.get(ctx, "Typed; make one with NewTyped or NewTypedWithConfig")
	return item, err
}

// Done marks item as done processing and queues it again, even after a
// shutdown has begun, if it was added meanwhile. Done of an item not being
// processed does nothing.
func (q *Typed[T]) Done(item T) { q.core.doneItem(item) }

// Remove takes item back and reports whether it took anything: a queued or
// parked item leaves the queue; one being processed is not queued again or
// parked at Done.
func (q *Typed[T]) Remove(item T) bool {
	hash := q.core.items.Hash(item)
	q.core.mu.Lock()
	defer q.core.mu.Unlock()
	return q.removeLocked(item, hash)
}

// removeLocked is Remove with mu held and item's hash computed.
func (q *Typed[T]) removeLocked(item T, hash uint32) bool {
	entry, id := q.core.items.Lookup(item, hash)
	if entry == nil {
		return false
	}
	switch entry.Val.pending {
	case pendingReady:
		q.core.removeReady(id)
	case pendingNone:
		return false
	default:
		q.core.removeWaiting(id)
	}
	return true
}

// holdsReadyLocked reports whether item is queued, or is being processed
// and will be queued again at Done. The caller holds mu.
func (q *Typed[T]) holdsReadyLocked(item T, hash uint32) bool {
	entry, _ := q.core.items.Lookup(item, hash)
	return entry != nil && entry.Val.pending == pendingReady
}

// Park holds item, which the caller got from Get and has not yet marked done,
// until one of events: from its Done on, the queue neither hands it out nor
// counts it in Len until [Typed.Wake] of one of events, [Typed.WakeItem], an
// add of the item or the config's MaxParkTime ends the park and queues it. If
// one of events was woken since the item's Get, which may have changed what
// the worker saw, the park ends at Done. An add since the Get, or a wake of an
// earlier Park, wins over the park; otherwise a later Park replaces an earlier
// one. Park does nothing for an item not being processed or after a shutdown
// has begun, which drops parked items. Events should come from a small fixed
// set: the queue keeps the last wake of each.
func (q *Typed[T]) Park(item T, events ...string) { q.park(item, nil, events) }

// park is Park with a backoff: a wake before it has passed queues the
// item when it passes.
func (q *Typed[T]) park(item T, backoff func() time.Duration, events []string) {
	hash := q.core.items.Hash(item)
	q.core.mu.Lock()
	defer q.core.mu.Unlock()
	q.core.parkLocked(item, hash, backoff, events)
}

// Wake ends the parks waiting for event, queues their items in park order (one
// being processed at its Done), and returns how many it ended. After a
// shutdown has begun it does nothing.
func (q *Typed[T]) Wake(event string) int { return q.WakeFunc(event, nil) }

// WakeFunc is Wake for the items accept returns true for; nil accepts all.
// accept is called with the queue locked and must not call the queue; if it
// panics, the parks it accepted stay ended.
func (q *Typed[T]) WakeFunc(event string, accept func(item T) bool) int {
	return q.core.wakeFunc(event, accept)
}

// WakeItem ends item's park, queuing it without backoff; false if not parked.
func (q *Typed[T]) WakeItem(item T) bool { return q.core.wakeItem(item) }

// SetGroupLimit sets the limit of group, over the config's GroupLimits; 0 or
// less means no limit. A raised limit lets Get hand out the group's waiting
// items at once; a lowered one hands out none of the group's items until
// fewer than the new limit are in flight. It does nothing on a queue without
// GroupLimits, or for the group "".
func (q *Typed[T]) SetGroupLimit(group string, limit int) { q.core.setGroupLimit(group, limit) }

// ShutDown begins a shutdown, which drops parked items, and returns once the
// queue's goroutines have exited. A second call does nothing.
func (q *Typed[T]) ShutDown() {
	q.core.mu.Lock()
	q.core.releaseDrains()
	q.core.mu.Unlock()
	q.core.stopDelays()
	q.core.stopMetrics()
}

// ShutDownWithDrain begins a shutdown, then waits until no item is queued or
// being processed (workers must go on calling Get and Done) or a ShutDown is
// called. It panics on a zero value.
func (q *Typed[T]) ShutDownWithDrain() {
	q.core.mu.Lock()
	q.core.stopAddsLocked()
	q.core.drain("Typed; make one with NewTyped or NewTypedWithConfig")
	q.core.mu.Unlock()
	q.core.stopDelays()
	q.core.stopMetrics()
}

// stopAdds is the instant at which a shutdown begins: from then on every
// add is ignored. The layers above call it before they shut down
// themselves, so that one flag decides for all their adds.
func (q *Typed[T]) stopAdds() {
	q.core.mu.Lock()
	q.core.stopAddsLocked()
	q.core.mu.Unlock()
}

// ShuttingDown reports whether a shutdown has begun, here or in a layer above.
func (q *Typed[T]) ShuttingDown() bool {
	return q.core.shuttingDown.Load()
}

// Snapshot returns a view of the queue, listing at most n items of each kind.
func (q *Typed[T]) Snapshot(n int) Snapshot[T] {
	q.core.mu.Lock()
	defer q.core.mu.Unlock()
	return q.core.snapshotLocked(n)
}
