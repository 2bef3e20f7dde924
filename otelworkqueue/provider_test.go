package otelworkqueue

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.uber.org/goleak"

	"github.com/go-workqueue/workqueue"
	"github.com/go-workqueue/workqueue/reconcile"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// collect returns every data point the reader holds, by instrument name and
// then by the attribute set's encoding ("name=q" or "event=x,name=q").
func collect(t *testing.T, reader sdkmetric.Reader) map[string]map[string]any {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(context.Background(), &rm))
	got := map[string]map[string]any{}
	key := func(s attribute.Set) string {
		var parts []string
		for _, kv := range s.ToSlice() {
			parts = append(parts, string(kv.Key)+"="+kv.Value.String())
		}
		return strings.Join(parts, ",")
	}
	for _, sm := range rm.ScopeMetrics {
		require.Equal(t, ScopeName, sm.Scope.Name)
		for _, m := range sm.Metrics {
			points := map[string]any{}
			switch data := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range data.DataPoints {
					points[key(p.Attributes)] = p.Value
				}
			case metricdata.Gauge[float64]:
				for _, p := range data.DataPoints {
					points[key(p.Attributes)] = p.Value
				}
			case metricdata.Histogram[float64]:
				for _, p := range data.DataPoints {
					points[key(p.Attributes)] = [2]any{p.Count, p.Sum}
				}
			default:
				t.Fatalf("instrument %s has data of type %T", m.Name, m.Data)
			}
			got[m.Name] = points
		}
	}
	return got
}

// TestMetricsAfterScriptedOperations drives a named rate-limiting queue on
// the bubble's exact clock and checks the value of every instrument it
// records.
func TestMetricsAfterScriptedOperations(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reader := sdkmetric.NewManualReader()
		meters := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
		q := workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Second, time.Minute),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "controller", MetricsProvider: NewProvider(WithMeterProvider(meters))})

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
		time.Sleep(500 * time.Millisecond)
		synctest.Wait() // a refresh with nothing in flight

		const queue = "name=controller"
		got := collect(t, reader)
		want := map[string]map[string]any{
			"workqueue.depth":                     {queue: int64(1)},
			"workqueue.adds":                      {queue: int64(2)},
			"workqueue.queue_duration":            {queue: [2]any{uint64(1), 0.25}},
			"workqueue.work_duration":             {queue: [2]any{uint64(1), 2.0}},
			"workqueue.unfinished_work":           {queue: 0.0},
			"workqueue.longest_running_processor": {queue: 0.0},
			"workqueue.retries":                   {queue: int64(3)},
			"workqueue.delayed_items":             {queue: 2.0},
		}
		assert.Equal(t, want, got)

		time.Sleep(time.Second) // a is ready again
		synctest.Wait()
		got = collect(t, reader)
		assert.Equal(t, int64(2), got["workqueue.depth"][queue], "depth after a's retry")
		assert.Equal(t, 1.0, got["workqueue.delayed_items"][queue], "delayed after a's retry")
		q.ShutDown()
		assert.Equal(t, 0.0, collect(t, reader)["workqueue.delayed_items"][queue], "dropped items still counted")
	})
}

