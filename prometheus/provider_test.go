package prometheus

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/go-workqueue/workqueue"
	"github.com/go-workqueue/workqueue/reconcile"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

var metricNames = []string{
	"workqueue_depth",
	"workqueue_adds_total",
	"workqueue_queue_duration_seconds",
	"workqueue_work_duration_seconds",
	"workqueue_unfinished_work_seconds",
	"workqueue_longest_running_processor_seconds",
	"workqueue_retries_total",
	"workqueue_delayed_items",
	"workqueue_parked_items",
	"workqueue_park_timeouts_total",
}

// gatherText returns the text exposition of everything reg holds.
func gatherText(t *testing.T, reg *prometheus.Registry) string {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	var buf bytes.Buffer
	for _, family := range families {
		_, err := expfmt.MetricFamilyToText(&buf, family)
		require.NoError(t, err)
	}
	return buf.String()
}

// checkGolden compares got with testdata/name, or rewrites the file with
// -update.
func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, string(want), got, "%s differs; if the change is intended, run go test -update and review the diff", path)
}

// TestMetricsAfterScriptedOperations drives a named rate-limiting queue on
// the bubble's exact clock and checks every series against a golden file:
// names, help texts, types, labels and values.
func TestMetricsAfterScriptedOperations(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := prometheus.NewRegistry()
		provider := NewProvider(reg)
		q := workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Second, time.Minute),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "controller", MetricsProvider: provider})

		q.Add("a")
		q.Add("b")
		q.Add("a")                         // collapsed: adds stays 2
		time.Sleep(250 * time.Millisecond) // a and b wait 250 ms
		item, _ := q.Get()                 // a
		time.Sleep(2 * time.Second)        // a runs 2 s; refreshes at 0.5, 1, 1.5, 2 s
		synctest.Wait()
		q.AddRateLimited(item) // retry in 1 s: delayed 1, retries 1
		q.Done(item)           // work 2 s
		q.AddAfter("c", time.Hour)
		q.AddAfter("c", time.Minute) // moved earlier: delayed stays 2, retries 3

		require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP workqueue_depth Items waiting in the work queue to be handed to a worker.
