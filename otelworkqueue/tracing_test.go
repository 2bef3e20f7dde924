package otelworkqueue

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/go-workqueue/workqueue"
	"github.com/go-workqueue/workqueue/reconcile"
)

// tracedQueue is what the tracing tests use of a queue.
type tracedQueue interface {
	workqueue.TypedRateLimitingInterface[string]
	AddContext(ctx context.Context, item string)
	Wake(event string) int
}

// traceRun is one scripted run: script adds and wakes with add, which
// returns the adder's span context, while a Runner with two workers
// reconciles with reconcileItem; it returns the reconcile spans in the order
// they started.
func traceRun(t *testing.T, priority bool, reconcileItem reconcile.Func[string],
	script func(q tracedQueue, add func(item string) trace.SpanContext)) []sdktrace.ReadOnlySpan {
	t.Helper()
	var spans []sdktrace.ReadOnlySpan
	synctest.Test(t, func(t *testing.T) {
		rec := tracetest.NewSpanRecorder()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
		p := NewProvider(WithTracerProvider(tp), WithMeterProvider(sdkmetric.NewMeterProvider()))
		limiter := workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Second, time.Minute)
		var q tracedQueue
		if priority {
			q = workqueue.NewTypedPriorityQueue(limiter, workqueue.TypedPriorityQueueConfig[string]{Name: "q", MetricsProvider: p})
		} else {
			q = workqueue.NewTypedRateLimitingQueueWithConfig(limiter, workqueue.TypedRateLimitingQueueConfig[string]{Name: "q", MetricsProvider: p})
		}
		adder := tp.Tracer("adder")
		add := func(item string) trace.SpanContext {
			ctx, span := adder.Start(context.Background(), "add "+item)
			defer span.End()
			q.AddContext(ctx, item)
			return span.SpanContext()
		}
		runner := reconcile.NewRunner[string](q, reconcileItem, reconcile.WithLogger(slog.New(slog.DiscardHandler)))
		ctx, cancel := context.WithCancel(t.Context())
		exited := make(chan struct{})
		go func() { defer close(exited); runner.Run(ctx, 2) }()
		script(q, add)
		time.Sleep(time.Hour)
		cancel()
		<-exited
		for _, s := range rec.Ended() {
			if strings.HasPrefix(s.Name(), "reconcile") {
				spans = append(spans, s)
			}
		}
	})
	return spans
}

func links(s sdktrace.ReadOnlySpan) []trace.SpanContext {
	var got []trace.SpanContext
	for _, l := range s.Links() {
		got = append(got, l.SpanContext.WithRemote(false))
	}
	return got
}

func attrs(s sdktrace.ReadOnlySpan) map[attribute.Key]attribute.Value {
	got := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes() {
		got[kv.Key] = kv.Value
	}
	return got
}

// busy reconciles in 1 s, so that two workers busy with two items leave
// the next ones queued while the script adds them.
func busy(context.Context, string) (reconcile.Result, error) {
	time.Sleep(time.Second)
	return reconcile.Result{}, nil
}

