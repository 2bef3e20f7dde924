package workqueue_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/go-workqueue/workqueue"
)

func ExampleTyped() {
	q := workqueue.NewTyped[string]()
	q.Add("a")
	q.Add("b")
	q.Add("a") // already queued: collapsed
	q.ShutDown()
	for {
		item, shutdown := q.Get()
		if shutdown {
			break
		}
		fmt.Println("processing", item)
		q.Done(item)
	}
	// Output:
	// processing a
	// processing b
}

func ExampleTypedDelayingInterface() {
	q := workqueue.NewTypedDelayingQueue[string]()
	defer q.ShutDown()
	q.AddAfter("later", 20*time.Millisecond)
	q.AddAfter("sooner", 10*time.Millisecond)
	q.Add("now")
	for range 3 {
		item, _ := q.Get()
		fmt.Println(item)
		q.Done(item)
	}
	// Output:
	// now
	// sooner
	// later
}

// ExampleTypedRateLimitingInterface shows the loop every controller
// writes: Get, reconcile, Forget on success or AddRateLimited on failure,
// and always Done.
func ExampleTypedRateLimitingInterface() {
	q := workqueue.NewTypedRateLimitingQueue(workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Millisecond, time.Second))
	attempts := map[string]int{}
	reconcile := func(key string) error {
		attempts[key]++
		if attempts[key] < 3 {
			return errors.New("not yet")
		}
		return nil
	}

	q.Add("default/web")
	for {
		key, shutdown := q.Get()
		if shutdown {
			break
		}
		if err := reconcile(key); err != nil {
			fmt.Printf("%s: %v, retry %d\n", key, err, q.NumRequeues(key)+1)
			q.AddRateLimited(key)
		} else {
			fmt.Printf("%s: reconciled after %d attempts\n", key, attempts[key])
			q.Forget(key)
			q.ShutDown()
		}
		q.Done(key)
	}
	// Output:
	// default/web: not yet, retry 1
	// default/web: not yet, retry 2
	// default/web: reconciled after 3 attempts
}

func ExampleParallelizeUntil() {
	squares := make([]int, 10)
	workqueue.ParallelizeUntil(context.Background(), 4, len(squares), func(piece int) {
		squares[piece] = piece * piece
	}, workqueue.WithChunkSize(3))
	fmt.Println(squares)
	// Output: [0 1 4 9 16 25 36 49 64 81]
}

// Example_workers runs a reconcile loop on several workers: each key is
// handed to one worker at a time, failures are retried with backoff, and
// ShutDownWithDrain lets the workers finish what is queued.
func Example_workers() {
	queue := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())

	var mu sync.Mutex
	failures := map[string]int{"default/flaky": 2} // fails twice, then succeeds
	reconciled := make(chan string, 3)
	reconcile := func(key string) error {
		mu.Lock()
		defer mu.Unlock()
		if failures[key] > 0 {
			failures[key]--
			return errors.New("transient")
		}
		reconciled <- key
		return nil
	}

	var workers sync.WaitGroup
	for range 3 {
		workers.Go(func() {
			for {
				key, shutdown := queue.Get()
				if shutdown {
					return
				}
				if err := reconcile(key); err != nil {
					queue.AddRateLimited(key)
				} else {
					queue.Forget(key)
				}
				queue.Done(key)
			}
		})
	}

	for _, key := range []string{"default/web", "default/db", "default/flaky"} {
		queue.Add(key)
	}
	for range 3 {
		<-reconciled
	}
	queue.ShutDownWithDrain()
	workers.Wait()
	fmt.Println("all keys reconciled; flaky retried", 2-failures["default/flaky"], "times")
	// Output: all keys reconciled; flaky retried 2 times
}