# TYPE workqueue_depth gauge
workqueue_depth{name="controller"} 1
# HELP workqueue_delayed_items Delayed adds and park backoffs pending in the work queue.
# TYPE workqueue_delayed_items gauge
workqueue_delayed_items{name="controller"} 2
# HELP workqueue_unfinished_work_seconds Summed seconds that the items now being processed have been in progress; steady growth means stuck workers.
# TYPE workqueue_unfinished_work_seconds gauge
workqueue_unfinished_work_seconds{name="controller"} 1.75
# HELP workqueue_longest_running_processor_seconds Seconds that the oldest item now being processed has been in progress.
# TYPE workqueue_longest_running_processor_seconds gauge
workqueue_longest_running_processor_seconds{name="controller"} 1.75
`), "workqueue_depth", "workqueue_delayed_items", "workqueue_unfinished_work_seconds", "workqueue_longest_running_processor_seconds"))

		time.Sleep(time.Second) // a is ready again
		synctest.Wait()
		checkGolden(t, "scripted.golden", gatherText(t, reg))

		q.ShutDown()
		assert.Equal(t, 0.0, testutil.ToFloat64(provider.delayed.WithLabelValues("controller")), "dropped items still counted")
	})
}

func TestMetricNamesPassLint(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := prometheus.NewRegistry()
		q := workqueue.NewTypedDelayingQueueWithConfig(workqueue.TypedDelayingQueueConfig[string]{
			Name: "lint", MetricsProvider: NewProvider(reg, WithNativeHistograms(1.1)),
		})
		defer q.ShutDown()
		q.Add("a")
		q.AddAfter("b", time.Second)
		item, _ := q.Get()
		q.Done(item)
		problems, err := testutil.GatherAndLint(reg)
		require.NoError(t, err)
		assert.Empty(t, problems)
		count, err := testutil.GatherAndCount(reg)
		require.NoError(t, err)
		assert.Equal(t, len(metricNames), count, "one series per metric")
	})
}

func TestSecondProviderReusesCollectors(t *testing.T) {
	reg := prometheus.NewRegistry()
	first := NewProvider(reg)
	second := NewProvider(reg)
	first.NewAddsMetric("q").Inc()
	second.NewAddsMetric("q").Inc()
	assert.Equal(t, 2.0, testutil.ToFloat64(first.adds.WithLabelValues("q")))
}

func TestDefaultRegisterer(t *testing.T) {
	first := NewProvider(prometheus.DefaultRegisterer)
	second := NewProvider(prometheus.DefaultRegisterer)
	t.Cleanup(func() {
		for _, c := range first.vectors() {
			prometheus.DefaultRegisterer.Unregister(c)
		}
	})
	second.NewDepthMetric("q").Inc()
	count, err := testutil.GatherAndCount(prometheus.DefaultGatherer, "workqueue_depth")
	require.NoError(t, err)
	assert.Equal(t, 1, count)
}

func TestDeleteQueue(t *testing.T) {
	reg := prometheus.NewRegistry()
	provider := NewProvider(reg)
	for _, name := range []string{"keep", "drop"} {
		q := workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedItemBasedRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: name, MetricsProvider: provider})
		q.Add("a")
		item, _ := q.Get()
		q.Done(item)
		q.AddRateLimited("b")
		q.ShutDown()
	}
	provider.DeleteQueue("drop")
	families, err := reg.Gather()
	require.NoError(t, err)
	require.Len(t, families, len(metricNames))
	for _, family := range families {
		require.Lenf(t, family.GetMetric(), 1, "%s: series", family.GetName())
		assert.Equalf(t, "keep", family.GetMetric()[0].GetLabel()[0].GetValue(), "%s: label", family.GetName())
	}
}

func TestUnnamedQueueRecordsNothing(t *testing.T) {
	reg := prometheus.NewRegistry()
	q := workqueue.NewTypedDelayingQueueWithConfig(workqueue.TypedDelayingQueueConfig[string]{MetricsProvider: NewProvider(reg)})
	q.Add("a")
	q.AddAfter("b", time.Hour)
	q.ShutDown()
	count, err := testutil.GatherAndCount(reg)
	require.NoError(t, err)
	assert.Zero(t, count)
}

func TestOptions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := prometheus.NewRegistry()
		provider := NewProvider(reg,
			WithNamespace("app"), WithSubsystem("jobs"),
			WithConstLabels(prometheus.Labels{"component": "scheduler"}),
			WithBuckets([]float64{0.1, 1}),
			WithUnfinishedWorkUpdatePeriod(time.Second))
		q := workqueue.NewTypedWithConfig(workqueue.TypedQueueConfig[string]{Name: "q", MetricsProvider: provider})
		defer q.ShutDown()
		q.Add("a")
		time.Sleep(500 * time.Millisecond)
		item, _ := q.Get()
		time.Sleep(time.Second)
		synctest.Wait()
		require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP app_jobs_queue_duration_seconds Seconds an item waited in the work queue, from its first add until a worker got it.
# TYPE app_jobs_queue_duration_seconds histogram
app_jobs_queue_duration_seconds_bucket{component="scheduler",name="q",le="0.1"} 0
app_jobs_queue_duration_seconds_bucket{component="scheduler",name="q",le="1"} 1
app_jobs_queue_duration_seconds_bucket{component="scheduler",name="q",le="+Inf"} 1
app_jobs_queue_duration_seconds_sum{component="scheduler",name="q"} 0.5
app_jobs_queue_duration_seconds_count{component="scheduler",name="q"} 1
# HELP app_jobs_unfinished_work_seconds Summed seconds that the items now being processed have been in progress; steady growth means stuck workers.
# TYPE app_jobs_unfinished_work_seconds gauge
app_jobs_unfinished_work_seconds{component="scheduler",name="q"} 0.5
`), "app_jobs_queue_duration_seconds", "app_jobs_unfinished_work_seconds"))
		q.Done(item)
	})
}

func TestBadConfigurationPanics(t *testing.T) {
	conflicting := prometheus.NewRegistry()
	conflicting.MustRegister(prometheus.NewCounter(prometheus.CounterOpts{Name: "workqueue_depth", Help: "something else"}))
	tests := []struct {
		name      string
		construct func()
		want      string
	}{
		{"nil registerer", func() { NewProvider(nil) },
			"workqueue: prometheus.NewProvider needs a registerer, got nil"},
		{"negative update period", func() { NewProvider(prometheus.NewRegistry(), WithUnfinishedWorkUpdatePeriod(-time.Second)) },
			"workqueue: prometheus.NewProvider needs a non-negative update period, got -1s"},
		{"native bucket factor not above 1", func() { NewProvider(prometheus.NewRegistry(), WithNativeHistograms(1)) },
			"workqueue: prometheus.NewProvider needs a native histogram bucket factor above 1, got 1"},
		{"typed nil registry", func() { NewProvider((*prometheus.Registry)(nil)) },
			"workqueue: prometheus.NewProvider needs a registerer, got nil"},
		{"buckets that do not increase", func() { NewProvider(prometheus.NewRegistry(), WithBuckets([]float64{2, 1})) },
			"workqueue: prometheus.NewProvider needs increasing buckets, got [2 1]"},
		{"repeated bucket", func() { NewProvider(prometheus.NewRegistry(), WithBuckets([]float64{1, 1})) },
			"workqueue: prometheus.NewProvider needs increasing buckets, got [1 1]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.PanicsWithValue(t, tt.want, tt.construct)
		})
	}
	t.Run("different metric under the same name", func(t *testing.T) {
		defer func() {
			r := recover()
			require.NotNil(t, r)
			assert.True(t, strings.HasPrefix(r.(string), "workqueue: registering a workqueue metric: "), "panic: %v", r)
		}()
		NewProvider(conflicting)
	})
}

