package workqueue

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// BenchmarkGroupLimits runs a controller-shaped drain: one hot group of 200
// items beside 100 light groups of 2 items each, added alternately, each
// reconcile a 1 ms wait on an external system, at most limit reconciles of
// a group at once. It compares three ways to keep the limit:
//
//   - group limits: GroupLimits on the queue, 8 workers;
//   - semaphore: a plain queue, 8 workers, each waiting on a semaphore per
//     group inside the reconcile, as users write it today;
//   - queue per group: one plain queue per group with limit workers each
//     (404 or 1,616 workers for these groups: the other way users write it).
//
// It reports the drain's wall time and when the light groups' items were
// done: the median and the last, in milliseconds from the start.
func BenchmarkGroupLimits(b *testing.B) {
	const (
		hot, light, lightEach = 200, 100, 2
		workers               = 8
		work                  = time.Millisecond
	)
	type scenario struct {
		name string
		run  func(items []string, limit int, reconcile func(string)) // returns when every item is done
	}
	groupOf := func(item string) string { g, _, _ := strings.Cut(item, "/"); return g }
	scenarios := []scenario{
		{"group limits", func(items []string, limit int, reconcile func(string)) {
			q := NewTypedWithConfig(TypedQueueConfig[string]{GroupLimits: &GroupLimits[string]{Group: groupOf, Default: limit}})
			runWorkers(q, items, workers, reconcile)
		}},
		{"semaphore", func(items []string, limit int, reconcile func(string)) {
			var mu sync.Mutex
			sems := map[string]chan struct{}{}
			q := NewTyped[string]()
			runWorkers(q, items, workers, func(item string) {
				mu.Lock()
				sem := sems[groupOf(item)]
				if sem == nil {
					sem = make(chan struct{}, limit)
					sems[groupOf(item)] = sem
				}
				mu.Unlock()
				sem <- struct{}{} // the worker waits here, idle, while its group is full
				reconcile(item)
				<-sem
			})
		}},
		{"queue per group", func(items []string, limit int, reconcile func(string)) {
			byGroup := map[string][]string{}
			for _, item := range items {
				byGroup[groupOf(item)] = append(byGroup[groupOf(item)], item)
			}
			var wg sync.WaitGroup
			for _, group := range byGroup {
				wg.Go(func() { runWorkers(NewTyped[string](), group, limit, reconcile) })
			}
			wg.Wait()
		}},
	}
	var items []string
	for i := range max(hot, light*lightEach) {
		if i < hot {
			items = append(items, fmt.Sprintf("hot/%d", i))
		}
		if i < light*lightEach {
			items = append(items, fmt.Sprintf("light%d/%d", i%light, i/light))
		}
	}
	for _, limit := range []int{1, 4} {
		for _, s := range scenarios {
			b.Run(fmt.Sprintf("limit=%d/%s", limit, s.name), func(b *testing.B) {
				var drain, lightMedian, lightLast time.Duration
				for b.Loop() {
					start := time.Now()
					var mu sync.Mutex
					var lightDone []time.Duration
					s.run(items, limit, func(item string) {
						time.Sleep(work)
						if groupOf(item) != "hot" {
							mu.Lock()
							lightDone = append(lightDone, time.Since(start))
							mu.Unlock()
						}
					})
					drain += time.Since(start)
					slices.Sort(lightDone)
					lightMedian += lightDone[len(lightDone)/2]
					lightLast += lightDone[len(lightDone)-1]
				}
				n := time.Duration(b.N)
				b.ReportMetric(float64(drain/n)/1e6, "drain-ms")
				b.ReportMetric(float64(lightMedian/n)/1e6, "light-median-ms")
				b.ReportMetric(float64(lightLast/n)/1e6, "light-last-ms")
				b.ReportMetric(0, "ns/op")
			})
		}
	}
}

// runWorkers adds items to q, runs workers workers on it until it is
// drained, and shuts it down.
func runWorkers(q *Typed[string], items []string, workers int, reconcile func(string)) {
	for _, item := range items {
		q.Add(item)
	}
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				item, err := q.GetContext(context.Background())
				if err != nil {
					return
				}
				reconcile(item)
				q.Done(item)
			}
		})
	}
	q.ShutDownWithDrain()
	wg.Wait()
}

// BenchmarkGroupCycle measures one Get, Done and Add of a queue with group
// limits on one goroutine, 64 items queued in 4 groups of limit 1: each Get
// fills its group's slot, taking the group's queued items out of the
// running, and each Done frees it, putting them back.
func BenchmarkGroupCycle(b *testing.B) {
	groupOf := func(item string) string { g, _, _ := strings.Cut(item, "/"); return g }
	limits := &GroupLimits[string]{Group: groupOf, Default: 1}
	limiter := NewTypedItemExponentialFailureRateLimiter[string](time.Millisecond, time.Second)
	queues := []struct {
		name string
		make func() TypedInterface[string]
	}{
		{"typed", func() TypedInterface[string] {
			return NewTypedWithConfig(TypedQueueConfig[string]{GroupLimits: limits})
		}},
		{"priority", func() TypedInterface[string] {
			return NewTypedPriorityQueue(limiter, TypedPriorityQueueConfig[string]{GroupLimits: limits})
		}},
		{"fairness", func() TypedInterface[string] {
			return NewTypedPriorityQueue(limiter, TypedPriorityQueueConfig[string]{GroupLimits: limits,
				Fairness: []func(string) string{func(item string) string { return item[len(item)-1:] }}})
		}},
	}
	for _, tt := range queues {
		b.Run(tt.name, func(b *testing.B) {
			q := tt.make()
			defer q.ShutDown()
			for i := range 64 {
				q.Add(fmt.Sprintf("g%d/o%d", i%4, i))
			}
			b.ReportAllocs()
			for b.Loop() {
				item, _ := q.Get()
				q.Done(item)
				q.Add(item)
			}
		})
	}
}
