package redisqueue

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/go-workqueue/workqueue"
	wqprometheus "github.com/go-workqueue/workqueue/prometheus"
	"github.com/go-workqueue/workqueue/reconcile"
	"github.com/go-workqueue/workqueue/redis/redistest"
)

// TestRunnerStopHandsInFlightRetriesToOtherHandles checks what
// redis/README.md promises under a reconcile.Runner: when Run's context
// ends while a reconcile is in flight, the retry or requeue that reconcile
// asks for reaches Redis before Run shuts its handle down, so another
// handle of the queue gets the key; a reconcile that succeeds leaves
// nothing behind. Handle a runs the Runner with one worker; handle b plays
// the other process.
func TestRunnerStopHandsInFlightRetriesToOtherHandles(t *testing.T) {
	s := redistest.Start(t, redistest.Options{})
	client := s.Client()
	opts := Options[string]{RateLimit: &RateLimit{Base: 10 * time.Millisecond, Max: 100 * time.Millisecond}}
	tests := []struct {
		name         string
		result       reconcile.Result
		err          error
		wantAgain    bool // b gets the key again
		wantRequeues int  // the key's failure count in Redis afterwards
	}{
		{name: "error", err: errors.New("not yet"), wantAgain: true, wantRequeues: 1},
		{name: "Requeue", result: reconcile.Result{Requeue: true}, wantAgain: true, wantRequeues: 1},
		{name: "RequeueAfter", result: reconcile.Result{RequeueAfter: 100 * time.Millisecond}, wantAgain: true, wantRequeues: 0},
		{name: "success", wantAgain: false, wantRequeues: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := newTestQueue(t, client, opts)
			b := newHandle(t, client, queueNameOf(a), opts)
			b.Add("key")

			started := make(chan string, 1)
			finish := make(chan struct{})
			release := sync.OnceFunc(func() { close(finish) })
			var reconcileErr error // the reconcile's ctx.Err() as it returns
			reconcileItem := func(ctx context.Context, item string) (reconcile.Result, error) {
				started <- item
				<-finish
				reconcileErr = ctx.Err()
				return tt.result, tt.err
			}
			runner := reconcile.NewRunner[string](a, reconcileItem, reconcile.WithGracePeriod(10*time.Second))
			ctx, cancel := context.WithCancel(context.Background())
			ran := make(chan struct{})
			go func() {
				defer close(ran)
				runner.Run(ctx, 1)
			}()
			// On a failure below, end the reconcile and Run before the
			// handles' cleanups wait for the key's Done.
			defer func() {
				cancel()
				release()
				select {
				case <-ran:
				case <-time.After(15 * time.Second):
					t.Error("Run still runs 15s after its context's end and the reconcile's return")
				}
			}()

			select {
			case item := <-started:
				require.Equal(t, "key", item, "the reconcile got the wrong key")
			case <-time.After(10 * time.Second):
				t.Fatal("the reconcile did not start within 10s")
			}
			cancel()
			// While the reconcile is in flight, Run keeps the handle up:
			// a handle shut down now would drop the retry.
			require.Never(t, a.ShuttingDown, 200*time.Millisecond, time.Millisecond,
				"Run shut handle a down with a reconcile in flight")
			release()
			select {
			case <-ran:
			case <-time.After(15 * time.Second):
				t.Fatal("Run still runs 15s after its context's end and the reconcile's return")
			}
			require.True(t, a.ShuttingDown(), "Run returned without shutting handle a down")
			assert.NoError(t, reconcileErr, "the reconcile's context ended within the grace period")
			assert.False(t, b.ShuttingDown(), "handle b was shut down")

			// a's Done acknowledged the key; the retry or requeue, if
			// any, waits in Redis for any handle.
			snap, err := b.SnapshotContext(context.Background(), 10)
			require.NoError(t, err)
			assert.Equal(t, 0, snap.Processing, "keys processing after Run returned: %+v", snap)
			var waiting []string
			waiting = append(waiting, snap.Queued...)
			for _, d := range snap.Delayed {
				waiting = append(waiting, d.Item)
			}
			if tt.wantAgain {
				assert.Equal(t, []string{"key"}, waiting, "keys queued or delayed after Run returned: %+v", snap)
			} else {
				assert.Empty(t, waiting, "keys queued or delayed after Run returned: %+v", snap)
			}
			assert.Equal(t, len(waiting), snap.Depth+snap.Waiting, "Depth+Waiting after Run returned: %+v", snap)
			assert.Equal(t, tt.wantRequeues, b.NumRequeues("key"), "NumRequeues after Run returned")

			if tt.wantAgain {
				getCtx, getCancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer getCancel()
				item, err := b.GetContext(getCtx)
				require.NoError(t, err, "handle b did not get the key again within 5s")
				assert.Equal(t, "key", item)
				b.Done(item)
			}
			// Nothing more comes: the key was handed out again once at
			// most.
			assert.Equal(t, 0, b.Len(), "Len at the end")
			getCtx, getCancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer getCancel()
			item, err := b.GetContext(getCtx)
			if err == nil {
				b.Done(item)
			}
			assert.ErrorIs(t, err, context.DeadlineExceeded, "handle b got %q once more", item)
		})
	}
}

