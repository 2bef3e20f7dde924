package otelworkqueue_test

import (
	"context"
	"fmt"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/go-workqueue/workqueue"
	"github.com/go-workqueue/workqueue/otelworkqueue"
)

// A queue's metrics read through an OpenTelemetry SDK reader; a program
// would give the meter provider a periodic reader and an exporter instead.
func Example() {
	reader := sdkmetric.NewManualReader()
	meters := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	queue := workqueue.NewTypedWithConfig(workqueue.TypedQueueConfig[string]{
		Name:            "pods",
		MetricsProvider: otelworkqueue.NewProvider(otelworkqueue.WithMeterProvider(meters)),
	})
	defer queue.ShutDown()
	queue.Add("default/web")
	queue.Add("default/db")
	queue.Add("default/web") // collapsed into the first

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		panic(err)
	}
	for _, m := range rm.ScopeMetrics[0].Metrics {
		if sum, ok := m.Data.(metricdata.Sum[int64]); ok {
			fmt.Println(m.Name, sum.DataPoints[0].Value)
		}
	}
	// Unordered output:
	// workqueue.depth 2
	// workqueue.adds 2
}
