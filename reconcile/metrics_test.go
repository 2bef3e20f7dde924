package reconcile

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-workqueue/workqueue"
	"github.com/go-workqueue/workqueue/metrics"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// runnerRecordingProvider is a recordingProvider that also keeps a
// Runner's metrics, the reconciles by result under the kind
// "reconciles/RESULT".
type runnerRecordingProvider struct {
	*recordingProvider
}

var _ workqueue.MetricsProvider = runnerRecordingProvider{}

type recordedResults struct {
	p    *recordingProvider
	name string
}

func (r recordedResults) Inc(result string) { r.p.Metric(r.name, "reconciles/"+result).Inc() }

func (p runnerRecordingProvider) NewReconcilesMetric(name string) ResultCounter {
	return recordedResults{p.recordingProvider, name}
}
func (p runnerRecordingProvider) NewReconcileErrorsMetric(name string) metrics.Counter {
	return p.Metric(name, "errors")
}
func (p runnerRecordingProvider) NewReconcileDurationMetric(name string) metrics.Histogram {
	return p.Metric(name, "reconcile duration")
}
func (p runnerRecordingProvider) NewActiveWorkersMetric(name string) metrics.Gauge {
	return p.Metric(name, "active")
}
func (p runnerRecordingProvider) NewWorkersMetric(name string) metrics.SettableGauge {
	return p.Metric(name, "workers")
}
func (p runnerRecordingProvider) NewReconcileWaitMetric(name string) metrics.Histogram {
	return p.Metric(name, "reconcile wait")
}

// TestRunnerMetrics runs one item per result on a bubble's clock and
// checks every Runner metric, on each kind of queue.
func TestRunnerMetrics(t *testing.T) {
	limiter := func() workqueue.TypedRateLimiter[string] {
		return workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Second, time.Minute)
	}
	queues := []struct {
		name string
		make func(p workqueue.MetricsProvider) workqueue.TypedRateLimitingInterface[string]
	}{
		{"rate-limiting", func(p workqueue.MetricsProvider) workqueue.TypedRateLimitingInterface[string] {
			return workqueue.NewTypedRateLimitingQueueWithConfig(limiter(), workqueue.TypedRateLimitingQueueConfig[string]{Name: "ctl", MetricsProvider: p})
		}},
		{"rate-limiting over a delaying queue", func(p workqueue.MetricsProvider) workqueue.TypedRateLimitingInterface[string] {
			return workqueue.NewTypedRateLimitingQueueWithConfig(limiter(), workqueue.TypedRateLimitingQueueConfig[string]{
				DelayingQueue: workqueue.NewTypedDelayingQueueWithConfig(workqueue.TypedDelayingQueueConfig[string]{Name: "ctl", MetricsProvider: p}),
			})
		}},
		{"priority", func(p workqueue.MetricsProvider) workqueue.TypedRateLimitingInterface[string] {
			return workqueue.NewTypedPriorityQueue(limiter(), workqueue.TypedPriorityQueueConfig[string]{Name: "ctl", MetricsProvider: p})
		}},
	}
	for _, queue := range queues {
		t.Run(queue.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p := runnerRecordingProvider{&recordingProvider{}}
				q := queue.make(p)
				var mu sync.Mutex
				attempts := map[string]int{}
				runner := NewRunner(q, func(ctx context.Context, item string) (Result, error) {
					mu.Lock()
					attempts[item]++
					attempt := attempts[item]
					mu.Unlock()
					time.Sleep(3 * time.Second)
					if attempt > 1 && item != "fail" {
						return Result{}, nil
					}
					switch item {
					case "requeue":
						return Result{Requeue: true}, nil
					case "after":
						return Result{RequeueAfter: time.Minute}, nil
					case "park":
						return WaitFor("event"), nil
					case "fail":
						return Result{}, errors.New("boom")
					case "terminal":
						return Result{}, TerminalError(errors.New("bad spec"))
					case "panic":
						panic("nil map")
					}
					return Result{}, nil
				}, WithMaxRetries(2), WithLogger(slog.New(slog.DiscardHandler)))
				for _, item := range []string{"ok", "requeue", "after", "park", "fail", "terminal", "panic"} {
					q.Add(item)
				}
				ctx, cancel := context.WithCancel(t.Context())
				exited := startRunner(ctx, runner, 2)
				time.Sleep(time.Second)
				synctest.Wait()
				assert.Equal(t, 2.0, p.Value("ctl", "active"), "both workers reconciling")
				assert.Equal(t, 2.0, p.Value("ctl", "workers"))
				time.Sleep(time.Minute)
				require.Equal(t, 1, q.(interface{ Wake(string) int }).Wake("event"))
				time.Sleep(time.Hour)
				cancel()
				<-exited

				want := map[string]float64{
					ResultSuccess: 5, ResultRequeue: 1, ResultRequeueAfter: 1, ResultParked: 1,
					ResultError: 2, ResultGivenUp: 1, ResultTerminal: 1, ResultPanic: 1,
				}
				for result, n := range want {
					assert.Equal(t, n, p.Value("ctl", "reconciles/"+result), "reconciles with result %s", result)
				}
				assert.Equal(t, 5.0, p.Value("ctl", "errors"), "errors: 2 retried, 1 given up, 1 terminal, 1 panic")
				durations := p.Observations("ctl", "reconcile duration")
				assert.Len(t, durations, 13, "one duration per reconcile")
				for _, d := range durations {
					assert.Equal(t, 3.0, d)
				}
				// Seven items added at 0 wait for two workers 3 s each;
				// the retries and requeues wait from the end of their delay.
				assert.ElementsMatch(t, []float64{0, 0, 3, 3, 6, 6, 9, 5, 2, 0, 0, 0, 0}, p.Observations("ctl", "reconcile wait"), "waits from the first add to the reconcile's start")
				assert.Equal(t, 0.0, p.Value("ctl", "active"))
				assert.Equal(t, 0.0, p.Value("ctl", "workers"), "workers after Run returned")
			})
		})
	}
}

