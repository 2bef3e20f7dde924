package oteltest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/go-workqueue/workqueue"
	"github.com/go-workqueue/workqueue/otelworkqueue"
	"github.com/go-workqueue/workqueue/reconcile"
	redisqueue "github.com/go-workqueue/workqueue/redis"
)

var queueSeq atomic.Int64

// newClient returns a client of the redis-server TestMain started,
// closed when t ends.
func newClient(t *testing.T) *redis.Client {
	t.Helper()
	client := redis.NewClient(&redis.Options{Addr: redisAddr})
	t.Cleanup(func() { _ = client.Close() })
	return client
}

// newHandle returns a handle on the queue called name, shut down and
// drained when the test ends.
func newHandle(t *testing.T, client redis.UniversalClient, name string, opts redisqueue.Options[string]) *redisqueue.Queue[string] {
	t.Helper()
	q := redisqueue.New(client, name, opts)
	t.Cleanup(func() {
		drained := make(chan struct{})
		go func() {
			q.ShutDownWithDrain()
			close(drained)
		}()
		select {
		case <-drained:
		case <-time.After(10 * time.Second):
			t.Errorf("ShutDownWithDrain still waits after 10s: an item handed out was never marked done")
		}
	})
	return q
}

// tracedPair is two handles of one queue, each with an OpenTelemetry
// provider of its own, as two processes have: a adds with spans of its
// tracer, and a Runner on b records its reconcile spans in rec.
type tracedPair struct {
	a, b  *redisqueue.Queue[string]
	adder trace.Tracer
	rec   *tracetest.SpanRecorder
}

func newTracedPair(t *testing.T, client redis.UniversalClient) tracedPair {
	t.Helper()
	return newTracedPairWith(t, client, redisqueue.Options[string]{})
}

// secondClient returns another client of client's server, for a handle
// that is to share no connection with client's, as another process's.
func secondClient(client redis.UniversalClient) redis.UniversalClient {
	if c, ok := client.(*redis.Client); ok {
		return redis.NewClient(&redis.Options{Addr: c.Options().Addr})
	}
	return client
}

// newTracedPairWith is newTracedPair with opts for both handles, whose
// Name, MetricsProvider and RateLimit it sets.
func newTracedPairWith(t *testing.T, client redis.UniversalClient, opts redisqueue.Options[string]) tracedPair {
	t.Helper()
	tpA := sdktrace.NewTracerProvider()
	rec := tracetest.NewSpanRecorder()
	tpB := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	mp := sdkmetric.NewMeterProvider()
	t.Cleanup(func() {
		_ = tpA.Shutdown(context.Background())
		_ = tpB.Shutdown(context.Background())
		_ = mp.Shutdown(context.Background())
	})
	pa := otelworkqueue.NewProvider(otelworkqueue.WithTracerProvider(tpA), otelworkqueue.WithMeterProvider(mp))
	pb := otelworkqueue.NewProvider(otelworkqueue.WithTracerProvider(tpB), otelworkqueue.WithMeterProvider(mp))
	opts.Name, opts.RateLimit = "objects", &redisqueue.RateLimit{Base: time.Millisecond, Max: 10 * time.Millisecond}
	optsA, optsB := opts, opts
	optsA.MetricsProvider, optsB.MetricsProvider = pa, pb
	name := fmt.Sprintf("%s-%d", strings.ReplaceAll(t.Name(), "/", "-"), queueSeq.Add(1))
	a := newHandle(t, client, name, optsA)
	clientB := secondClient(client)
	t.Cleanup(func() {
		if clientB != client {
			_ = clientB.Close()
		}
	})
	b := newHandle(t, clientB, name, optsB)
	return tracedPair{a: a, b: b, adder: tpA.Tracer("adder"), rec: rec}
}

// add adds item through a with a new span, in a trace of its own, and
// returns the span's context.
func (p tracedPair) add(t *testing.T, item string) trace.SpanContext {
	t.Helper()
	ctx, span := p.adder.Start(context.Background(), "add "+item)
	defer span.End()
	require.NoError(t, p.a.AddContext(ctx, item))
	return span.SpanContext()
}

// run runs a Runner over b with one worker until reconcileCall has returned
// n times, and returns b's reconcile spans in the order they started.
// reconcileCall is given the number of its call, from 1.
func (p tracedPair) run(t *testing.T, n int, reconcileCall func(ctx context.Context, item string, call int) (reconcile.Result, error)) []sdktrace.ReadOnlySpan {
	t.Helper()
	returned := make(chan struct{}, n)
	call := 0
	r := reconcile.NewRunner[string](p.b, func(ctx context.Context, item string) (reconcile.Result, error) {
		call++
		defer func() { returned <- struct{}{} }()
		return reconcileCall(ctx, item, call)
	}, reconcile.WithLogger(slog.New(slog.DiscardHandler)))
	ctx, cancel := context.WithCancel(context.Background())
	exited := make(chan struct{})
	go func() { defer close(exited); r.Run(ctx, 1) }()
	for i := range n {
		select {
		case <-returned:
		case <-time.After(10 * time.Second):
			cancel()
			<-exited
			t.Fatalf("%d reconciles of %d in 10s", i, n)
		}
	}
	cancel()
	<-exited
	return p.rec.Ended()
}

// linked returns the span contexts span links, in order.
func linked(span sdktrace.ReadOnlySpan) []trace.SpanContext {
	var scs []trace.SpanContext
	for _, l := range span.Links() {
		scs = append(scs, l.SpanContext.WithRemote(false))
	}
	return scs
}

