package workqueue_test

import (
	"context"
	"testing"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"

	workqueue "github.com/go-workqueue/workqueue"
)

// This file is written the way a program uses client-go's typed workqueue
// API, and uses every name of it that this package provides. It compiles
// against k8s.io/client-go/util/workqueue too when only the import path
// changes, which is the promise of the package.

type key struct{ namespace, name string }

var (
	// Constructors in the places client-go code puts them, so that their
	// signatures are checked without starting any queue.
	_ func() *workqueue.Typed[key]                                = workqueue.NewTyped[key]
	_ func(workqueue.TypedQueueConfig[key]) *workqueue.Typed[key] = workqueue.NewTypedWithConfig[key]
	_                                                             = func() workqueue.TypedDelayingInterface[key] { return workqueue.NewTypedDelayingQueue[key]() }
	_                                                             = func(c workqueue.TypedDelayingQueueConfig[key]) workqueue.TypedDelayingInterface[key] {
		return workqueue.NewTypedDelayingQueueWithConfig(c)
	}
	_ = func(l workqueue.TypedRateLimiter[key]) workqueue.TypedRateLimitingInterface[key] {
		return workqueue.NewTypedRateLimitingQueue(l)
	}
	_ = func(l workqueue.TypedRateLimiter[key], c workqueue.TypedRateLimitingQueueConfig[key]) workqueue.TypedRateLimitingInterface[key] {
		return workqueue.NewTypedRateLimitingQueueWithConfig(l, c)
	}
	_ func(time.Duration, time.Duration) workqueue.TypedRateLimiter[key]               = workqueue.NewTypedItemExponentialFailureRateLimiter[key]
	_ func(context.Context, int, int, workqueue.DoWorkPieceFunc, ...workqueue.Options) = workqueue.ParallelizeUntil

	_ workqueue.TypedInterface[key] = (*workqueue.Typed[key])(nil)
	_ workqueue.Queue[key]          = workqueue.DefaultQueue[key]()

	_ workqueue.TypedRateLimiter[key] = &workqueue.TypedBucketRateLimiter[key]{Limiter: rate.NewLimiter(rate.Limit(10), 100)}
	_ workqueue.TypedRateLimiter[key] = &workqueue.TypedItemExponentialFailureRateLimiter[key]{}
	_ workqueue.TypedRateLimiter[key] = &workqueue.TypedItemFastSlowRateLimiter[key]{}
	_ workqueue.TypedRateLimiter[key] = &workqueue.TypedMaxOfRateLimiter[key]{}
	_ workqueue.TypedRateLimiter[key] = workqueue.TypedWithMaxWaitRateLimiter[key]{}
	_ workqueue.TypedRateLimiter[key] = workqueue.DefaultTypedItemBasedRateLimiter[key]()
	_ workqueue.TypedRateLimiter[key] = workqueue.NewTypedItemFastSlowRateLimiter[key](time.Millisecond, time.Second, 3)
	_ workqueue.TypedRateLimiter[key] = workqueue.NewTypedMaxOfRateLimiter(
		workqueue.NewTypedItemExponentialFailureRateLimiter[key](time.Millisecond, time.Second),
		workqueue.NewTypedWithMaxWaitRateLimiter(workqueue.DefaultTypedItemBasedRateLimiter[key](), time.Minute),
	)

	_ workqueue.MetricsProvider     = nil
	_ workqueue.GaugeMetric         = nil
	_ workqueue.SettableGaugeMetric = nil
	_ workqueue.CounterMetric       = nil
	_ workqueue.SummaryMetric       = nil
	_ workqueue.HistogramMetric     = nil
	_ workqueue.DoWorkPieceFunc     = func(int) {}
	_ workqueue.Options             = workqueue.WithChunkSize(4)
	_ clock.WithTicker              = clocktesting.NewFakeClock(time.Time{})
)

func TestClientGoStyleProgramCompilesAndRuns(t *testing.T) {
	fake := clocktesting.NewFakeClock(time.Unix(0, 0))
	plain := workqueue.NewTypedWithConfig(workqueue.TypedQueueConfig[key]{
		Name:  "plain",
		Clock: fake,
		Queue: workqueue.DefaultQueue[key](),
	})
	delaying := workqueue.NewTypedDelayingQueueWithConfig(workqueue.TypedDelayingQueueConfig[key]{
		Name:  "delaying",
		Clock: fake,
		Queue: plain,
	})
	queue := workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.DefaultTypedControllerRateLimiter[key](),
		workqueue.TypedRateLimitingQueueConfig[key]{Name: "controller", Clock: fake, DelayingQueue: delaying},
	)
	defer queue.ShutDown()

	queue.Add(key{"default", "web"})
	queue.AddAfter(key{"default", "db"}, time.Second)
	queue.AddRateLimited(key{"default", "cache"})
	item, shutdown := queue.Get()
	if shutdown || item != (key{"default", "web"}) {
		t.Fatalf("Get got %v, %v; want default/web", item, shutdown)
	}
	queue.Forget(item)
	queue.Done(item)
	if got := queue.NumRequeues(key{"default", "cache"}); got != 1 {
		t.Fatalf("NumRequeues got %d, want 1", got)
	}
	if queue.ShuttingDown() || queue.Len() != 0 {
		t.Fatalf("ShuttingDown %v, Len %d; want false, 0", queue.ShuttingDown(), queue.Len())
	}

	sum := make([]int, 8)
	workqueue.ParallelizeUntil(context.Background(), 2, len(sum), func(piece int) { sum[piece] = piece }, workqueue.WithChunkSize(2))
	if sum[7] != 7 {
		t.Fatalf("ParallelizeUntil missed piece 7")
	}
	queue.ShutDownWithDrain()
}
