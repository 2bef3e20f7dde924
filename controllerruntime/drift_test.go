package crqueue

import (
	"errors"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// TestCollectorsMatchControllerRuntime guards against drift: the queue
// records into controller-runtime's own workqueue collectors only because
// ours have the same names, help texts, labels and buckets, so that
// registering them in its registry finds its collectors. If a new
// controller-runtime changes any of those, the queue's series silently
// vanish from the manager's /metrics; this test names the collector.
func TestCollectorsMatchControllerRuntime(t *testing.T) {
	c := metricsFor(prometheus.NewRegistry()).c
	for name, collector := range map[string]prometheus.Collector{
		"workqueue_depth":                             c.depth,
		"workqueue_adds_total":                        c.adds,
		"workqueue_queue_duration_seconds":            c.latency,
		"workqueue_work_duration_seconds":             c.duration,
		"workqueue_unfinished_work_seconds":           c.unfinished,
		"workqueue_longest_running_processor_seconds": c.longest,
		"workqueue_retries_total":                     c.retries,
	} {
		err := crmetrics.Registry.Register(collector)
		var already prometheus.AlreadyRegisteredError
		require.Truef(t, errors.As(err, &already),
			"controller-runtime's %s is not ours any more (help text, labels or type changed): %v", name, err)
	}
}