// TestParkingGroupsAndPriorities checks the instruments of the additions:
// depth by priority, parking and group limits, with the bound on the values
// of the priority and event attributes.
func TestParkingGroupsAndPriorities(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	provider := NewProvider(WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))))

	pq := workqueue.NewTypedPriorityQueue(workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedPriorityQueueConfig[string]{Name: "pq", MetricsProvider: provider})
	defer pq.ShutDown()
	for priority := range MaxPriorityValues + 5 {
		pq.AddWithOpts(workqueue.AddOpts{Priority: &priority}, fmt.Sprint("a", priority), fmt.Sprint("b", priority))
	}
	byPriority := collect(t, reader)["workqueue.depth_by_priority"]
	assert.Len(t, byPriority, MaxPriorityValues+1, "series of workqueue.depth_by_priority")
	assert.Equal(t, int64(2), byPriority["name=pq,priority=0"])
	assert.Equal(t, int64(10), byPriority["name=pq,priority=other"])
	item, _ := pq.Get() // the highest priority, counted under "other"
	pq.Done(item)
	assert.Equal(t, int64(9), collect(t, reader)["workqueue.depth_by_priority"]["name=pq,priority=other"])

	parking := workqueue.NewTypedWithConfig(workqueue.TypedQueueConfig[string]{Name: "parking", MetricsProvider: provider})
	defer parking.ShutDown()
	for i := range MaxEventValues + 2 {
		parking.Add(fmt.Sprint("p", i))
		item, _ := parking.Get()
		parking.Park(item, fmt.Sprint("e", i))
		parking.Done(item)
	}
	assert.Equal(t, float64(MaxEventValues+2), collect(t, reader)["workqueue.parked_items"]["name=parking"])
	for i := range MaxEventValues + 2 {
		require.Equal(t, 1, parking.Wake(fmt.Sprint("e", i)))
	}
	points := collect(t, reader)
	assert.Equal(t, 0.0, points["workqueue.parked_items"]["name=parking"])
	wakes := points["workqueue.wakes"]
	assert.Len(t, wakes, MaxEventValues+1, "series of workqueue.wakes")
	assert.Equal(t, int64(1), wakes["event=e0,name=parking"])
	assert.Equal(t, int64(2), wakes["event=other,name=parking"])

	groups := workqueue.NewTypedWithConfig(workqueue.TypedQueueConfig[string]{
		Name: "groups", MetricsProvider: provider,
		GroupLimits: &workqueue.GroupLimits[string]{Group: func(string) string { return "g" }, Default: 1},
	})
	defer groups.ShutDown()
	groups.Add("x")
	groups.Add("y")
	item, _ = groups.Get() // x holds g's one slot; y waits for it
	points = collect(t, reader)
	assert.Equal(t, 1.0, points["workqueue.items_waiting_for_slot"]["name=groups"])
	assert.Equal(t, 1.0, points["workqueue.groups_at_limit"]["name=groups"])
	groups.Done(item)
	points = collect(t, reader)
	assert.Equal(t, 0.0, points["workqueue.items_waiting_for_slot"]["name=groups"])
	assert.Equal(t, 0.0, points["workqueue.groups_at_limit"]["name=groups"])
}

// prometheusNames are the metric families of the prometheus package.
var prometheusNames = []string{
	"workqueue_active_workers",
	"workqueue_adds_total",
	"workqueue_delayed_items",
	"workqueue_depth",
	"workqueue_depth_by_priority",
	"workqueue_groups_at_limit",
	"workqueue_items_waiting_for_slot",
	"workqueue_longest_running_processor_seconds",
	"workqueue_park_timeouts_total",
	"workqueue_parked_items",
	"workqueue_queue_duration_seconds",
	"workqueue_reconcile_duration_seconds",
	"workqueue_reconcile_errors_total",
	"workqueue_reconcile_wait_seconds",
	"workqueue_reconciles_total",
	"workqueue_retries_total",
	"workqueue_unfinished_work_seconds",
	"workqueue_wakes_total",
	"workqueue_work_duration_seconds",
	"workqueue_workers",
}

