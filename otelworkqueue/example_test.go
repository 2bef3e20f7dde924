package otelworkqueue_test

import (
	"context"
	"fmt"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/go-workqueue/workqueue"
	"github.com/go-workqueue/workqueue/otelworkqueue"
	"github.com/go-workqueue/workqueue/reconcile"
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

// A Runner's reconcile spans, each linked to the adds it served, read from
// the SDK's span recorder; a program would give the tracer provider a
// batcher and an exporter instead (examples/traces prints them with the
// stdout exporter).
func Example_tracing() {
	spans := tracetest.NewSpanRecorder()
	tracers := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	queue := workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{
			Name:            "pods",
			MetricsProvider: otelworkqueue.NewProvider(otelworkqueue.WithTracerProvider(tracers)),
		})
	for _, event := range []string{"created", "updated", "labelled"} {
		ctx, span := tracers.Tracer("informer").Start(context.Background(), event)
		queue.AddContext(ctx, "default/web") // merged: one reconcile serves all three
		span.End()
	}
	ctx, stop := context.WithCancel(context.Background())
	runner := reconcile.NewRunner(queue, func(ctx context.Context, key string) (reconcile.Result, error) {
		stop() // one reconcile, then Run returns
		return reconcile.Result{}, nil
	})
	runner.Run(ctx, 1)

	for _, s := range spans.Ended() {
		if s.Name() == "reconcile pods" {
			fmt.Println(s.Name(), "links", len(s.Links()), "adds")
			for _, a := range s.Attributes() {
				if a.Key == otelworkqueue.AttrAttempt {
					fmt.Println(a.Key, a.Value.AsInt64())
				}
			}
		}
	}
	// Output:
	// reconcile pods links 3 adds
	// workqueue.attempt 1
}