// ExampleTypedRateLimitingQueue shows this package's additions to the
// client-go interface: a Get that a context can interrupt, taking back an
// item that no longer needs work, and a snapshot of what the queue holds.
func ExampleTypedRateLimitingQueue() {
	limiter := workqueue.DefaultTypedControllerRateLimiter[string]()
	q := workqueue.NewTypedRateLimitingQueue(limiter)
	defer q.ShutDown()

	q.Add("default/web")
	q.Add("default/db")
	q.AddAfter("default/cache", time.Hour)

	// The object behind default/db was deleted: no need to reconcile it.
	fmt.Println("removed default/db:", q.Remove("default/db"))

	s := q.Snapshot(10)
	fmt.Println("queued:", s.Queued, "waiting:", s.Waiting)

	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	key, err := q.GetContext(ctx)
	fmt.Println("got:", key, err)
	q.Done(key)

	ctx, cancel = context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	_, err = q.GetContext(ctx) // nothing is ready: the context ends first
	fmt.Println("then:", err)
	// Output:
	// removed default/db: true
	// queued: [default/web] waiting: 1
	// got: default/web <nil>
	// then: context deadline exceeded
}

// A worker parks an item that cannot progress until something else
// happens, instead of retrying it on a timer; the event queues it again.
func ExampleTyped_Park() {
	queue := workqueue.NewTyped[string]()
	defer queue.ShutDown()
	queue.Add("default/pod")

	item, _ := queue.Get()
	queue.Park(item, "node-added") // no node fits it yet
	queue.Done(item)
	fmt.Println("queued:", queue.Len(), "parked:", queue.Snapshot(0).Parked)

	fmt.Println("woken:", queue.Wake("node-added"))
	fmt.Println("queued:", queue.Len(), "parked:", queue.Snapshot(0).Parked)
	// Output:
	// queued: 0 parked: 1
	// woken: 1
	// queued: 1 parked: 0
}

// A burst of events for one key is reconciled once: a second after the
// events go quiet, and never more than five seconds after the first.
func ExampleDebounce() {
	clock := clocktesting.NewFakeClock(time.Unix(0, 0))
	queue := workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{
			Clock:    clock,
			Debounce: workqueue.Debounce{Quiet: time.Second, MaxDelay: 5 * time.Second},
		})
	defer queue.ShutDown()
	start := clock.Now()
	for range 8 { // an event every 600 ms: never quiet for a second
		queue.Add("default/web")
		clock.Step(600 * time.Millisecond)
	}
	fmt.Println("ready after", clock.Since(start), "of events:", queue.Len())
	clock.Step(200 * time.Millisecond) // five seconds after the first event
	item, _ := queue.Get()
	fmt.Println("handed out after", clock.Since(start), item)
	queue.Done(item)

	queue.Add("default/web") // one event: handed out once it has been quiet
	clock.Step(time.Second)
	item, _ = queue.Get()
	fmt.Println("handed out after", clock.Since(start), item)
	queue.Done(item)
	// Output:
	// ready after 4.8s of events: 0
	// handed out after 5s default/web
	// handed out after 6s default/web
}

// Reschedule moves a pending delay later as well as earlier: the latest
// call wins, where AddAfter keeps the earliest.
func ExampleTypedRateLimitingQueue_Reschedule() {
	clock := clocktesting.NewFakeClock(time.Unix(0, 0))
	queue := workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Clock: clock})
	defer queue.ShutDown()
	start := clock.Now()
	queue.AddAfter("cert/web", time.Hour)     // renew in an hour
	queue.AddAfter("cert/web", 2*time.Hour)   // the earliest wins: still an hour
	queue.Reschedule("cert/web", 2*time.Hour) // the latest wins: two hours
	fmt.Println("ready at", queue.Snapshot(1).Delayed[0].ReadyAt.Sub(start))
	clock.Step(time.Hour)
	fmt.Println("ready after an hour:", queue.Len())
	clock.Step(time.Hour)
	item, _ := queue.Get()
	fmt.Println("handed out after", clock.Since(start), item)
	queue.Done(item)
	// Output:
	// ready at 2h0m0s
	// ready after an hour: 0
	// handed out after 2h0m0s cert/web
}

// The declarations below and TestClientGoStyleProgramCompilesAndRuns are
// written the way a program uses client-go's typed workqueue API, and use
// every name of it that this package provides. They compile against
// k8s.io/client-go/util/workqueue too when only the import path changes,
// which is the promise of the package.

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