// TestPrometheusExporterKeepsTheNames scrapes OpenTelemetry's Prometheus
// exporter over HTTP after a queue of each kind has recorded every
// instrument, and finds the prometheus package's metric names with the
// label name.
func TestPrometheusExporterKeepsTheNames(t *testing.T) {
	reg := prometheus.NewRegistry()
	exporter, err := otelprom.New(otelprom.WithRegisterer(reg))
	require.NoError(t, err)
	meters := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter))
	defer func() { require.NoError(t, meters.Shutdown(context.Background())) }()
	provider := NewProvider(WithMeterProvider(meters))

	// The queues run in a bubble, whose clock moves only when every
	// goroutine in it waits, so each refresh and timeout below happens
	// before the scrape. The scrape itself runs outside, over real HTTP.
	synctest.Test(t, func(t *testing.T) {
		q := workqueue.NewTypedPriorityQueue(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedPriorityQueueConfig[string]{
				Name: "scraped", MetricsProvider: provider,
				GroupLimits: &workqueue.GroupLimits[string]{Group: func(string) string { return "g" }, Default: 1},
			})
		defer q.ShutDown()
		q.AddRateLimited("a")
		q.Add("b")
		q.Add("c")
		item, _ := q.Get() // holds g's one slot: the other waits for it
		time.Sleep(time.Second)
		synctest.Wait() // the unfinished-work gauges refreshed while item ran
		q.Park(item, "event")
		q.Done(item)
		q.Wake("event")
		item, _ = q.Get()
		q.Done(item)

		timed := workqueue.NewTypedWithConfig(workqueue.TypedQueueConfig[string]{
			Name: "timed", MetricsProvider: provider, MaxParkTime: time.Minute,
		})
		defer timed.ShutDown()
		timed.Add("x")
		x, _ := timed.Get()
		timed.Park(x)
		timed.Done(x)
		x, _ = timed.Get() // back after its park timed out
		timed.Done(x)

		runner := reconcile.NewRunner(q, func(context.Context, string) (reconcile.Result, error) {
			return reconcile.Result{}, errors.New("boom")
		}, reconcile.WithMaxRetries(0), reconcile.WithLogger(slog.New(slog.DiscardHandler)))
		ctx, cancel := context.WithCancel(t.Context())
		go runner.Run(ctx, 1)
		synctest.Wait()
		cancel()
		synctest.Wait()
	})

	server := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer server.Close()
	resp, err := http.Get(server.URL)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(string(body)))
	require.NoError(t, err, "scrape:\n%s", body)

	var names []string
	for name, family := range families {
		if !strings.HasPrefix(name, "workqueue_") {
			continue
		}
		names = append(names, name)
		for _, m := range family.GetMetric() {
			var queue string
			for _, l := range m.GetLabel() {
				if l.GetName() == "name" {
					queue = l.GetValue()
				}
			}
			assert.Contains(t, []string{"scraped", "timed"}, queue, "%s: label name", name)
		}
	}
	slices.Sort(names)
	assert.Equal(t, prometheusNames, names)
}

// TestRunnerMetrics checks the values of a Runner's instruments after a
// success and a terminal error, while Run runs and after it returns.
func TestRunnerMetrics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reader := sdkmetric.NewManualReader()
		q := workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{
				Name: "ctl", MetricsProvider: NewProvider(WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)))),
			})
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
		time.Sleep(time.Second) // each waits 1 s for Run
		ctx, cancel := context.WithCancel(t.Context())
		exited := make(chan struct{})
		go func() {
			runner.Run(ctx, 3)
			close(exited)
		}()
		synctest.Wait()
		const queue = "name=ctl"
		got := collect(t, reader)
		assert.Equal(t, int64(2), got["workqueue.active_workers"][queue])
		assert.Equal(t, 3.0, got["workqueue.workers"][queue])
		close(release)
		time.Sleep(time.Minute)
		cancel()
		<-exited

		got = collect(t, reader)
		assert.Equal(t, map[string]any{"name=ctl,result=success": int64(1), "name=ctl,result=terminal": int64(1)}, got["workqueue.reconciles"])
		assert.Equal(t, int64(1), got["workqueue.reconcile_errors"][queue])
		assert.Equal(t, [2]any{uint64(2), 4.0}, got["workqueue.reconcile_duration"][queue])
		assert.Equal(t, [2]any{uint64(2), 2.0}, got["workqueue.reconcile_wait"][queue])
		assert.Equal(t, int64(0), got["workqueue.active_workers"][queue])
		assert.Equal(t, 0.0, got["workqueue.workers"][queue])
	})
}

func TestBadConfigurationPanics(t *testing.T) {
	tests := []struct {
		name string
		opt  Option
		want string
	}{
		{"negative update period", WithUnfinishedWorkUpdatePeriod(-time.Second),
			"workqueue: otelworkqueue.NewProvider needs a non-negative update period, got -1s"},
		{"buckets that do not increase", WithBuckets([]float64{2, 1}),
			"workqueue: otelworkqueue.NewProvider needs increasing buckets, got [2 1]"},
		{"repeated bucket", WithBuckets([]float64{1, 1}),
			"workqueue: otelworkqueue.NewProvider needs increasing buckets, got [1 1]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.PanicsWithValue(t, tt.want, func() { NewProvider(tt.opt) })
		})
	}
}

func TestOptions(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	provider := NewProvider(WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))),
		WithBuckets([]float64{1, 2}), WithUnfinishedWorkUpdatePeriod(time.Minute))
	assert.Equal(t, time.Minute, provider.UnfinishedWorkUpdatePeriod())
	provider.NewLatencyMetric("q").Observe(1.5)
	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(context.Background(), &rm))
	h := rm.ScopeMetrics[0].Metrics[0].Data.(metricdata.Histogram[float64])
	assert.Equal(t, []float64{1, 2}, h.DataPoints[0].Bounds)
	assert.Equal(t, []uint64{0, 1, 0}, h.DataPoints[0].BucketCounts)
}

