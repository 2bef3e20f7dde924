package workqueue

import "fmt"

// The results a [RunnerMetricsProvider]'s reconciles metric counts.
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

// ResultCounterMetric counts by result; it must be safe for concurrent use.
type ResultCounterMetric interface {
	Inc(result string)
}

// RunnerMetricsProvider is a [MetricsProvider] that also records the
// metrics of a [Runner] over a queue that uses it ([MetricsSource]).
type RunnerMetricsProvider interface {
	MetricsProvider
	NewReconcilesMetric(name string) ResultCounterMetric    // reconciles ended, by result (ResultSuccess, ...)
	NewReconcileErrorsMetric(name string) CounterMetric     // reconciles that returned an error or panicked
	NewReconcileDurationMetric(name string) HistogramMetric // seconds a reconcile ran
	NewActiveWorkersMetric(name string) GaugeMetric         // workers reconciling an item
	NewWorkersMetric(name string) SettableGaugeMetric       // workers Run runs, not those told to leave; 0 when it is not running
	NewReconcileWaitMetric(name string) HistogramMetric     // seconds from ItemInfo.Added to the reconcile's start, over an InfoGetter
}

// MetricsSource is a queue that records its metrics with a provider under a
// name, which a [Runner] over it uses too.
type MetricsSource interface {
	MetricsConfig() (provider MetricsProvider, name string)
}

var (
	_ MetricsSource = (*Typed[int])(nil)
	_ MetricsSource = (*TypedDelayingQueue[int])(nil)
	_ MetricsSource = (*TypedRateLimitingQueue[int])(nil)
	_ MetricsSource = (*TypedPriorityQueue[int])(nil)
)

// runnerMetrics are a Runner's metrics; each does nothing when the queue
// records none, and on is false then, so that a reconcile does not read
// the clock for a duration nobody records.
type runnerMetrics struct {
	on         bool
	reconciles ResultCounterMetric
	errors     CounterMetric
	duration   HistogramMetric
	active     GaugeMetric
	workers    SettableGaugeMetric
	wait       HistogramMetric
}

func newRunnerMetrics(queue any) runnerMetrics {
	m := runnerMetrics{reconciles: noopEventCounter{}, errors: noopMetric{}, duration: noopMetric{}, active: noopMetric{}, workers: noopMetric{}, wait: noopMetric{}}
	src, ok := queue.(MetricsSource)
	if !ok {
		return m
	}
	provider, name := src.MetricsConfig()
	p, ok := provider.(RunnerMetricsProvider)
	if !ok || name == "" {
		return m
	}
	if m.reconciles = p.NewReconcilesMetric(name); m.reconciles == nil {
		m.reconciles = noopEventCounter{}
	}
	m.errors = orNoop(p.NewReconcileErrorsMetric(name))
	m.duration = orNoop(p.NewReconcileDurationMetric(name))
	m.active = orNoop(p.NewActiveWorkersMetric(name))
	m.workers = orNoop(p.NewWorkersMetric(name))
	m.wait = orNoop(p.NewReconcileWaitMetric(name))
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
