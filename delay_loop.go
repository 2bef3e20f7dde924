package workqueue

import (
	"math"
	"time"

	"k8s.io/utils/clock"
)

// runDelayLoop is the loop of a goroutine that queues items when their
// delay ends, shared by the delaying queue and the priority queue.
// moveReady queues a batch of ready items and returns when to look next,
// as an offset from the epoch now counts from, and whether more may be
// ready at once. After each pass that leaves nothing ready, finished may
// end the loop; so do a close of stopCh and nothing else. A send on wake
// makes it look again at once.
func runDelayLoop(clk clock.WithTicker, now func() int64, moveReady func() (next int64, more bool), finished func() bool, wake, stopCh <-chan struct{}) {
	timer := clk.NewTimer(heartbeatPeriod)
	defer timer.Stop()
	for {
		next, more := moveReady()
		if more {
			continue
		}
		if finished() {
			return
		}
		if !timer.Stop() {
			select {
			case <-timer.C():
			default:
			}
		}
		timer.Reset(time.Duration(next - now()))
		// A fake clock may have stepped between reading the time and arming
		// the timer; the timer would then fire late, so look again.
		if now() >= next {
			continue
		}
		select {
		case <-stopCh:
			return
		case <-wake:
		case <-timer.C():
		}
	}
}

// nextLook is what moveReady returns after moving moved items from h at
// now: look again at once after a full batch, else at the next ready time,
// at most a heartbeat from now.
func nextLook[T comparable](h *delayHeap[T], now int64, moved int) (next int64, more bool) {
	if moved == waitingBatch {
		return now, true
	}
	next = now + int64(heartbeatPeriod)
	if h.len() > 0 {
		next = min(next, h.firstReadyAt())
	}
	return next, false
}

// readyAfter returns the offset from an epoch at which a delay that starts
// at offset now ends, clamped so that huge delays do not overflow.
func readyAfter(now int64, delay time.Duration) int64 {
	if int64(delay) > math.MaxInt64-now {
		return math.MaxInt64
	}
	return now + int64(delay)
}
