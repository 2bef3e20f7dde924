package crredis_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	crqueue "github.com/go-workqueue/workqueue/controllerruntime"
	crredis "github.com/go-workqueue/workqueue/controllerruntime/redis"
	redisqueue "github.com/go-workqueue/workqueue/redis"
	"github.com/go-workqueue/workqueue/redis/redistest"
)

// series returns the values of family's series in g whose name label is
// queue, by their priority label ("" for a family without one): a
// counter's or gauge's value, a histogram's sample count.
func series(t *testing.T, g prometheus.Gatherer, family, queue string) map[string]float64 {
	t.Helper()
	families, err := g.Gather()
	require.NoError(t, err)
	out := map[string]float64{}
	for _, f := range families {
		if f.GetName() != family {
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
			require.Equal(t, queue, labels["controller"], "the controller label is the name label, as controller-runtime's")
			switch {
			case m.Counter != nil:
				out[labels["priority"]] = m.Counter.GetValue()
			case m.Gauge != nil:
				out[labels["priority"]] = m.Gauge.GetValue()
			case m.Histogram != nil:
				out[labels["priority"]] = float64(m.Histogram.GetSampleCount())
			}
		}
	}
	return out
}

// TestMetrics adds, gets and marks done a few requests on a handle and
// reads its metrics back: by default from controller-runtime's registry,
// under the queue's name or Options.Name, and from the registry of
// Options.MetricsProvider when one is given, leaving controller-runtime's
// alone.
func TestMetrics(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	tests := []struct {
		name     string
		label    string // Options.Name
		registry *prometheus.Registry
	}{
		{name: "default registry"},
		{name: "default registry, Options.Name", label: "metrics-label"},
		{name: "own provider", registry: prometheus.NewRegistry()},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			queue := fmt.Sprintf("crredis-metrics-%d", i)
			opts := redisqueue.Options[reconcile.Request]{Name: tt.label}
			var g prometheus.Gatherer = crmetrics.Registry
			if tt.registry != nil {
				opts.MetricsProvider = crqueue.NewMetricsProvider(tt.registry)
				g = tt.registry
			}
			labelled := queue
			if tt.label != "" {
				labelled = tt.label
			}
			q := crredis.New(srv.Client(), queue, opts)
			defer q.ShutDown()

			high := 10
			q.Add(req("ns", "a"))
			q.Add(req("ns", "b"))
			q.Add(req("ns", "a"))
			q.AddWithOpts(priorityqueue.AddOpts{Priority: &high}, req("ns", "c"))
			assert.Equal(t, map[string]float64{"": 3}, series(t, g, "workqueue_depth", labelled),
				"depth: the queue's ready count, without a priority label")
			q.AddRateLimited(req("ns", "d"))

			var got []reconcile.Request
			for range 4 {
				r, shutdown := q.Get()
				require.False(t, shutdown)
				got = append(got, r)
			}
			assert.Equal(t, req("ns", "c"), got[0], "the highest priority first")
			require.Eventually(t, func() bool {
				return series(t, g, "workqueue_unfinished_work_seconds", labelled)[""] > 0 &&
					series(t, g, "workqueue_longest_running_processor_seconds", labelled)[""] > 0
			}, 5*time.Second, 10*time.Millisecond, "unfinished work while 4 requests are held")
			for _, r := range got {
				q.Done(r)
			}

			for _, want := range []struct {
				family string
				value  float64
			}{
				{"workqueue_depth", 0},
				// a, b and c: the re-add of a queued key is no add, and
				// nor is the delayed d's becoming ready.
				{"workqueue_adds_total", 3},
				{"workqueue_retries_total", 1},
				{"workqueue_queue_duration_seconds", 4},
				{"workqueue_work_duration_seconds", 4},
			} {
				assert.Equal(t, map[string]float64{"": want.value}, series(t, g, want.family, labelled), want.family)
			}
			if tt.registry != nil {
				assert.Empty(t, series(t, crmetrics.Registry, "workqueue_adds_total", labelled),
					"nothing recorded in controller-runtime's registry")
			}
		})
	}
}
