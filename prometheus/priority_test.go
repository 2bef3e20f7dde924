package prometheus

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/go-workqueue/workqueue"
)

// TestDepthByPriority checks workqueue_depth_by_priority: one series per
// priority up to MaxPriorityLabels, the rest under "other", and none left
// after DeleteQueue.
func TestDepthByPriority(t *testing.T) {
	reg := prometheus.NewRegistry()
	provider := NewProvider(reg)
	q := workqueue.NewTypedPriorityQueue(workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedPriorityQueueConfig[string]{Name: "pq", MetricsProvider: provider})
	for priority := range MaxPriorityLabels + 5 {
		q.AddWithOpts(workqueue.AddOpts{Priority: &priority}, fmt.Sprint("a", priority), fmt.Sprint("b", priority))
	}
	depth := func(priority string) float64 {
		return testutil.ToFloat64(provider.byPriority.WithLabelValues("pq", priority))
	}
	assert.Equal(t, 2.0, depth("0"))
	assert.Equal(t, 2.0, depth(fmt.Sprint(MaxPriorityLabels-1)))
	assert.Equal(t, 10.0, depth("other"))
	assert.Equal(t, MaxPriorityLabels+1, testutil.CollectAndCount(provider.byPriority, "workqueue_depth_by_priority"))

	item, priority, _ := q.GetWithPriority() // the highest: under "other"
	assert.Equal(t, MaxPriorityLabels+4, priority)
	q.Done(item)
	assert.Equal(t, 9.0, depth("other"))
	q.AddWithOpts(workqueue.AddOpts{After: time.Hour}, "later")
	q.ShutDown()

	provider.DeleteQueue("pq")
	require.Zero(t, testutil.CollectAndCount(provider.byPriority, "workqueue_depth_by_priority"))
}

// TestAddWithOptsRetries checks that a priority queue's AddWithOpts counts
// a retry per item it delays, and none for an add with no delay.
func TestAddWithOptsRetries(t *testing.T) {
	tests := []struct {
		name string
		opts workqueue.AddOpts
		want float64
	}{
		{"no delay", workqueue.AddOpts{}, 0},
		{"After", workqueue.AddOpts{After: time.Hour}, 2},
		{"RateLimited", workqueue.AddOpts{RateLimited: true}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			provider := NewProvider(prometheus.NewRegistry())
			q := workqueue.NewTypedPriorityQueue(workqueue.DefaultTypedItemBasedRateLimiter[string](),
				workqueue.TypedPriorityQueueConfig[string]{Name: "pq", MetricsProvider: provider})
			defer q.ShutDown()
			q.AddWithOpts(tt.opts, "a", "b")
			assert.Equal(t, tt.want, testutil.ToFloat64(provider.retries.WithLabelValues("pq")))
		})
	}
}