// attr returns span's attribute key as an int64, or -1 if it has none.
func attr(span sdktrace.ReadOnlySpan, key string) int64 {
	for _, kv := range span.Attributes() {
		if string(kv.Key) == key {
			return kv.Value.AsInt64()
		}
	}
	return -1
}

// TestTraceLinksAcrossHandles checks that a reconcile in one handle
// links the adds made in another, under the in-memory queues' rules:
// merged adds each linked, at most workqueue.MaxTraceLinks with the rest
// counted, a retry and a park linking the same adds, and an add while the
// key is processed going to the next reconcile.
func TestTraceLinksAcrossHandles(t *testing.T) {
	client := newClient(t)
	ok := func(context.Context, string, int) (reconcile.Result, error) { return reconcile.Result{}, nil }

	t.Run("one add", func(t *testing.T) {
		p := newTracedPair(t, client)
		added := p.add(t, "key")
		spans := p.run(t, 1, ok)
		require.Len(t, spans, 1)
		assert.Equal(t, []trace.SpanContext{added}, linked(spans[0]), "the links")
		assert.Equal(t, trace.SpanKindConsumer, spans[0].SpanKind())
		assert.Equal(t, int64(1), attr(spans[0], otelworkqueue.AttrAttempt), "the attempt")
		assert.Equal(t, int64(-1), attr(spans[0], otelworkqueue.AttrDroppedLinks), "dropped links")
		assert.NotEqual(t, added.TraceID(), spans[0].SpanContext().TraceID(), "the reconcile's trace is its own")
	})

	t.Run("three merged adds", func(t *testing.T) {
		p := newTracedPair(t, client)
		var added []trace.SpanContext
		for range 3 {
			added = append(added, p.add(t, "key"))
		}
		require.Equal(t, 1, p.b.Len(), "the adds merged")
		spans := p.run(t, 1, ok)
		require.Len(t, spans, 1)
		assert.Equal(t, added, linked(spans[0]), "the links, in the order of the adds")
		for i := 1; i < 3; i++ {
			assert.NotEqual(t, added[0].TraceID(), added[i].TraceID(), "three traces")
		}
	})

	t.Run("the bound", func(t *testing.T) {
		p := newTracedPair(t, client)
		var added []trace.SpanContext
		for range workqueue.MaxTraceLinks + 3 {
			added = append(added, p.add(t, "key"))
		}
		spans := p.run(t, 1, ok)
		require.Len(t, spans, 1)
		assert.Equal(t, added[:workqueue.MaxTraceLinks], linked(spans[0]), "the links: the first adds'")
		assert.Equal(t, int64(3), attr(spans[0], otelworkqueue.AttrDroppedLinks), "dropped links")
	})

	t.Run("a retry links the same adds", func(t *testing.T) {
		p := newTracedPair(t, client)
		added := []trace.SpanContext{p.add(t, "key"), p.add(t, "key")}
		spans := p.run(t, 3, func(_ context.Context, _ string, call int) (reconcile.Result, error) {
			switch call {
			case 1:
				return reconcile.Result{}, errors.New("not yet")
			case 2:
				return reconcile.Result{RequeueAfter: time.Millisecond}, nil
			}
			return reconcile.Result{}, nil
		})
		require.Len(t, spans, 3)
		for i, span := range spans {
			assert.Equal(t, added, linked(span), "the links of reconcile %d", i+1)
		}
		assert.Equal(t, int64(1), attr(spans[0], otelworkqueue.AttrAttempt), "the first attempt")
		assert.Equal(t, int64(2), attr(spans[1], otelworkqueue.AttrAttempt), "the attempt after a failure")
	})

	t.Run("an add while processing goes to the next reconcile", func(t *testing.T) {
		p := newTracedPair(t, client)
		first := p.add(t, "key")
		var again trace.SpanContext
		spans := p.run(t, 2, func(_ context.Context, _ string, call int) (reconcile.Result, error) {
			if call == 1 {
				again = p.add(t, "key")
			}
			return reconcile.Result{}, nil
		})
		require.Len(t, spans, 2)
		assert.Equal(t, []trace.SpanContext{first}, linked(spans[0]), "the first reconcile's links")
		assert.Equal(t, []trace.SpanContext{again}, linked(spans[1]), "the second reconcile's links")
	})

	t.Run("partitions and fairness", func(t *testing.T) {
		p := newTracedPairWith(t, client, redisqueue.Options[string]{Partitions: 3, Fairness: []func(string) string{func(k string) string { return k }}})
		added := map[string]trace.SpanContext{}
		for _, key := range []string{"a", "b", "c", "d"} {
			added[key] = p.add(t, key)
		}
		var got []string
		spans := p.run(t, 4, func(_ context.Context, item string, _ int) (reconcile.Result, error) {
			got = append(got, item)
			return reconcile.Result{}, nil
		})
		require.Len(t, spans, 4)
		for i, span := range spans {
			assert.Equal(t, []trace.SpanContext{added[got[i]]}, linked(span), "the links of %s's reconcile", got[i])
		}
	})

	t.Run("a park keeps the links", func(t *testing.T) {
		p := newTracedPair(t, client)
		added := p.add(t, "key")
		spans := p.run(t, 2, func(_ context.Context, _ string, call int) (reconcile.Result, error) {
			if call == 1 {
				// The wake comes from the other handle, after the
				// hand-out and before the park, which it so ends.
				p.a.Wake("ready")
				return reconcile.Result{WaitFor: []string{"ready"}}, nil
			}
			return reconcile.Result{}, nil
		})
		require.Len(t, spans, 2)
		assert.Equal(t, []trace.SpanContext{added}, linked(spans[0]), "the first reconcile's links")
		assert.Equal(t, []trace.SpanContext{added}, linked(spans[1]), "the links after the wake")
	})
}
