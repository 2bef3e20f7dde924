package workqueue

import (
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkParkCycle measures one Add, Get, Park and Done, then the Wake
// that queues the item again and its Get and Done: the round trip of an
// item that waits for an event, on one goroutine. BenchmarkCycle is the
// same without the park.
func BenchmarkParkCycle(b *testing.B) {
	keys := benchKeys(1024)
	for _, kind := range []struct {
		name string
		make func() parkingUnderTest
	}{
		{"Typed", func() parkingUnderTest { return NewTyped[string]() }},
		{"priority", func() parkingUnderTest {
			return NewTypedPriorityQueue(NewTypedItemExponentialFailureRateLimiter[string](0, 0), TypedPriorityQueueConfig[string]{})
		}},
	} {
		b.Run(kind.name, func(b *testing.B) {
			q := kind.make()
			defer q.ShutDown()
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				key := keys[i&1023]
				q.Add(key)
				item, _ := q.Get()
				q.Park(item, "event")
				q.Done(item)
				q.Wake("event")
				item, _ = q.Get()
				q.Done(item)
				i++
			}
		})
	}
}

// BenchmarkWake10k measures a Wake that ends 10,000 parks and queues their
// items, in park order; the items are parked again, untimed, before each.
func BenchmarkWake10k(b *testing.B) {
	const parked = 10_000
	keys := benchKeys(parked)
	q := NewTyped[string]()
	defer q.ShutDown()
	park := func() {
		for _, key := range keys {
			q.Add(key)
		}
		for range parked {
			item, _ := q.Get()
			q.Park(item, "node-added")
			q.Done(item)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		park()
		b.StartTimer()
		if q.Wake("node-added") != parked {
			b.Fatal("not every park ended")
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*parked), "ns/item")
}

// BenchmarkWakeToGet measures the time from a Wake to the return of the
// Get of a worker asleep waiting for the item it wakes, which the worker
// parks again each time. It reports that latency as ns-wake-to-get; ns/op
// also counts the wait for the worker to fall asleep again.
func BenchmarkWakeToGet(b *testing.B) {
	q := NewTyped[string]()
	var wokeAt atomic.Int64 // UnixNano of the last Wake
	latency := make(chan time.Duration)
	go func() {
		first := true
		for {
			item, shutdown := q.Get()
			if shutdown {
				return
			}
			if !first {
				latency <- time.Duration(time.Now().UnixNano() - wokeAt.Load())
			}
			first = false
			q.Park(item, "event")
			q.Done(item)
		}
	}()
	asleepAndParked := func() bool {
		q.core.mu.Lock()
		defer q.core.mu.Unlock()
		return q.core.sleepers.Len() == 1 && q.core.parking != nil && q.core.parking.parked() == 1
	}
	q.Add("pod")
	var total time.Duration
	for b.Loop() {
		for !asleepAndParked() {
			runtime.Gosched()
		}
		wokeAt.Store(time.Now().UnixNano())
		q.Wake("event")
		total += <-latency
	}
	q.ShutDown()
	b.ReportMetric(float64(total.Nanoseconds())/float64(b.N), "ns-wake-to-get")
}