func TestReconcileSpans(t *testing.T) {
	t.Run("one add", func(t *testing.T) {
		var a trace.SpanContext
		var inReconcile trace.SpanContext
		spans := traceRun(t, false, func(ctx context.Context, _ string) (reconcile.Result, error) {
			inReconcile = trace.SpanContextFromContext(ctx)
			return reconcile.Result{}, nil
		}, func(_ tracedQueue, add func(string) trace.SpanContext) {
			a = add("a")
		})
		require.Len(t, spans, 1)
		s := spans[0]
		assert.Equal(t, "reconcile q", s.Name())
		assert.Equal(t, trace.SpanKindConsumer, s.SpanKind())
		assert.Equal(t, []trace.SpanContext{a}, links(s))
		assert.NotEqual(t, a.TraceID(), s.SpanContext().TraceID(), "a new trace")
		assert.Equal(t, s.SpanContext(), inReconcile, "the reconcile's context carries its span")
		got := attrs(s)
		assert.Equal(t, "q", got[AttrQueue].AsString())
		assert.Equal(t, int64(1), got[AttrAttempt].AsInt64())
		assert.Equal(t, int64(0), got[AttrPriority].AsInt64())
		assert.Equal(t, 0.0, got[AttrQueued].AsFloat64())
		assert.NotContains(t, got, attribute.Key(AttrDroppedLinks))
		assert.Equal(t, codes.Unset, s.Status().Code)
	})
	t.Run("three merged adds from three traces", func(t *testing.T) {
		var want []trace.SpanContext
		spans := traceRun(t, false, busy, func(q tracedQueue, add func(string) trace.SpanContext) {
			q.Add("b") // keeps the workers busy while "a" is added three times
			q.Add("c")
			for range 3 {
				want = append(want, add("a"))
			}
		})
		var a []sdktrace.ReadOnlySpan
		for _, s := range spans {
			if len(s.Links()) > 0 {
				a = append(a, s)
			}
		}
		require.Len(t, spans, 3, "one reconcile per item")
		require.Len(t, a, 1)
		assert.Equal(t, want, links(a[0]))
		assert.NotEqual(t, want[0].TraceID(), want[1].TraceID())
	})
	t.Run("an add while processing links the next reconcile", func(t *testing.T) {
		var first, second trace.SpanContext
		spans := traceRun(t, false, func(context.Context, string) (reconcile.Result, error) {
			time.Sleep(time.Second)
			return reconcile.Result{}, nil
		}, func(_ tracedQueue, add func(string) trace.SpanContext) {
			first = add("a")
			time.Sleep(time.Millisecond)
			second = add("a")
		})
		require.Len(t, spans, 2)
		assert.Equal(t, []trace.SpanContext{first}, links(spans[0]))
		assert.Equal(t, []trace.SpanContext{second}, links(spans[1]))
		assert.Equal(t, 0.999, attrs(spans[1])[AttrQueued].AsFloat64(), "queued from the re-add to the end of the first reconcile")
	})
	t.Run("a retry links the same adds, with its attempt", func(t *testing.T) {
		var a trace.SpanContext
		calls := 0
		spans := traceRun(t, false, func(context.Context, string) (reconcile.Result, error) {
			if calls++; calls == 1 {
				return reconcile.Result{}, errors.New("boom")
			}
			return reconcile.Result{}, nil
		}, func(_ tracedQueue, add func(string) trace.SpanContext) {
			a = add("a")
		})
		require.Len(t, spans, 2)
		assert.Equal(t, codes.Error, spans[0].Status().Code)
		assert.Equal(t, "boom", spans[0].Status().Description)
		assert.Equal(t, codes.Unset, spans[1].Status().Code)
		for i, s := range spans {
			assert.Equal(t, []trace.SpanContext{a}, links(s), "span %d", i)
			assert.Equal(t, int64(i+1), attrs(s)[AttrAttempt].AsInt64(), "span %d", i)
		}
		assert.NotEqual(t, spans[0].SpanContext().TraceID(), spans[1].SpanContext().TraceID())
	})
	t.Run("a park keeps the links for the reconcile after the wake", func(t *testing.T) {
		var a trace.SpanContext
		calls := 0
		spans := traceRun(t, false, func(context.Context, string) (reconcile.Result, error) {
			if calls++; calls == 1 {
				return reconcile.WaitFor("ready"), nil
			}
			return reconcile.Result{}, nil
		}, func(q tracedQueue, add func(string) trace.SpanContext) {
			a = add("a")
			time.Sleep(time.Minute)
			require.Equal(t, 1, q.Wake("ready"))
		})
		require.Len(t, spans, 2)
		for i, s := range spans {
			assert.Equal(t, []trace.SpanContext{a}, links(s), "span %d", i)
		}
	})
	t.Run("at most MaxTraceLinks links, the others counted", func(t *testing.T) {
		var want []trace.SpanContext
		spans := traceRun(t, false, busy, func(q tracedQueue, add func(string) trace.SpanContext) {
			q.Add("b")
			q.Add("c")
			for range workqueue.MaxTraceLinks + 3 {
				want = append(want, add("a"))
			}
		})
		require.Len(t, spans, 3)
		s := spans[2]
		assert.Equal(t, want[:workqueue.MaxTraceLinks], links(s))
		assert.Equal(t, int64(3), attrs(s)[AttrDroppedLinks].AsInt64())
	})
	t.Run("priority queue", func(t *testing.T) {
		var a trace.SpanContext
		calls := 0
		spans := traceRun(t, true, func(context.Context, string) (reconcile.Result, error) {
			if calls++; calls == 1 {
				return reconcile.Result{}, errors.New("boom")
			}
			return reconcile.Result{}, nil
		}, func(q tracedQueue, add func(string) trace.SpanContext) {
			q.(*workqueue.TypedPriorityQueue[string]).AddWithOpts(workqueue.AddOpts{After: time.Second, Priority: new(5)}, "a")
			a = add("a") // merged into the delayed add, which it makes ready at once
		})
		require.Len(t, spans, 2)
		for i, s := range spans {
			assert.Equal(t, []trace.SpanContext{a}, links(s), "span %d", i)
			assert.Equal(t, int64(i+1), attrs(s)[AttrAttempt].AsInt64(), "span %d", i)
			assert.Equal(t, int64(5), attrs(s)[AttrPriority].AsInt64(), "span %d", i)
		}
	})
}

// TestNoTracingProviderNoLinks checks that a queue whose provider does not
// trace keeps no link, and that AddContext is Add there.
func TestNoTracingProviderNoLinks(t *testing.T) {
	q := workqueue.NewTyped[string]()
	defer q.ShutDown()
	rec := tracetest.NewSpanRecorder()
	ctx, span := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)).Tracer("t").Start(context.Background(), "add")
	defer span.End()
	q.AddContext(ctx, "a")
	item, info, err := q.GetWithInfoContext(context.Background())
	require.NoError(t, err)
	assert.Equal(t, "a", item)
	assert.Equal(t, workqueue.ItemInfo{}, info)
	q.Done(item)
}

// TestUnnamedQueueSpan pins the span of a reconcile over a queue without a
// name, which records no metrics: it is named "reconcile" and has no
// AttrQueued, as its queue does not know when the item was added.
func TestUnnamedQueueSpan(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := tracetest.NewSpanRecorder()
		p := NewProvider(WithTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))),
			WithMeterProvider(sdkmetric.NewMeterProvider()))
		q := workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedItemBasedRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{MetricsProvider: p})
		q.Add("a")
		ctx, cancel := context.WithCancel(t.Context())
		runner := reconcile.NewRunner[string](q, func(context.Context, string) (reconcile.Result, error) {
			cancel()
			return reconcile.Result{}, nil
		}, reconcile.WithLogger(slog.New(slog.DiscardHandler)))
		runner.Run(ctx, 1)
		spans := rec.Ended()
		require.Len(t, spans, 1)
		assert.Equal(t, "reconcile", spans[0].Name())
		got := attrs(spans[0])
		assert.NotContains(t, got, attribute.Key(AttrQueued))
		assert.Equal(t, "", got[AttrQueue].AsString())
	})
}
