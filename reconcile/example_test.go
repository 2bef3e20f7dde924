package reconcile_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/go-workqueue/workqueue"
	"github.com/go-workqueue/workqueue/reconcile"
)

// ExampleRunner lets a Runner own the worker loop: failures are retried with
// backoff up to a limit, then handed to a dead-letter callback; a result can
// ask for a later recheck. Cancelling the context drains the queue.
func ExampleRunner() {
	queue := workqueue.NewTypedRateLimitingQueue(
		workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Millisecond, 10*time.Millisecond))
	ctx, cancel := context.WithCancel(context.Background())

	var mu sync.Mutex
	attempts := map[string]int{}
	settled := make(chan struct{}, 1)
	reconcileKey := func(ctx context.Context, key string) (reconcile.Result, error) {
		mu.Lock()
		attempts[key]++
		n := attempts[key]
		mu.Unlock()
		switch {
		case key == "default/flaky" && n < 3:
			return reconcile.Result{}, errors.New("connection refused")
		case key == "default/broken":
			return reconcile.Result{}, errors.New("image not found")
		case key == "default/job" && n == 1:
			return reconcile.Result{RequeueAfter: 5 * time.Millisecond}, nil // check again soon
		}
		fmt.Printf("%s reconciled on attempt %d\n", key, n)
		settled <- struct{}{}
		return reconcile.Result{}, nil
	}
	giveUp := func(key string, err error) {
		fmt.Printf("%s given up after %d attempts: %v\n", key, attempts[key], err)
		settled <- struct{}{}
	}
	runner := reconcile.NewRunner(queue, reconcileKey,
		reconcile.WithDeadLetter(giveUp),
		reconcile.WithMaxRetries(3),
		reconcile.WithItemTimeout(time.Minute),
		reconcile.WithLogger(slog.New(slog.DiscardHandler)))

	done := make(chan struct{})
	go func() {
		runner.Run(ctx, 1)
		close(done)
	}()
	queue.Add("default/flaky")
	<-settled
	queue.Add("default/broken")
	<-settled
	queue.Add("default/job")
	<-settled
	cancel()
	<-done
	// Output:
	// default/flaky reconciled on attempt 3
	// default/broken given up after 4 attempts: image not found
	// default/job reconciled on attempt 2
}

// Tasks that must run in order (a, then b, then c) chain through parking:
// a task whose predecessor has not finished waits for that event, and a
// finished task wakes its successor, with no polling in between.
func ExampleWaitFor() {
	queue := workqueue.NewTypedRateLimitingQueue(
		workqueue.NewTypedItemExponentialFailureRateLimiter[string](0, 0))
	ctx, cancel := context.WithCancel(context.Background())
	after := map[string]string{"b": "a", "c": "b"}

	var mu sync.Mutex
	finished := map[string]bool{}
	last := make(chan struct{})
	reconcileTask := func(ctx context.Context, task string) (reconcile.Result, error) {
		mu.Lock()
		defer mu.Unlock()
		if before, ok := after[task]; ok && !finished[before] {
			fmt.Printf("%s waits for %s\n", task, before)
			return reconcile.WaitFor(before + " finished"), nil
		}
		finished[task] = true
		fmt.Printf("%s runs\n", task)
		queue.Wake(task + " finished")
		if task == "c" {
			close(last)
		}
		return reconcile.Result{}, nil
	}
	runner := reconcile.NewRunner(queue, reconcileTask)
	for _, task := range []string{"c", "b", "a"} {
		queue.Add(task)
	}
	done := make(chan struct{})
	go func() {
		runner.Run(ctx, 1)
		close(done)
	}()
	<-last
	cancel()
	<-done
	// Output:
	// c waits for b
	// b waits for a
	// a runs
	// b runs
	// c runs
}

// ExampleWithGracePeriod stops a Runner whose reconcile outlasts the grace
// period: Run hands out nothing more, cancels the reconcile's context once
// the grace period has passed, and returns when it ends.
func ExampleWithGracePeriod() {
	queue := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())
	started := make(chan struct{})
	slow := func(ctx context.Context, key string) (reconcile.Result, error) {
		close(started)
		<-ctx.Done() // a reconcile that would take too long
		fmt.Println("reconcile of", key, "ended:", ctx.Err())
		return reconcile.Result{}, ctx.Err()
	}
	runner := reconcile.NewRunner(queue, slow,
		reconcile.WithGracePeriod(10*time.Millisecond),
		reconcile.WithLogger(slog.New(slog.DiscardHandler)))
	queue.Add("default/a")
	queue.Add("default/b")

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		runner.Run(ctx, 1)
		close(done)
	}()
	<-started
	cancel() // as when a pod is told to stop, or loses its leader election
	<-done
	fmt.Println("queued, not reconciled:", queue.Len())
	// Output:
	// reconcile of default/a ended: context canceled
	// queued, not reconciled: 1
}
