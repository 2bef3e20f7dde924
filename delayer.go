package workqueue

import (
	"fmt"
	"log/slog"
	"math"
	"sync"
	"time"

	"github.com/go-workqueue/workqueue/internal/delayheap"
	"k8s.io/utils/clock"
)

// heartbeatPeriod bounds how long the delay goroutine sleeps without
// looking at the heap. Every change that matters wakes it explicitly; the
// heartbeat is a backstop only.
const heartbeatPeriod = 10 * time.Second

// waitingBatch bounds how many ready items the delay goroutine moves per
// lock hold, so that adders never wait behind a large batch.
const waitingBatch = 256

// delayer holds the keys that wait for their delay, in a heap by ready
// time, and runs the goroutine that hands each one on when its delay ends:
// the one delay mechanism of this package's queues, whose core keys it by
// delayKey. A delaying queue over a queue from outside this package keys
// one by item. The owner guards the heap with its lock, which it passes to
// start.
type delayer[K comparable] struct {
	clock   clock.WithTicker
	epoch   time.Time // ready times are kept as offsets from it
	heap    *delayheap.Heap[K]
	retries CounterMetric       // nil when the queue records no metrics
	gauge   SettableGaugeMetric // nil unless the provider offers it
	// expire, if set, ends at most budget of the other things due at now,
	// under the owner's lock (the parks that reached their longest time),
	// and returns how many it ended and when the next thing falls due, ok
	// false if nothing will.
	expire func(now int64, budget int) (ended int, next int64, ok bool)
	// bursts holds the deadline of every waiting item whose wait is a
	// debounce (debounce.go): the latest its ready time may become. Every
	// key is in the heap, with a ready time no later than its deadline.
	// Nil until the first debounced add.
	bursts map[K]int64

	// wake tells the goroutine that the first ready time moved earlier.
	// Its buffer of one makes the send non-blocking: a pending wake
	// already covers any later one.
	wake     chan struct{}
	stopOnce sync.Once
	stopCh   chan struct{}
	loopDone chan struct{}
}

func newDelayer[K comparable](clk clock.WithTicker, provider MetricsProvider, name string) *delayer[K] {
	d := &delayer[K]{
		clock:    clk,
		epoch:    clk.Now(),
		heap:     delayheap.New[K](),
		wake:     make(chan struct{}, 1),
		stopCh:   make(chan struct{}),
		loopDone: make(chan struct{}),
	}
	d.retries, d.gauge = delayingMetrics(provider, name)
	return d
}

// now returns the clock's current time as an offset from the epoch.
func (d *delayer[K]) now() int64 { return int64(d.clock.Since(d.epoch)) }

// add puts item in the heap, to be ready once delay has passed, or moves
// its ready time earlier if it is waiting already, and reports whether it
// is now the first to be ready. The caller holds the owner's lock.
func (d *delayer[K]) add(item K, delay time.Duration) (isFirst bool) {
	readyAt := readyAfter(d.now(), delay)
	isFirst = d.heap.Add(item, readyAt)
	if len(d.bursts) > 0 {
		if deadline, ok := d.bursts[item]; ok && readyAt < deadline {
			d.bursts[item] = readyAt // the burst ends no later than this delay
		}
	}
	d.setGauge()
	return isFirst
}

// remove takes item out of the heap and reports whether it was there. The
// caller holds the owner's lock.
func (d *delayer[K]) remove(item K) bool {
	if !d.heap.Remove(item) {
		return false
	}
	d.endBurst(item)
	d.setGauge()
	return true
}

// countRetry counts an accepted delayed add.
func (d *delayer[K]) countRetry() {
	if d.retries != nil {
		d.retries.Inc()
	}
}

// poke makes the goroutine look at the heap again, without blocking.
func (d *delayer[K]) poke() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// setGauge publishes the number of items waiting; the caller holds the
// owner's lock, so updates reach the gauge in the order the heap changed.
func (d *delayer[K]) setGauge() {
	if d.gauge != nil {
		d.gauge.Set(float64(d.heap.Len()))
	}
}

// start runs the goroutine: whenever items are ready, it takes lock and
// hands up to waitingBatch of them to ready. After each pass that leaves
// nothing ready, finished may end it; so does stop. A panic in the
// goroutine (in ready, say, which may be the user's queue) is logged to
// logger before it crashes the program.
func (d *delayer[K]) start(lock sync.Locker, ready func(item K), finished func() bool, logger *slog.Logger) {
	go func() {
		defer close(d.loopDone)
		defer func() {
			if r := recover(); r != nil {
				logger.Error("workqueue: panic in the goroutine that ends delays", "panic", fmt.Sprint(r))
				panic(r)
			}
		}()
		d.loop(func() (int64, bool) { return d.moveReady(lock, ready) }, finished)
	}()
}