// TestBucketsApplyToEveryHistogram checks that WithBuckets sets the
// boundaries of all four duration histograms, the Runner's included.
func TestBucketsApplyToEveryHistogram(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	provider := NewProvider(WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))),
		WithBuckets([]float64{1, 2}))
	provider.NewLatencyMetric("q").Observe(1)
	provider.NewWorkDurationMetric("q").Observe(1)
	provider.NewReconcileDurationMetric("q").Observe(1)
	provider.NewReconcileWaitMetric("q").Observe(1)
	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(context.Background(), &rm))
	require.Len(t, rm.ScopeMetrics[0].Metrics, 4)
	for _, m := range rm.ScopeMetrics[0].Metrics {
		h := m.Data.(metricdata.Histogram[float64])
		assert.Equalf(t, []float64{1, 2}, h.DataPoints[0].Bounds, "%s: bounds", m.Name)
	}
}

// TestRetriesAndDelayedItems pins what workqueue.retries and
// workqueue.delayed_items count, as the package doc's table states it.
func TestRetriesAndDelayedItems(t *testing.T) {
	tests := []struct {
		name        string
		do          func(q *workqueue.TypedRateLimitingQueue[string])
		wantRetries int64
		wantDelayed float64
	}{
		{"AddAfter", func(q *workqueue.TypedRateLimitingQueue[string]) { q.AddAfter("a", time.Hour) }, 1, 1},
		{"AddRateLimited", func(q *workqueue.TypedRateLimitingQueue[string]) { q.AddRateLimited("a") }, 1, 1},
		{"Reschedule", func(q *workqueue.TypedRateLimitingQueue[string]) { q.Reschedule("a", time.Hour) }, 1, 1},
		{"a park's backoff and a delayed add of one item count apart", func(q *workqueue.TypedRateLimitingQueue[string]) {
			q.Add("p")
			item, _ := q.Get()
			q.Park(item, "e")
			q.Done(item)
			q.Wake("e") // p waits for its park backoff
			q.AddAfter("p", time.Hour)
		}, 1, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				reader := sdkmetric.NewManualReader()
				q := workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedItemBasedRateLimiter[string](),
					workqueue.TypedRateLimitingQueueConfig[string]{Name: "q",
						MetricsProvider: NewProvider(WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))))})
				defer q.ShutDown()
				tt.do(q)
				got := collect(t, reader)
				assert.Equal(t, tt.wantRetries, got["workqueue.retries"]["name=q"], "retries")
				assert.Equal(t, tt.wantDelayed, got["workqueue.delayed_items"]["name=q"], "delayed_items")
			})
		})
	}
}

// globals are the meter reader and span recorder of the global providers,
// which only the first otel.SetMeterProvider and otel.SetTracerProvider of
// the process reach; runs is how many times TestGlobalProvidersSetLater ran.
var globals struct {
	once   sync.Once
	reader *sdkmetric.ManualReader
	spans  *tracetest.SpanRecorder
	runs   int
}

// TestGlobalProvidersSetLater pins what the package doc says of a provider
// made without WithMeterProvider and WithTracerProvider: it uses the global
// providers, including those otel.SetMeterProvider and
// otel.SetTracerProvider set after NewProvider. It is the one test that
// sets the globals.
func TestGlobalProvidersSetLater(t *testing.T) {
	globals.runs++
	name := fmt.Sprint("q", globals.runs)
	p := NewProvider()
	globals.once.Do(func() {
		globals.reader = sdkmetric.NewManualReader()
		otel.SetMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(globals.reader)))
		globals.spans = tracetest.NewSpanRecorder()
		otel.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(globals.spans)))
	})
	p.NewAddsMetric(name).Inc()
	_, end := p.StartReconcile(context.Background(), reconcile.Span{Queue: name, Attempt: 1})
	end(reconcile.Result{}, nil)
	assert.Equal(t, int64(1), collect(t, globals.reader)["workqueue.adds"]["name="+name])
	var ended []string
	for _, s := range globals.spans.Ended() {
		ended = append(ended, s.Name())
	}
	assert.Contains(t, ended, "reconcile "+name)
}
