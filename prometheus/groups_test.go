package prometheus

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/go-workqueue/workqueue"
)

// TestGroupMetrics checks the gauges of group limits: the items waiting
// for a slot and the groups at their limit follow Get and Done, and
// DeleteQueue removes them.
func TestGroupMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	provider := NewProvider(reg)
	q := workqueue.NewTypedWithConfig(workqueue.TypedQueueConfig[string]{Name: "groups", MetricsProvider: provider,
		GroupLimits: &workqueue.GroupLimits[string]{Group: func(item string) string { return strings.Split(item, "/")[0] }, Default: 1}})
	defer q.ShutDown()
	waiting := func() float64 { return testutil.ToFloat64(provider.waitingForSlot.WithLabelValues("groups")) }
	atLimit := func() float64 { return testutil.ToFloat64(provider.groupsAtLimit.WithLabelValues("groups")) }

	for _, item := range []string{"a/1", "a/2", "a/3", "b/1", "b/2"} {
		q.Add(item)
	}
	for range 2 {
		_, shutdown := q.Get() // a/1, then b/1
		require.False(t, shutdown)
	}
	assert.Equal(t, 3.0, waiting())
	assert.Equal(t, 2.0, atLimit())
	q.Done("b/1")
	assert.Equal(t, 2.0, waiting())
	assert.Equal(t, 1.0, atLimit())
	q.SetGroupLimit("a", 3)
	assert.Zero(t, waiting())
	assert.Zero(t, atLimit())

	provider.DeleteQueue("groups")
	assert.Zero(t, testutil.CollectAndCount(provider.waitingForSlot, "workqueue_items_waiting_for_slot"))
	assert.Zero(t, testutil.CollectAndCount(provider.groupsAtLimit, "workqueue_groups_at_limit"))
}