func (d *delayer[K]) loop(moveReady func() (next int64, more bool), finished func() bool) {
	timer := d.clock.NewTimer(heartbeatPeriod)
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
		timer.Reset(time.Duration(next - d.now()))
		// A fake clock may have stepped between reading the time and arming
		// the timer; the timer would then fire late, so look again.
		if d.now() >= next {
			continue
		}
		select {
		case <-d.stopCh:
			return
		case <-d.wake:
		case <-timer.C():
		}
	}
}

// moveReady hands up to waitingBatch ready items to ready, then has expire
// end what else is due within the same batch, under lock. It returns when
// to look next (at most a heartbeat from now) and whether the batch was
// full, so that more may be due.
func (d *delayer[K]) moveReady(lock sync.Locker, ready func(item K)) (next int64, more bool) {
	lock.Lock()
	defer lock.Unlock()
	now := d.now()
	moved := 0
	for ; moved < waitingBatch && d.heap.Len() > 0 && d.heap.FirstReadyAt() <= now; moved++ {
		item := d.heap.PopFirst()
		d.endBurst(item)
		ready(item)
	}
	if moved > 0 {
		d.setGauge()
	}
	if moved == waitingBatch {
		return now, true
	}
	next = now + int64(heartbeatPeriod)
	if d.heap.Len() > 0 {
		next = min(next, d.heap.FirstReadyAt())
	}
	if d.expire != nil {
		ended, due, ok := d.expire(now, waitingBatch-moved)
		if moved+ended == waitingBatch {
			return now, true
		}
		if ok {
			next = min(next, due)
		}
	}
	return next, false
}

// dropAll empties the heap, passing each item to each unless it is nil,
// and returns how many it held; the caller holds the owner's lock.
func (d *delayer[K]) dropAll(each func(item K)) int {
	n := d.heap.Len()
	clear(d.bursts)
	if each == nil {
		d.heap.RemoveAll()
	}
	for d.heap.Len() > 0 {
		each(d.heap.PopFirst())
	}
	d.setGauge()
	return n
}

// stop ends the goroutine and waits for it to exit; it may be called many
// times, from many goroutines.
func (d *delayer[K]) stop() {
	d.stopOnce.Do(func() { close(d.stopCh) })
	<-d.loopDone
}

// snapshot returns the number of waiting keys and the n that are ready
// first, soonest first, as items that item names. The caller holds the
// owner's lock.
func snapshotDelays[K, T comparable](d *delayer[K], n int, item func(K) T) (waiting int, first []DelayedItem[T]) {
	for _, e := range d.heap.First(n) {
		first = append(first, DelayedItem[T]{Item: item(e.Item), ReadyAt: d.epoch.Add(time.Duration(e.ReadyAt))})
	}
	return d.heap.Len(), first
}

// readyAfter returns the offset from an epoch at which a delay that starts
// at offset now ends, clamped so that huge delays do not overflow.
func readyAfter(now int64, delay time.Duration) int64 {
	if now > 0 && int64(delay) > math.MaxInt64-now { // now < 0: the clock was set back before the epoch
		return math.MaxInt64
	}
	return now + int64(delay)
}

// debounce delays item for one more add of its burst: ready quiet after
// now, but no later than the burst's deadline, which is fixed when the
// burst begins at maxDelay after it, or at the ready time of a delay the
// item waits for already if that is earlier. It reports whether item is now
// the first to be ready. The caller holds the owner's lock.
func (d *delayer[K]) debounce(item K, db Debounce) (isFirst bool) {
	now := d.now()
	deadline, inBurst := d.bursts[item]
	if !inBurst {
		deadline = readyAfter(now, db.MaxDelay)
		if at, waiting := d.heap.ReadyAt(item); waiting {
			deadline = min(deadline, at)
		}
		if d.bursts == nil {
			d.bursts = make(map[K]int64)
		}
		d.bursts[item] = deadline
	}
	isFirst = d.heap.Set(item, min(readyAfter(now, db.Quiet), deadline))
	d.setGauge()
	return isFirst
}

// reschedule sets item's ready time to delay from now, whichever way that
// moves it, ending its burst if it is in one, and reports whether it is now
// the first to be ready. The caller holds the owner's lock.
func (d *delayer[K]) reschedule(item K, delay time.Duration) (isFirst bool) {
	d.endBurst(item)
	isFirst = d.heap.Set(item, readyAfter(d.now(), delay))
	d.setGauge()
	return isFirst
}

// endBurst forgets item's burst, if it is in one: it is ready, removed, or
// rescheduled. The caller holds the owner's lock.
func (d *delayer[K]) endBurst(item K) {
	if len(d.bursts) > 0 {
		delete(d.bursts, item)
	}
}
