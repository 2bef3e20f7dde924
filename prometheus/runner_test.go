package prometheus

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/go-workqueue/workqueue"
	"github.com/go-workqueue/workqueue/reconcile"
)

// histogramOf returns the sample count and sum of the histogram family
// name's series for the queue ctl.
func histogramOf(t *testing.T, reg *prometheus.Registry, name string) (uint64, float64) {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if m.GetLabel()[0].GetValue() == "ctl" {
				return m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()
			}
		}
	}
	t.Fatalf("no series of %s for ctl", name)
	return 0, 0
}

// TestRunnerMetrics checks every series of a Runner after a scripted run:
// two items wait 1 s for Run, then run 2 s each on two of three workers,
// one succeeding and one failing for good.
func TestRunnerMetrics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := prometheus.NewRegistry()
		q := workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "ctl", MetricsProvider: NewProvider(reg)})
		release := make(chan struct{})
		runner := reconcile.NewRunner(q, func(_ context.Context, item string) (reconcile.Result, error) {
			<-release
			time.Sleep(2 * time.Second)
			if item == "bad" {
				return reconcile.Result{}, reconcile.TerminalError(errors.New("bad spec"))
			}
			return reconcile.Result{}, nil
		}, reconcile.WithLogger(slog.New(slog.DiscardHandler)))
		q.Add("good")
		q.Add("bad")
		time.Sleep(time.Second)
		ctx, cancel := context.WithCancel(t.Context())
		exited := make(chan struct{})
		go func() {
			runner.Run(ctx, 3)
			close(exited)
		}()
		synctest.Wait()
		require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP workqueue_active_workers Workers of the work queue's Runner reconciling an item.
# TYPE workqueue_active_workers gauge
workqueue_active_workers{name="ctl"} 2
# HELP workqueue_workers Workers the work queue's Runner runs.
# TYPE workqueue_workers gauge
workqueue_workers{name="ctl"} 3
`), "workqueue_active_workers", "workqueue_workers"))
		close(release)
		time.Sleep(time.Minute)
		cancel()
		<-exited

		require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP workqueue_active_workers Workers of the work queue's Runner reconciling an item.
# TYPE workqueue_active_workers gauge
workqueue_active_workers{name="ctl"} 0
# HELP workqueue_workers Workers the work queue's Runner runs.
# TYPE workqueue_workers gauge
workqueue_workers{name="ctl"} 0
# HELP workqueue_reconcile_errors_total Reconciles of the work queue's items that returned an error or panicked.
# TYPE workqueue_reconcile_errors_total counter
workqueue_reconcile_errors_total{name="ctl"} 1
# HELP workqueue_reconciles_total Reconciles of the work queue's items by a Runner, by result.
# TYPE workqueue_reconciles_total counter
workqueue_reconciles_total{name="ctl",result="success"} 1
workqueue_reconciles_total{name="ctl",result="terminal"} 1
`), "workqueue_active_workers", "workqueue_workers", "workqueue_reconcile_errors_total", "workqueue_reconciles_total"))
		n, sum := histogramOf(t, reg, "workqueue_reconcile_duration_seconds")
		assert.Equal(t, uint64(2), n, "reconcile durations")
		assert.Equal(t, 4.0, sum, "reconcile durations: 2 s each")
		n, sum = histogramOf(t, reg, "workqueue_reconcile_wait_seconds")
		assert.Equal(t, uint64(2), n, "reconcile waits")
		assert.Equal(t, 2.0, sum, "reconcile waits: 1 s each")
	})
}
