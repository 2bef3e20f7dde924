package workqueue

import (
	"slices"
	"time"
)

// Snapshot is a view of a queue at one instant, for inspection: how much
// it holds, and the first few items of each kind. Take one with the
// Snapshot method of any queue of this package; the inspect package serves
// them.
type Snapshot[T comparable] struct {
	// Taken is when the view was taken, on the queue's clock.
	Taken time.Time
	// ShuttingDown reports whether a shutdown has begun.
	ShuttingDown bool
	// Depth is the number of items waiting to be handed out, as Len.
	Depth int
	// Queued holds the first of them in the order Get hands them out. It
	// is empty with custom storage, which cannot be read without popping.
	Queued []T
	// Processing is the number of items handed out and not yet done.
	Processing int
	// InFlight holds the longest-running of them, longest first: of the
	// items handed out since the queue's first Snapshot, or since it was
	// made if it records metrics.
	InFlight []InFlightItem[T]
	// Waiting is the number of items waiting for their delay, on a
	// delaying or rate-limiting queue.
	Waiting int
	// Delayed holds the waiting items that are ready first, soonest first.
	Delayed []DelayedItem[T]
	// Parked is the number of items parked until an event (see
	// [Typed.Park]), from the Done that followed their park.
	Parked int
	// ParkedItems holds the items parked longest, longest first.
	ParkedItems []ParkedItem[T]
	// Adds counts the adds that queued an item or marked one being
	// processed to be queued again, since the queue was made; the rate of
	// adds is its difference between two snapshots over their Taken times.
	Adds uint64
	// Failures holds, on a rate-limiting queue, the number of failures the
	// rate limiter counts for each item listed in Queued, InFlight,
	// Delayed and ParkedItems that has any.
	Failures map[T]int
}

// InFlightItem is an item being processed.
type InFlightItem[T comparable] struct {
	Item T
	// Since is when Get handed the item out.
	Since time.Time
	// Requeue reports whether the item was added again while being
	// processed, so that Done queues it again.
	Requeue bool
}

// DelayedItem is an item waiting for its delay.
type DelayedItem[T comparable] struct {
	Item T
	// ReadyAt is when the item will be added to the queue.
	ReadyAt time.Time
}

// ParkedItem is an item parked until an event.
type ParkedItem[T comparable] struct {
	Item T
	// Events are the events that wake it.
	Events []string
	// Since is when its park took effect: the Done that followed Park.
	Since time.Time
}

// soonestDelayed returns the n of delayed that are ready first, soonest
// first.
func soonestDelayed[T comparable](delayed []DelayedItem[T], n int) []DelayedItem[T] {
	slices.SortStableFunc(delayed, func(a, b DelayedItem[T]) int { return a.ReadyAt.Compare(b.ReadyAt) })
	return delayed[:max(min(n, len(delayed)), 0)]
}