// TestRunnerWithoutRunnerMetrics checks that a Runner over a queue whose
// provider has no Runner metrics, or that has no name, records none.
func TestRunnerWithoutRunnerMetrics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &recordingProvider{}
		for _, q := range []workqueue.TypedRateLimitingInterface[string]{
			workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](), workqueue.TypedRateLimitingQueueConfig[string]{Name: "plain", MetricsProvider: p}),
			workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](), workqueue.TypedRateLimitingQueueConfig[string]{MetricsProvider: runnerRecordingProvider{p}}),
		} {
			var reconciled atomic.Int32
			runner := NewRunner(q, func(context.Context, string) (Result, error) {
				reconciled.Add(1)
				return Result{}, errors.New("boom")
			}, WithMaxRetries(0), WithLogger(slog.New(slog.DiscardHandler)))
			q.Add("a")
			ctx, cancel := context.WithCancel(t.Context())
			exited := startRunner(ctx, runner, 1)
			synctest.Wait()
			require.Equal(t, int32(1), reconciled.Load())
			cancel()
			<-exited
		}
		for _, key := range p.Keys() {
			assert.NotContains(t, []string{"errors", "reconcile duration", "active", "workers", "reconciles/given_up"}, key[1], "metric %v", key)
		}
	})
}

// TestRunnerSetWorkers changes the workers of a running Run up and down on a
// bubble's clock, and checks how many reconcile at once.
func TestRunnerSetWorkers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := runnerRecordingProvider{&recordingProvider{}}
		q := workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[int](),
			workqueue.TypedRateLimitingQueueConfig[int]{Name: "ctl", MetricsProvider: p})
		var running, reconciled atomic.Int32
		release := make(chan struct{})
		runner := NewRunner(q, func(ctx context.Context, item int) (Result, error) {
			running.Add(1)
			defer running.Add(-1)
			<-release
			reconciled.Add(1)
			return Result{}, nil
		})
		assert.False(t, runner.SetWorkers(4), "before Run")
		for i := range 20 {
			q.Add(i)
		}
		ctx, cancel := context.WithCancel(t.Context())
		exited := startRunner(ctx, runner, 1)
		synctest.Wait()
		assert.Equal(t, int32(1), running.Load())

		require.True(t, runner.SetWorkers(4))
		synctest.Wait()
		assert.Equal(t, int32(4), running.Load(), "after SetWorkers(4)")
		assert.Equal(t, 4.0, p.Value("ctl", "workers"))
		assert.Equal(t, 4.0, p.Value("ctl", "active"))

		require.True(t, runner.SetWorkers(2))
		synctest.Wait()
		assert.Equal(t, int32(4), running.Load(), "the workers told to leave finish their reconciles")
		assert.Equal(t, 2.0, p.Value("ctl", "workers"))
		release <- struct{}{}
		release <- struct{}{}
		release <- struct{}{}
		release <- struct{}{}
		synctest.Wait()
		assert.Equal(t, int32(2), running.Load(), "after the four reconciles, two workers stay")

		cancel()
		close(release)
		<-exited
		assert.Equal(t, int32(6), reconciled.Load(), "the reconciles in flight finish, no more start")
		assert.False(t, runner.SetWorkers(3), "after Run returned")
		assert.Equal(t, 0.0, p.Value("ctl", "workers"))
		assert.PanicsWithValue(t, "workqueue: SetWorkers needs at least one worker, got 0", func() { runner.SetWorkers(0) })
	})
}

// TestRunnerSetWorkersConcurrently resizes a running Run from several
// goroutines while it reconciles, and checks that every item is reconciled
// once, never twice at once, and that Run still returns.
func TestRunnerSetWorkersConcurrently(t *testing.T) {
	const items = 2000
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[int]())
	var inFlight sync.Map
	var reconciled atomic.Int32
	done := make(chan struct{})
	runner := NewRunner(q, func(ctx context.Context, item int) (Result, error) {
		if _, twice := inFlight.LoadOrStore(item, true); twice {
			t.Errorf("item %d reconciled twice at once", item)
		}
		inFlight.Delete(item)
		if reconciled.Add(1) == items {
			close(done)
		}
		return Result{}, nil
	})
	ctx, cancel := context.WithCancel(t.Context())
	exited := startRunner(ctx, runner, 2)
	var resizers sync.WaitGroup
	for g := range 4 {
		resizers.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 1))
			for range 200 {
				runner.SetWorkers(1 + rng.IntN(8))
			}
		})
	}
	for i := range items {
		q.Add(i)
	}
	resizers.Wait()
	<-done
	cancel()
	<-exited
	assert.Equal(t, int32(items), reconciled.Load())
}
