package workqueue

import (
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

// TypedQueueConfig configures [NewTypedWithConfig]. The zero value is valid.
type TypedQueueConfig[T comparable] struct {
	Name            string           // the queue's name in metrics
	MetricsProvider MetricsProvider  // nil means SetProvider's; none records no metrics
	Clock           clock.WithTicker // nil means the real clock
	Logger          *slog.Logger     // nil means slog.Default()
	MaxParkTime     time.Duration    // see Base.Park; 0 means DefaultMaxParkTime
	Queue           Queue[T]         // custom storage; nil means FIFO
	GroupLimits     *GroupLimits[T]  // nil means none; not with Queue
}

// Typed is a [TypedInterface] with the methods of [Base], safe for concurrent
// use; make one with [NewTyped] or [NewTypedWithConfig].
type Typed[T comparable] struct {
	Base[T]
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
	q.Base = Base[T]{top: q, c: &q.core, provider: config.MetricsProvider, name: config.Name}
	for _, item := range prefilled {
		q.Add(item)
	}
	q.core.start()
	return q
}

// Add marks item as needing processing, unless a shutdown has begun.
func (q *Typed[T]) Add(item T) {
	hash := q.core.items.Hash(item)
	if !q.core.mu.TryLock() { // Lock written out: the call would not be inlined
		q.core.mu.LockSlow()
	}
	if q.core.unguarded {
		q.addLocked(item, hash)
		q.core.mu.Unlock()
		return
	}
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

// holdsReadyLocked reports whether item is queued, or is being processed
// and will be queued again at Done. The caller holds mu.
func (q *Typed[T]) holdsReadyLocked(item T, hash uint32) bool {
	entry, _ := q.core.items.Lookup(item, hash)
	return entry != nil && entry.Val.pending == pendingReady
}

// stopAdds is the instant at which a shutdown begins: from then on every
// add is ignored. The layers above call it before they shut down
// themselves, so that one flag decides for all their adds.
func (q *Typed[T]) stopAdds() {
	q.core.mu.Lock()
	q.core.stopAddsLocked()
	q.core.mu.Unlock()
}
