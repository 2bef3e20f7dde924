package reconcile

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/go-workqueue/workqueue"
)

// benchKeys returns n distinct keys shaped like namespace/name.
func benchKeys(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = "namespace-" + strconv.Itoa(i%97) + "/object-" + strconv.Itoa(i)
	}
	return keys
}

// BenchmarkRunner compares the Runner with the loop written by hand: one
// worker reconciles batches of 1000 keys that always succeed; one op is one
// key. The difference is what the Runner's bookkeeping costs.
func BenchmarkRunner(b *testing.B) {
	keys := benchKeys(1000)
	reconciled := make(chan struct{}, 1)
	var left atomic.Int64
	reconcileKey := func(string) error {
		if left.Add(-1) == 0 {
			reconciled <- struct{}{}
		}
		return nil
	}
	loops := []struct {
		name  string
		start func(q workqueue.TypedRateLimitingInterface[string]) (stop func())
	}{
		{"hand-loop", func(q workqueue.TypedRateLimitingInterface[string]) func() {
			var worker sync.WaitGroup
			worker.Go(func() {
				for {
					key, shutdown := q.Get()
					if shutdown {
						return
					}
					if err := reconcileKey(key); err != nil {
						q.AddRateLimited(key)
					} else {
						q.Forget(key)
					}
					q.Done(key)
				}
			})
			return func() { q.ShutDown(); worker.Wait() }
		}},
		{"runner", func(q workqueue.TypedRateLimitingInterface[string]) func() {
			ctx, cancel := context.WithCancel(context.Background())
			runner := NewRunner(q, func(_ context.Context, key string) (Result, error) {
				return Result{}, reconcileKey(key)
			})
			var run sync.WaitGroup
			run.Go(func() { runner.Run(ctx, 1) })
			return func() { cancel(); run.Wait() }
		}},
	}
	for _, loop := range loops {
		b.Run(loop.name, func(b *testing.B) {
			q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())
			stop := loop.start(q)
			defer stop()
			b.ReportAllocs()
			for b.Loop() {
				left.Store(int64(len(keys)))
				for _, key := range keys {
					q.Add(key)
				}
				<-reconciled
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(keys)), "ns/key")
		})
	}
}