// TestRunnerKeepsThePriority checks that a reconcile.Runner over the Redis
// queue, a reconcile.Prioritized queue, retries and requeues a key at its
// priority, or at Result.Priority when the reconcile sets it. Handle a runs
// the Runner with one worker and stops it while the reconcile is in
// flight, so that the retry waits in Redis; handle b gets it back with its
// priority.
func TestRunnerKeepsThePriority(t *testing.T) {
	s := redistest.Start(t, redistest.Options{})
	client := s.Client()
	opts := Options[string]{RateLimit: &RateLimit{Base: 10 * time.Millisecond, Max: 100 * time.Millisecond}}
	three := 3
	tests := []struct {
		name   string
		result reconcile.Result
		err    error
		want   int
	}{
		{name: "error", err: errors.New("not yet"), want: 7},
		{name: "Requeue", result: reconcile.Result{Requeue: true}, want: 7},
		{name: "RequeueAfter", result: reconcile.Result{RequeueAfter: 50 * time.Millisecond}, want: 7},
		{name: "Result.Priority", result: reconcile.Result{Requeue: true, Priority: &three}, want: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := newTestQueue(t, client, opts)
			b := newHandle(t, client, queueNameOf(a), opts)
			seven := 7
			b.AddWithOpts(workqueue.AddOpts{Priority: &seven}, "key")

			started := make(chan struct{}, 1)
			finish := make(chan struct{})
			runner := reconcile.NewRunner[string](a, func(context.Context, string) (reconcile.Result, error) {
				started <- struct{}{}
				<-finish
				return tt.result, tt.err
			}, reconcile.WithLogger(slog.New(slog.DiscardHandler)))
			ctx, cancel := context.WithCancel(context.Background())
			ran := make(chan struct{})
			go func() {
				defer close(ran)
				runner.Run(ctx, 1)
			}()
			select {
			case <-started:
			case <-time.After(10 * time.Second):
				cancel()
				close(finish)
				<-ran
				t.Fatal("the reconcile did not start within 10s")
			}
			cancel()
			close(finish)
			<-ran

			getCtx, getCancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer getCancel()
			item, priority, err := b.GetWithPriorityContext(getCtx)
			require.NoError(t, err, "handle b did not get the key again within 5s")
			assert.Equal(t, "key", item)
			assert.Equal(t, tt.want, priority, "the priority of the key's retry")
			b.Done(item)
		})
	}
}

// TestRunnerRecordsItsMetricsWithTheHandles checks that the Redis queue is
// a reconcile.MetricsSource: a Runner over a handle with a provider records
// its reconciles there, under the handle's metrics name.
func TestRunnerRecordsItsMetricsWithTheHandles(t *testing.T) {
	s := redistest.Start(t, redistest.Options{})
	reg := prometheus.NewRegistry()
	q := newTestQueue(t, s.Client(), Options[string]{Name: "ctl", MetricsProvider: wqprometheus.NewProvider(reg)})
	_ = reconcile.MetricsSource(q)
	q.Add("good")
	q.Add("bad")
	var reconciled sync.WaitGroup
	reconciled.Add(2)
	runner := reconcile.NewRunner[string](q, func(_ context.Context, item string) (reconcile.Result, error) {
		defer reconciled.Done()
		if item == "bad" {
			return reconcile.Result{}, reconcile.TerminalError(errors.New("bad spec"))
		}
		return reconcile.Result{}, nil
	}, reconcile.WithLogger(slog.New(slog.DiscardHandler)))
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() {
		defer close(ran)
		runner.Run(ctx, 2)
	}()
	reconciled.Wait()
	cancel()
	<-ran
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP workqueue_reconcile_errors_total Reconciles of the work queue's items that returned an error or panicked.
# TYPE workqueue_reconcile_errors_total counter
workqueue_reconcile_errors_total{name="ctl"} 1
# HELP workqueue_reconciles_total Reconciles of the work queue's items by a Runner, by result.
# TYPE workqueue_reconciles_total counter
workqueue_reconciles_total{name="ctl",result="success"} 1
workqueue_reconciles_total{name="ctl",result="terminal"} 1
# HELP workqueue_workers Workers the work queue's Runner runs.
# TYPE workqueue_workers gauge
workqueue_workers{name="ctl"} 0
`), "workqueue_reconciles_total", "workqueue_reconcile_errors_total", "workqueue_workers"))
}