// delayingQueue is what TestRetriesAndDelayedItems uses of a queue.
type delayingQueue interface {
	workqueue.TypedRateLimitingInterface[string]
	Reschedule(item string, d time.Duration)
	Park(item string, events ...string)
	Wake(event string) int
}

// TestRetriesAndDelayedItems pins what workqueue_retries_total and
// workqueue_delayed_items count, as the package doc's table states it, on
// a rate-limiting and a priority queue.
func TestRetriesAndDelayedItems(t *testing.T) {
	tests := []struct {
		name     string
		debounce workqueue.Debounce
		do       func(q delayingQueue)
		// wantRetries and wantDelayed are by queue kind: rate-limiting,
		// priority.
		wantRetries, wantDelayed [2]float64
	}{
		{"AddAfter with a delay", workqueue.Debounce{}, func(q delayingQueue) { q.AddAfter("a", time.Hour) }, [2]float64{1, 1}, [2]float64{1, 1}},
		{"AddAfter of zero", workqueue.Debounce{}, func(q delayingQueue) { q.AddAfter("a", 0) }, [2]float64{1, 0}, [2]float64{0, 0}},
		{"AddAfter of zero, debounced", workqueue.Debounce{Quiet: time.Second}, func(q delayingQueue) { q.AddAfter("a", 0) }, [2]float64{0, 0}, [2]float64{1, 1}},
		{"AddAfter twice, one item", workqueue.Debounce{}, func(q delayingQueue) {
			q.AddAfter("a", time.Hour)
			q.AddAfter("a", time.Minute)
		}, [2]float64{2, 2}, [2]float64{1, 1}},
		{"AddRateLimited", workqueue.Debounce{}, func(q delayingQueue) { q.AddRateLimited("a") }, [2]float64{1, 1}, [2]float64{1, 1}},
		{"Reschedule", workqueue.Debounce{}, func(q delayingQueue) { q.Reschedule("a", time.Hour) }, [2]float64{1, 1}, [2]float64{1, 1}},
		{"Reschedule of zero", workqueue.Debounce{}, func(q delayingQueue) { q.Reschedule("a", 0) }, [2]float64{1, 0}, [2]float64{0, 0}},
		{"AddAfter after ShutDown", workqueue.Debounce{}, func(q delayingQueue) {
			q.ShutDown()
			q.AddAfter("a", time.Hour)
		}, [2]float64{0, 0}, [2]float64{0, 0}},
		{"a park's backoff and a delayed add of one item count apart, but on a priority queue", workqueue.Debounce{}, func(q delayingQueue) {
			q.Add("p")
			item, _ := q.Get()
			q.Park(item, "e")
			q.Done(item)
			q.Wake("e") // p waits for its park backoff
			q.AddAfter("p", time.Hour)
		}, [2]float64{1, 1}, [2]float64{2, 1}},
	}
	for _, tt := range tests {
		for kind, priority := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/priority=%v", tt.name, priority), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					provider := NewProvider(prometheus.NewRegistry())
					limiter := workqueue.DefaultTypedItemBasedRateLimiter[string]()
					var q delayingQueue
					if priority {
						q = workqueue.NewTypedPriorityQueue(limiter, workqueue.TypedPriorityQueueConfig[string]{
							Name: "q", MetricsProvider: provider, Debounce: tt.debounce})
					} else {
						q = workqueue.NewTypedRateLimitingQueueWithConfig(limiter, workqueue.TypedRateLimitingQueueConfig[string]{
							Name: "q", MetricsProvider: provider, Debounce: tt.debounce})
					}
					defer q.ShutDown()
					tt.do(q)
					assert.Equal(t, tt.wantRetries[kind], testutil.ToFloat64(provider.retries.WithLabelValues("q")), "retries")
					if !q.ShuttingDown() {
						assert.Equal(t, tt.wantDelayed[kind], testutil.ToFloat64(provider.delayed.WithLabelValues("q")), "delayed_items")
					}
				})
			})
		}
	}
}

