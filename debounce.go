package workqueue

import (
	"fmt"
	"time"
)

// Debounce holds back an item until its adds go quiet: an add with no delay
// makes it ready Quiet later, at most MaxDelay after its burst's first add. A
// burst begins at an add of an item not waiting for a debounce and ends when
// it is ready; an add of a ready item (queued, or due at Done) changes
// nothing; one being processed is queued at the later of its Done and its
// burst's end. AddAfter and AddRateLimited end a burst within their delay.
type Debounce struct {
	Quiet    time.Duration // positive if MaxDelay is set; the zero Debounce debounces nothing
	MaxDelay time.Duration // zero means Quiet; otherwise at least Quiet
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
