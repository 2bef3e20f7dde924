package prometheus

import (
	"fmt"
	"strconv"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/go-workqueue/workqueue"
)

// BenchmarkCycle measures one Add, Get and Done of a string key with
// metrics off and with this package's provider on, side by side, so the
// cost of metrics is known.
func BenchmarkCycle(b *testing.B) {
	keys := make([]string, 1024)
	for i := range keys {
		keys[i] = "namespace/object-" + strconv.Itoa(i)
	}
	for _, metrics := range []bool{false, true} {
		b.Run(fmt.Sprintf("metrics=%v", metrics), func(b *testing.B) {
			config := workqueue.TypedQueueConfig[string]{Name: "bench"}
			if metrics {
				config.MetricsProvider = NewProvider(prometheus.NewRegistry())
			}
			q := workqueue.NewTypedWithConfig(config)
			defer q.ShutDown()
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				key := keys[i&1023]
				q.Add(key)
				item, _ := q.Get()
				q.Done(item)
				i++
			}
		})
	}
}
