package workqueue

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

// BenchmarkDebounceBursts replays bursts of events for a few keys on a fake
// clock, 1 ms at a time, with workers whose reconciles take a fixed time,
// and reports per burst how many reconciles ran (reconciles/burst) and how
// long after its last event the reconcile that saw it began (ms-latency),
// for plain adds and for Debounce, on the rate-limiting and the priority
// queue. ns/op is the cost of one replay, mostly the fake clock's.
func BenchmarkDebounceBursts(b *testing.B) {
	const ms = time.Millisecond
	workload := debounceWorkload{keys: 4, events: 10, gap: 20 * ms, reconcile: 30 * ms, workers: 2}
	for _, kind := range debounceKinds[1:] {
		for _, db := range []Debounce{{}, {Quiet: 50 * ms, MaxDelay: 500 * ms}, {Quiet: 50 * ms, MaxDelay: 100 * ms}} {
			name := "plain"
			if db.enabled() {
				name = fmt.Sprintf("debounce=%v/max=%v", db.Quiet, db.MaxDelay)
			}
			b.Run(kind.name+"/"+name, func(b *testing.B) {
				b.ReportAllocs()
				clock := clocktesting.NewFakeClock(time.Unix(0, 0))
				q := kind.make(db, clock)
				defer q.ShutDown()
				var total debounceOutcome
				for b.Loop() {
					total.add(workload.replay(q, clock))
				}
				b.ReportMetric(float64(total.reconciles)/float64(total.bursts), "reconciles/burst")
				b.ReportMetric(float64(total.latency.Milliseconds())/float64(total.bursts), "ms-latency")
			})
		}
	}
}

// debounceWorkload is a replay: keys bursts, staggered by a millisecond,
// of events adds each gap apart, on workers reconciling for reconcile.
type debounceWorkload struct {
	keys, events, workers int
	gap, reconcile        time.Duration
}

type debounceOutcome struct {
	bursts, reconciles int
	latency            time.Duration // summed over bursts
}

func (o *debounceOutcome) add(other debounceOutcome) {
	o.bursts += other.bursts
	o.reconciles += other.reconciles
	o.latency += other.latency
}

// replay runs one round of bursts on q until it is idle again.
func (w debounceWorkload) replay(q debounceQueue, clock *clocktesting.FakeClock) debounceOutcome {
	start := clock.Now()
	lastEvent := make(map[string]time.Duration, w.keys)
	for k := range w.keys {
		lastEvent[modelKeys[k]] = time.Duration(w.events-1)*w.gap + time.Duration(k)*time.Millisecond
	}
	seen := make(map[string]bool, w.keys) // a reconcile began after the last event
	type worker struct {
		item      string
		busyUntil time.Duration
	}
	workers := make([]worker, w.workers)
	out := debounceOutcome{bursts: w.keys}
	end := time.Duration(w.events-1)*w.gap + time.Duration(w.keys)*time.Millisecond
	for now := time.Duration(0); ; now += time.Millisecond {
		clock.SetTime(start.Add(now))
		for k := range w.keys {
			if at := now - time.Duration(k)*time.Millisecond; at >= 0 && at%w.gap == 0 && at/w.gap < time.Duration(w.events) {
				q.Add(modelKeys[k])
			}
		}
		settleDelays(q, clock)
		busy := false
		for i := range workers {
			wk := &workers[i]
			if wk.item != "" && now >= wk.busyUntil {
				q.Done(wk.item)
				wk.item = ""
			}
			if wk.item == "" && q.Len() > 0 {
				item, _ := q.Get()
				wk.item, wk.busyUntil = item, now+w.reconcile
				out.reconciles++
				if !seen[item] && now >= lastEvent[item] {
					seen[item] = true
					out.latency += now - lastEvent[item]
				}
			}
			busy = busy || wk.item != ""
		}
		if now >= end && !busy && q.Len() == 0 && q.(snapshotter[string]).Snapshot(0).Waiting == 0 {
			return out
		}
	}
}

// settleDelays waits until q's delay goroutine has moved every item whose
// delay has ended on clock.
func settleDelays(q debounceQueue, clock *clocktesting.FakeClock) {
	for {
		s := q.(snapshotter[string]).Snapshot(1)
		if len(s.Delayed) == 0 || s.Delayed[0].ReadyAt.After(clock.Now()) {
			return
		}
		runtime.Gosched()
	}
}
