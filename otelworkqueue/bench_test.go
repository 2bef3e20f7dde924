package otelworkqueue

import (
	"context"
	"strconv"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/go-workqueue/workqueue"
	"github.com/go-workqueue/workqueue/reconcile"
)

// BenchmarkCycle measures one add, hand-out and Done of a string key with
// this package's provider: Add and Get, which link nothing, with a no-op
// tracer provider; AddContext with a sampled span and GetWithInfoContext,
// whose info carries the add's link; and that plus a reconcile span
// started and ended as a Runner does.
func BenchmarkCycle(b *testing.B) {
	keys := make([]string, 1024)
	for i := range keys {
		keys[i] = "namespace/object-" + strconv.Itoa(i)
	}
	rec := tracetest.NewSpanRecorder()
	sdk := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(noopProcessor{rec}))
	adder, addSpan := sdk.Tracer("adder").Start(context.Background(), "add")
	defer addSpan.End()
	for _, mode := range []string{"add", "addcontext", "addcontext+span"} {
		b.Run(mode, func(b *testing.B) {
			p := NewProvider(WithMeterProvider(sdkmetric.NewMeterProvider()), WithTracerProvider(sdk))
			if mode == "add" {
				p = NewProvider(WithMeterProvider(sdkmetric.NewMeterProvider()), WithTracerProvider(noop.NewTracerProvider()))
			}
			q := workqueue.NewTypedWithConfig(workqueue.TypedQueueConfig[string]{Name: "bench", MetricsProvider: p})
			defer q.ShutDown()
			ctx := context.Background()
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				key := keys[i&1023]
				i++
				if mode == "add" {
					q.Add(key)
					item, _ := q.Get()
					q.Done(item)
					continue
				}
				q.AddContext(adder, key)
				item, info, _ := q.GetWithInfoContext(ctx)
				if mode == "addcontext+span" {
					_, end := p.StartReconcile(ctx, reconcile.Span{Queue: "bench", Attempt: 1, Info: info})
					end(reconcile.Result{}, nil)
				}
				q.Done(item)
			}
		})
	}
}

// noopProcessor drops ended spans, so that the benchmark does not keep
// them.
type noopProcessor struct{ *tracetest.SpanRecorder }

func (noopProcessor) OnEnd(sdktrace.ReadOnlySpan) {}
