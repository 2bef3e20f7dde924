package crqueue_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/go-workqueue/workqueue"
	crqueue "github.com/go-workqueue/workqueue/controllerruntime"
	wqprometheus "github.com/go-workqueue/workqueue/prometheus"
)

// series returns the value of every series of family name in g whose
// name label is queue, by the series' other labels.
func series(t *testing.T, g prometheus.Gatherer, name, queue string) map[string]float64 {
	t.Helper()
	families, err := g.Gather()
	require.NoError(t, err)
	out := map[string]float64{}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["name"] != queue {
				continue
			}
			require.Equal(t, queue, labels["controller"], "controller label = name label, as controller-runtime's")
			out[labels["priority"]] = value(m)
		}
	}
	return out
}

func value(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Histogram != nil:
		return float64(m.Histogram.GetSampleCount())
	}
	return 0
}

func TestMetricsInControllerRuntimeRegistry(t *testing.T) {
	rc := &recorder{}
	h := start(t, rc, 2, nil)
	for i := range 5 {
		h.send(t, nil, req("ns", fmt.Sprintf("o%d", i)))
	}
	require.Eventually(t, func() bool { return rc.count() == 5 }, 5*time.Second, time.Millisecond)
	name := h.name
	for _, tc := range []struct {
		family string
		want   map[string]float64
	}{
		{"workqueue_adds_total", map[string]float64{"": 5}},
		{"workqueue_queue_duration_seconds", map[string]float64{"": 5}},
		{"workqueue_work_duration_seconds", map[string]float64{"": 5}},
		{"workqueue_depth", map[string]float64{"0": 0}},
		{"workqueue_retries_total", map[string]float64{"": 0}},
	} {
		t.Run(tc.family, func(t *testing.T) {
			require.Eventually(t, func() bool {
				return assert.ObjectsAreEqual(tc.want, series(t, crmetrics.Registry, tc.family, name))
			}, 5*time.Second, time.Millisecond, "got %v", series(t, crmetrics.Registry, tc.family, name))
		})
	}
}

func TestMetricsNeverPanic(t *testing.T) {
	conflicting := prometheus.NewRegistry()
	// Same name, other help and labels: registration fails with an error
	// that is not AlreadyRegisteredError.
	conflicting.MustRegister(prometheus.NewCounterVec(prometheus.CounterOpts{Name: "workqueue_adds_total", Help: "other"}, []string{"queue"}))
	for _, tc := range []struct {
		name string
		opts []crqueue.Option[reconcile.Request]
	}{
		{"default registry, twice", nil},
		{"fresh registry", []crqueue.Option[reconcile.Request]{crqueue.WithRegisterer[reconcile.Request](prometheus.NewRegistry())}},
		{"conflicting registry", []crqueue.Option[reconcile.Request]{crqueue.WithRegisterer[reconcile.Request](conflicting)}},
		{"no metrics", []crqueue.Option[reconcile.Request]{crqueue.WithoutMetrics[reconcile.Request]()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for range 2 {
				require.NotPanics(t, func() {
					q := crqueue.New[reconcile.Request]("crq-nopanic", nil, tc.opts...)
					q.Add(req("ns", "a"))
					q.ShutDown()
				})
			}
		})
	}
}

func TestMetricsDepthByPriority(t *testing.T) {
	reg := prometheus.NewRegistry()
	q := crqueue.New[int]("crq-depth", nil, crqueue.WithRegisterer[int](reg))
	defer q.ShutDown()
	prio := func(p int) *int { return &p }
	q.AddWithOpts(priorityqueue.AddOpts{Priority: prio(-100)}, 1, 2)
	q.AddWithOpts(priorityqueue.AddOpts{}, 3)
	// 30 more priorities: past the 25th, they share one label.
	for p := range 30 {
		q.AddWithOpts(priorityqueue.AddOpts{Priority: prio(1000 + p)}, 100+p)
	}
	got := series(t, reg, "workqueue_depth", "crq-depth")
	assert.Equal(t, 2.0, got["-100"])
	assert.Equal(t, 1.0, got["0"])
	assert.Equal(t, 7.0, got["exceeded_cardinality_limit"])
	assert.Len(t, got, 26)
	for range 33 {
		item, _ := q.Get()
		q.Done(item)
	}
	for label, v := range series(t, reg, "workqueue_depth", "crq-depth") {
		assert.Zero(t, v, "depth at priority %q back to 0", label)
	}
}

// TestNewMetricsProvider checks the provider other queues get: its plain
// depth is the series with priority "" and can be set, and its series
// land in the registry given, or in controller-runtime's for nil.
func TestNewMetricsProvider(t *testing.T) {
	own := prometheus.NewRegistry()
	for _, tc := range []struct {
		name string
		reg  prometheus.Registerer
		g    prometheus.Gatherer
	}{
		{"own registry", own, own},
		{"nil means controller-runtime's", nil, crmetrics.Registry},
	} {
		t.Run(tc.name, func(t *testing.T) {
			queue := "crq-provider-" + tc.name
			p := crqueue.NewMetricsProvider(tc.reg)
			depth, ok := p.NewDepthMetric(queue).(interface{ Set(float64) })
			require.True(t, ok, "the plain depth can be set")
			depth.Set(7)
			p.NewAddsMetric(queue).Inc()
			p.NewDepthWithPriorityMetric(queue).Inc(-100)
			assert.Equal(t, map[string]float64{"": 7, "-100": 1}, series(t, tc.g, "workqueue_depth", queue))
			assert.Equal(t, map[string]float64{"": 1}, series(t, tc.g, "workqueue_adds_total", queue))
		})
	}
}

// rootQueueRuns counts the runs of TestRootQueueBesideControllerRuntime.
var rootQueueRuns int

// TestRootQueueBesideControllerRuntime pins the README's advice for a
// program that imports controller-runtime: the prometheus package's
// provider cannot register in metrics.Registry, whose workqueue collectors
// differ, while NewMetricsProvider records a root queue's series there.
func TestRootQueueBesideControllerRuntime(t *testing.T) {
	rootQueueRuns++
	name := fmt.Sprint("crq-root-", rootQueueRuns) // the registry outlives a run
	func() {
		defer func() {
			r := recover()
			assert.Contains(t, fmt.Sprint(r), "workqueue: registering a workqueue metric: ", "NewProvider(metrics.Registry) panics")
		}()
		wqprometheus.NewProvider(crmetrics.Registry)
	}()
	q := workqueue.NewTypedWithConfig(workqueue.TypedQueueConfig[string]{Name: name, MetricsProvider: crqueue.NewMetricsProvider(nil)})
	defer q.ShutDown()
	q.Add("a")
	assert.Equal(t, map[string]float64{"": 1}, series(t, crmetrics.Registry, "workqueue_adds_total", name))
	assert.Equal(t, map[string]float64{"": 1}, series(t, crmetrics.Registry, "workqueue_depth", name))
}
