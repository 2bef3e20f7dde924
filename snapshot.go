package workqueue

import (
	"slices"
	"time"
)

// Snapshot is a view of a queue at one instant: counts and first items.
type Snapshot[T comparable] struct {
	Taken          time.Time         // on the queue's clock
	ShuttingDown   bool              // whether a shutdown has begun
	Depth          int               // as Len
	Queued         []T               // the next to be handed out if no slot filled up; none with custom storage
	Processing     int               // items handed out and not yet done
	InFlight       []InFlightItem[T] // the longest-running, tracked from the first Snapshot
	Waiting        int               // delays pending; an item's delayed add and its park backoff count apart
	Delayed        []DelayedItem[T]  // those ready first
	Parked         int               // items parked, from the Done after their Park
	ParkedItems    []ParkedItem[T]   // those parked longest
	Adds           uint64            // adds that queued an item, since construction
	WaitingForSlot int               // queued items (in Depth) waiting for a free slot of their group
	GroupCount     int               // groups with items in flight or queued
	Groups         []GroupState      // the first n, those with items waiting first, then by name
	Failures       map[T]int         // the listed items' failure counts, if any
}

// InFlightItem is an item being processed.
type InFlightItem[T comparable] struct {
	Item    T
	Since   time.Time // when Get handed it out
	Requeue bool      // whether it was added again, so that Done queues it
}

// DelayedItem is an item waiting for its delay.
type DelayedItem[T comparable] struct {
	Item    T
	ReadyAt time.Time // when it will be added
}

// ParkedItem is a parked item.
type ParkedItem[T comparable] struct {
	Item   T
	Events []string  // the events that wake it
	Since  time.Time // when its park took effect: the Done after Park
}

// soonestDelayed returns the n of delayed that are ready first, soonest
// first.
func soonestDelayed[T comparable](delayed []DelayedItem[T], n int) []DelayedItem[T] {
	slices.SortStableFunc(delayed, func(a, b DelayedItem[T]) int { return a.ReadyAt.Compare(b.ReadyAt) })
	return delayed[:max(min(n, len(delayed)), 0)]
}
