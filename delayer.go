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

// delayer holds the items that wait for their delay, in a heap by ready
// time, and runs the goroutine that hands each one on when its delay ends:
// the one delay mechanism of the delaying queue and the priority queue.
// The queue that owns it guards the heap with a lock of its own, which it
// passes to start, and keeps the metrics it counts.
type delayer[T comparable] struct {
	clock   clock.WithTicker
	epoch   time.Time // ready times are kept as offsets from it
	heap    *delayheap.Heap[T]
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
	bursts map[T]int64

	// wake tells the goroutine that the first ready time moved earlier.
	// Its buffer of one makes the send non-blocking: a pending wake
	// already covers any later one.
	wake     chan struct{}
	stopOnce sync.Once
	stopCh   chan struct{}
	loopDone chan struct{}
}

func newDelayer[T comparable](clk clock.WithTicker, provider MetricsProvider, name string) *delayer[T] {
	d := &delayer[T]{
		clock:    clk,
		epoch:    clk.Now(),
		heap:     delayheap.New[T](),
		wake:     make(chan struct{}, 1),
		stopCh:   make(chan struct{}),
		loopDone: make(chan struct{}),
	}
	d.retries, d.gauge = delayingMetrics(provider, name)
	return d
}

// now returns the clock's current time as an offset from the epoch.
func (d *delayer[T]) now() int64 { return int64(d.clock.Since(d.epoch)) }

// add puts item in the heap, to be ready once delay has passed, or moves
// its ready time earlier if it is waiting already, and reports whether it
// is now the first to be ready. The caller holds the owner's lock.
func (d *delayer[T]) add(item T, delay time.Duration) (isFirst bool) {
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
func (d *delayer[T]) remove(item T) bool {
	if !d.heap.Remove(item) {
		return false
	}
	d.endBurst(item)
	d.setGauge()
	return true
}

// countRetry counts an accepted delayed add.
func (d *delayer[T]) countRetry() {
	if d.retries != nil {
		d.retries.Inc()
	}
}

// poke makes the goroutine look at the heap again, without blocking.
func (d *delayer[T]) poke() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// setGauge publishes the number of items waiting; the caller holds the
// owner's lock, so updates reach the gauge in the order the heap changed.
func (d *delayer[T]) setGauge() {
	if d.gauge != nil {
		d.gauge.Set(float64(d.heap.Len()))
	}
}

// start runs the goroutine: whenever items are ready, it takes lock and
// hands up to waitingBatch of them to ready. After each pass that leaves
// nothing ready, finished may end it; so does stop. A panic in the
// goroutine (in ready, say, which may be the user's queue) is logged to
// logger before it crashes the program.
func (d *delayer[T]) start(lock sync.Locker, ready func(item T), finished func() bool, logger *slog.Logger) {
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

func (d *delayer[T]) loop(moveReady func() (next int64, more bool), finished func() bool) {
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
func (d *delayer[T]) moveReady(lock sync.Locker, ready func(item T)) (next int64, more bool) {
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
func (d *delayer[T]) dropAll(each func(item T)) int {
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
func (d *delayer[T]) stop() {
	d.stopOnce.Do(func() { close(d.stopCh) })
	<-d.loopDone
}

// snapshot returns the number of waiting items and the n that are ready
// first, soonest first. The caller holds the owner's lock.
func (d *delayer[T]) snapshot(n int) (waiting int, first []DelayedItem[T]) {
	for _, e := range d.heap.First(n) {
		first = append(first, DelayedItem[T]{Item: e.Item, ReadyAt: d.epoch.Add(time.Duration(e.ReadyAt))})
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

// makeDelays makes the core's delays; start starts their goroutine.
func (c *core[T]) makeDelays(provider MetricsProvider, name string) {
	c.delays = newDelayer[T](c.clock, provider, name)
	c.delays.expire = c.expireParks
}

// startDelays makes the core's delays, and starts their goroutine, if it
// has none yet. The caller holds mu.
func (c *core[T]) startDelays() {
	if c.delays != nil {
		return
	}
	c.makeDelays(nil, "")
	c.delays.start(&c.mu, c.delayEnded, func() bool { return false }, c.logger)
}

// delayEnded makes item, whose delay has ended, ready: queued, or queued
// by Done if it is being processed. The delay goroutine calls it with mu
// held.
func (c *core[T]) delayEnded(item T) {
	entry, id := c.items.Lookup(item, c.items.Hash(item))
	if !entry.Val.processing {
		c.queueHeld(id)
	}
	entry.Val.pending = pendingReady
	c.readied(item, id)
}

// readied counts an add that made the item with id ready at the end of a
// delay or a park.
func (c *core[T]) readied(item T, id int32) {
	if c.onReady != nil {
		c.onReady(item, id)
		return
	}
	c.countAdd(item)
}

// cancelWait takes back what the held item with id waits for, a delay or
// an event, and leaves its pending none. The caller holds mu.
func (c *core[T]) cancelWait(id int32) {
	entry := c.items.At(id)
	switch entry.Val.pending {
	case pendingDelay:
		c.delays.remove(entry.Item)
	case pendingParked:
		c.unpark(id)
	}
	entry.Val.pending = pendingNone
}

// dropWaiting is the shutdown's part under mu: the items waiting for a
// delay or an event are dropped, and a park that a worker asked for will
// not happen: its item leaves the queue at Done.
func (c *core[T]) dropWaiting() {
	drop := func(id int32) {
		entry := c.items.At(id)
		entry.Val.pending = pendingNone
		if !entry.Val.processing {
			c.release(id)
		}
	}
	if c.delays != nil {
		c.droppedDelayed = c.delays.dropAll(func(item T) {
			_, id := c.items.Lookup(item, c.items.Hash(item))
			drop(id)
		})
	}
	if c.parking != nil {
		c.droppedParked = c.parking.parked()
		for _, id := range c.parking.ids() {
			c.unpark(id)
			drop(id)
		}
	}
}

// stopDelays stops the delay goroutine, if the core has one, and logs what
// the shutdown dropped; the caller does not hold mu, and the shutdown has
// begun.
func (c *core[T]) stopDelays() {
	c.mu.Lock()
	delays, delayed, parked := c.delays, c.droppedDelayed, c.droppedParked
	c.droppedDelayed, c.droppedParked = 0, 0
	c.mu.Unlock()
	if delays == nil {
		return
	}
	delays.stop()
	if delayed > 0 {
		c.logger.Debug("workqueue: dropped items still waiting for their delay at shutdown", "count", delayed)
	}
	if parked > 0 {
		c.logger.Info("workqueue: dropped items parked until an event at shutdown", "count", parked)
	}
}