// TestBucketsApplyToEveryHistogram checks that WithBuckets sets the
// buckets of all four duration histograms, the Runner's included.
func TestBucketsApplyToEveryHistogram(t *testing.T) {
	tests := []struct {
		name    string
		buckets []float64
		want    int
	}{
		{"three", []float64{1, 2, 3}, 3},
		{"nil means the default", nil, len(DefaultBuckets)},
		{"none means the default", []float64{}, len(DefaultBuckets)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			provider := NewProvider(prometheus.NewRegistry(), WithBuckets(tt.buckets))
			for name, vec := range map[string]*prometheus.HistogramVec{
				"queue_duration": provider.latency, "work_duration": provider.workDuration,
				"reconcile_duration": provider.reconcileTime, "reconcile_wait": provider.reconcileWait,
			} {
				vec.WithLabelValues("q").Observe(0.5)
				m := &dto.Metric{}
				require.NoError(t, vec.WithLabelValues("q").(prometheus.Metric).Write(m))
				assert.Lenf(t, m.GetHistogram().GetBucket(), tt.want, "%s: buckets", name)
			}
		})
	}
}

// TestDeleteQueueRemovesEverySeries checks DeleteQueue against every
// metric of the package doc's table, those with a second label included.
func TestDeleteQueueRemovesEverySeries(t *testing.T) {
	reg := prometheus.NewRegistry()
	p := NewProvider(reg)
	for _, name := range []string{"keep", "drop"} {
		p.NewDepthMetric(name).Inc()
		p.NewAddsMetric(name).Inc()
		p.NewLatencyMetric(name).Observe(1)
		p.NewWorkDurationMetric(name).Observe(1)
		p.NewUnfinishedWorkSecondsMetric(name).Set(1)
		p.NewLongestRunningProcessorSecondsMetric(name).Set(1)
		p.NewRetriesMetric(name).Inc()
		p.NewDelayedItemsMetric(name).Set(1)
		p.NewDepthWithPriorityMetric(name).Inc(1)
		p.NewParkedItemsMetric(name).Set(1)
		p.NewWakesMetric(name).Inc("e")
		p.NewParkTimeoutsMetric(name).Inc()
		p.NewWaitingForSlotMetric(name).Set(1)
		p.NewGroupsAtLimitMetric(name).Set(1)
		p.NewReconcilesMetric(name).Inc(reconcile.ResultSuccess)
		p.NewReconcileErrorsMetric(name).Inc()
		p.NewReconcileDurationMetric(name).Observe(1)
		p.NewReconcileWaitMetric(name).Observe(1)
		p.NewActiveWorkersMetric(name).Inc()
		p.NewWorkersMetric(name).Set(1)
	}
	p.DeleteQueue("drop")
	families, err := reg.Gather()
	require.NoError(t, err)
	require.Len(t, families, 20)
	for _, family := range families {
		require.Lenf(t, family.GetMetric(), 1, "%s: series", family.GetName())
		for _, l := range family.GetMetric()[0].GetLabel() {
			if l.GetName() == "name" {
				assert.Equalf(t, "keep", l.GetValue(), "%s: label name", family.GetName())
			}
		}
	}
}

// TestQueueDurationStartsWhenReady pins what the package doc says of
// workqueue_queue_duration_seconds: for a delayed or debounced add, the
// first add counts from the end of its delay.
func TestQueueDurationStartsWhenReady(t *testing.T) {
	for _, tt := range []struct {
		name     string
		debounce workqueue.Debounce
		add      func(q *workqueue.TypedRateLimitingQueue[string])
	}{
		{"AddAfter", workqueue.Debounce{}, func(q *workqueue.TypedRateLimitingQueue[string]) { q.AddAfter("a", time.Second) }},
		{"debounced Add", workqueue.Debounce{Quiet: time.Second}, func(q *workqueue.TypedRateLimitingQueue[string]) { q.Add("a") }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				provider := NewProvider(prometheus.NewRegistry())
				q := workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedItemBasedRateLimiter[string](),
					workqueue.TypedRateLimitingQueueConfig[string]{Name: "q", MetricsProvider: provider, Debounce: tt.debounce})
				defer q.ShutDown()
				tt.add(q)
				time.Sleep(3 * time.Second) // ready after 1 s, then waits 2 s
				synctest.Wait()
				item, _ := q.Get()
				q.Done(item)
				m := &dto.Metric{}
				require.NoError(t, provider.latency.WithLabelValues("q").(prometheus.Metric).Write(m))
				assert.Equal(t, 2.0, m.GetHistogram().GetSampleSum())
			})
		})
	}
}
