package workqueue

import (
	"fmt"
	"time"
)

// Debounce holds back an item that is added again and again until its adds
// go quiet: under it, an add with no delay makes the item ready Quiet after
// that add, but never later than MaxDelay after the first add of the burst,
// however often it is added meanwhile. The zero value debounces nothing.
//
// A burst begins at an add of an item that is not waiting for a debounce,
// and ends when the item becomes ready. An add of an item that is ready
// already (queued, or to be queued again at Done) changes nothing: the
// processing to come covers it. An item being processed when a burst begins
// is queued again at Done, or once its burst ends if that is later. A delay
// asked for during a burst (AddAfter, AddRateLimited) ends it no later than
// that delay: the earliest ready time wins; a Reschedule ends the burst and
// sets the item's ready time, whichever way it moves.
type Debounce struct {
	// Quiet is how long after its last add an item becomes ready. It must
	// be positive if MaxDelay is set.
	Quiet time.Duration
	// MaxDelay bounds how long after the first add of its burst an item
	// becomes ready. Zero means Quiet: a burst then lasts Quiet from its
	// first add. Otherwise it must be at least Quiet.
	MaxDelay time.Duration
}

// enabled reports whether d debounces anything.
func (d Debounce) enabled() bool { return d.Quiet > 0 }

// checked returns d with MaxDelay set, panicking for fn, the constructor,
// if d is not valid.
func (d Debounce) checked(fn string) Debounce {
	switch {
	case d.Quiet < 0 || d.MaxDelay < 0:
		panic(fmt.Sprintf("workqueue: %s: Debounce must not be negative, got %+v", fn, d))
	case d.Quiet == 0 && d.MaxDelay > 0:
		panic(fmt.Sprintf("workqueue: %s: Debounce.MaxDelay set without a Quiet period, got %+v", fn, d))
	case d.MaxDelay == 0:
		d.MaxDelay = d.Quiet
	case d.MaxDelay < d.Quiet:
		panic(fmt.Sprintf("workqueue: %s: Debounce.MaxDelay must be at least Quiet, got %+v", fn, d))
	}
	return d
}
