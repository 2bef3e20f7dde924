package prometheus

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/go-workqueue/workqueue"
)

// TestParkingMetrics checks the parked-items gauge, the wakes by event, up
// to MaxEventLabels events and the rest under "other", the park timeouts,
// and that DeleteQueue removes them all.
func TestParkingMetrics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := prometheus.NewRegistry()
		provider := NewProvider(reg)
		q := workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "pq", MetricsProvider: provider, MaxParkTime: time.Minute,
				ParkBackoff: workqueue.NewTypedItemExponentialFailureRateLimiter[string](0, 0)})
		park := func(item, event string) {
			q.Add(item)
			got, _ := q.Get()
			require.Equal(t, item, got)
			q.Park(item, event)
			q.Done(item)
		}
		parked := func() float64 { return testutil.ToFloat64(provider.parked.WithLabelValues("pq")) }
		wakes := func(event string) float64 { return testutil.ToFloat64(provider.wakes.WithLabelValues("pq", event)) }

		events := MaxEventLabels + 5
		for i := range events {
			park(fmt.Sprint("item", i), fmt.Sprint("event", i))
		}
		assert.Equal(t, float64(events), parked())
		for i := range events {
			require.Equal(t, 1, q.Wake(fmt.Sprint("event", i)))
		}
		assert.Zero(t, parked())
		assert.Equal(t, 1.0, wakes("event0"))
		assert.Equal(t, 1.0, wakes(fmt.Sprint("event", MaxEventLabels-1)))
		assert.Equal(t, 5.0, wakes("other"))
		assert.Equal(t, MaxEventLabels+1, testutil.CollectAndCount(provider.wakes, "workqueue_wakes_total"))
		for q.Len() > 0 {
			item, _ := q.Get()
			q.Done(item)
		}

		park("late", "never")
		assert.Equal(t, 1.0, parked())
		time.Sleep(time.Minute)
		synctest.Wait()
		assert.Zero(t, parked())
		assert.Equal(t, 1.0, testutil.ToFloat64(provider.parkTimeouts.WithLabelValues("pq")))
		item, _ := q.Get()
		q.Done(item)

		park("dropped", "never")
		q.ShutDown()
		assert.Zero(t, parked(), "dropped items still counted")

		provider.DeleteQueue("pq")
		for _, vec := range []prometheus.Collector{provider.parked, provider.wakes, provider.parkTimeouts} {
			assert.Zero(t, testutil.CollectAndCount(vec))
		}
	})
}
