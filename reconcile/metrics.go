package reconcile

import (
	"fmt"

	"github.com/go-workqueue/workqueue"
	"github.com/go-workqueue/workqueue/internal/noop"
	"github.com/go-workqueue/workqueue/metrics"
)

// The results a [MetricsProvider]'s reconciles metric counts.
const (
	ResultSuccess      = "success"       // no error, and nothing requeued
	ResultRequeue      = "requeue"       // Result.Requeue, or WaitFor on a queue that cannot park
	ResultRequeueAfter = "requeue_after" // Result.RequeueAfter
	ResultParked       = "parked"        // Result.WaitFor
	ResultError        = "error"         // an error, retried or dropped by a shutdown
	ResultGivenUp      = "given_up"      // an error after the last retry WithMaxRetries allows
	ResultTerminal     = "terminal"      // a TerminalError
	ResultPanic        = "panic"         // a panic, retried or given up on
)

// ResultCounter counts by result; it must be safe for concurrent use.
type ResultCounter interface {
	Inc(result string)
}

// MetricsProvider is a metrics.Provider that also records the
// metrics of a [Runner] over a queue that uses it ([MetricsSource]).
type MetricsProvider interface {
	metrics.Provider
	NewReconcilesMetric(name string) ResultCounter            // reconciles ended, by result (ResultSuccess, ...)
	NewReconcileErrorsMetric(name string) metrics.Counter     // reconciles that returned an error or panicked
	NewReconcileDurationMetric(name string) metrics.Histogram // seconds a reconcile ran
	NewActiveWorkersMetric(name string) metrics.Gauge         // workers reconciling an item
	NewWorkersMetric(name string) metrics.SettableGauge       // workers Run runs, not those told to leave; 0 when it is not running
	NewReconcileWaitMetric(name string) metrics.Histogram     // seconds from ItemInfo.Added to the reconcile's start, over an InfoGetter
}

// MetricsSource is a queue that records its metrics with a provider under a
// name, which a [Runner] over it uses too.
type MetricsSource interface {
	MetricsConfig() (provider workqueue.MetricsProvider, name string)
}

var (
	_ MetricsSource = (*workqueue.Typed[int])(nil)
	_ MetricsSource = (*workqueue.TypedDelayingQueue[int])(nil)
	_ MetricsSource = (*workqueue.TypedRateLimitingQueue[int])(nil)
	_ MetricsSource = (*workqueue.TypedPriorityQueue[int])(nil)
)

// runnerMetrics are a Runner's metrics; each does nothing when the queue
// records none, and on is false then, so that a reconcile does not read
// the clock for a duration nobody records.
type runnerMetrics struct {
	on         bool
	reconciles ResultCounter
	errors     metrics.Counter
	duration   metrics.Histogram
	active     metrics.Gauge
	workers    metrics.SettableGauge
	wait       metrics.Histogram
}

func newRunnerMetrics(queue any) runnerMetrics {
	m := runnerMetrics{reconciles: noop.ByLabel{}, errors: noop.Metric{}, duration: noop.Metric{}, active: noop.Metric{}, workers: noop.Metric{}, wait: noop.Metric{}}
	src, ok := queue.(MetricsSource)
	if !ok {
		return m
	}
	provider, name := src.MetricsConfig()
	p, ok := provider.(MetricsProvider)
	if !ok || name == "" {
		return m
	}
	m.reconciles = noop.Or(p.NewReconcilesMetric(name))
	m.errors = noop.Or(p.NewReconcileErrorsMetric(name))
	m.duration = noop.Or(p.NewReconcileDurationMetric(name))
	m.active = noop.Or(p.NewActiveWorkersMetric(name))
	m.workers = noop.Or(p.NewWorkersMetric(name))
	m.wait = noop.Or(p.NewReconcileWaitMetric(name))
	m.on = true
	return m
}

// SetWorkers sets the workers of a running Run to n, starting the missing ones
// at once; each one beyond n leaves after its current reconcile, or at once if
// it waits for an item on a queue that can get with a context (else after its
// next item).
// It reports whether Run was running; before Run, once its context has ended
// and after it returns, it does nothing. It panics if n < 1.
func (r *Runner[T]) SetWorkers(n int) bool {
	if n < 1 {
		panic(fmt.Sprintf("workqueue: SetWorkers needs at least one worker, got %d", n))
	}
	return r.pool.resize(n)
}
