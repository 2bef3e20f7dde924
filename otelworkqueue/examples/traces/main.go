// Command traces runs a small controller on a rate-limiting queue with
// otelworkqueue's provider and prints its spans with OpenTelemetry's stdout
// exporter: three watch events of one key, from three traces, merged into
// one reconcile whose span links all three; that reconcile fails, and its
// retry's span, attempt 2, links the same three.
//
//	go run ./examples/traces        # from the otelworkqueue directory
package main

import (
	"context"
	"errors"
	"log"
	"log/slog"
	"os"

	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/go-workqueue/workqueue"
	"github.com/go-workqueue/workqueue/otelworkqueue"
	"github.com/go-workqueue/workqueue/reconcile"
)

func main() {
	exporter, err := stdouttrace.New(stdouttrace.WithWriter(os.Stdout), stdouttrace.WithPrettyPrint())
	if err != nil {
		log.Fatal(err)
	}
	tracers := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exporter))
	defer func() {
		if err := tracers.Shutdown(context.Background()); err != nil {
			log.Fatal(err)
		}
	}()

	queue := workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{
			Name:            "deployments",
			MetricsProvider: otelworkqueue.NewProvider(otelworkqueue.WithTracerProvider(tracers)),
		})
	informer := tracers.Tracer("informer")
	for _, event := range []string{"created", "scaled", "relabelled"} {
		ctx, span := informer.Start(context.Background(), "watch event "+event)
		queue.AddContext(ctx, "default/web") // merged into one reconcile
		span.End()
	}

	ctx, stop := context.WithCancel(context.Background())
	attempts := 0
	runner := reconcile.NewRunner(queue, func(ctx context.Context, key string) (reconcile.Result, error) {
		if attempts++; attempts == 1 {
			return reconcile.Result{}, errors.New("the API server said: conflict") // retried after 5 ms
		}
		stop()
		return reconcile.Result{}, nil
	}, reconcile.WithLogger(slog.New(slog.DiscardHandler)))
	runner.Run(ctx, 1)
}
