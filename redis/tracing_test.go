package redisqueue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
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
	"github.com/go-workqueue/workqueue/redis/redistest"
)

// tracedPair is two handles of one queue, each with an OpenTelemetry
// provider of its own, as two processes have: a adds with spans of its
// tracer, and a Runner on b records its reconcile spans in rec.
type tracedPair struct {
	a, b  *Queue[string]
	adder trace.Tracer
	rec   *tracetest.SpanRecorder
}

func newTracedPair(t *testing.T, client redis.UniversalClient) tracedPair {
	t.Helper()
	return newTracedPairWith(t, client, Options[string]{})
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
func newTracedPairWith(t *testing.T, client redis.UniversalClient, opts Options[string]) tracedPair {
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
	opts.Name, opts.RateLimit = "objects", &RateLimit{Base: time.Millisecond, Max: 10 * time.Millisecond}
	optsA, optsB := opts, opts
	optsA.MetricsProvider, optsB.MetricsProvider = pa, pb
	a := newTestQueue(t, client, optsA)
	clientB := secondClient(client)
	t.Cleanup(func() {
		if clientB != client {
			_ = clientB.Close()
		}
	})
	b := newHandle(t, clientB, queueNameOf(a), optsB)
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

// run runs a Runner over b with one worker until reconcile has returned
// n times, and returns b's reconcile spans in the order they started.
// reconcile is given the number of its call, from 1.
func (p tracedPair) run(t *testing.T, n int, reconcile func(ctx context.Context, item string, call int) (workqueue.Result, error)) []sdktrace.ReadOnlySpan {
	t.Helper()
	returned := make(chan struct{}, n)
	call := 0
	r := workqueue.NewRunner[string](p.b, func(ctx context.Context, item string) (workqueue.Result, error) {
		call++
		defer func() { returned <- struct{}{} }()
		return reconcile(ctx, item, call)
	}, workqueue.WithLogger(slog.New(slog.DiscardHandler)))
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
	s := redistest.Start(t, redistest.Options{})
	client := s.Client()
	ok := func(context.Context, string, int) (workqueue.Result, error) { return workqueue.Result{}, nil }

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
		spans := p.run(t, 3, func(_ context.Context, _ string, call int) (workqueue.Result, error) {
			switch call {
			case 1:
				return workqueue.Result{}, errors.New("not yet")
			case 2:
				return workqueue.Result{RequeueAfter: time.Millisecond}, nil
			}
			return workqueue.Result{}, nil
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
		spans := p.run(t, 2, func(_ context.Context, _ string, call int) (workqueue.Result, error) {
			if call == 1 {
				again = p.add(t, "key")
			}
			return workqueue.Result{}, nil
		})
		require.Len(t, spans, 2)
		assert.Equal(t, []trace.SpanContext{first}, linked(spans[0]), "the first reconcile's links")
		assert.Equal(t, []trace.SpanContext{again}, linked(spans[1]), "the second reconcile's links")
	})

	t.Run("partitions and fairness", func(t *testing.T) {
		p := newTracedPairWith(t, client, Options[string]{Partitions: 3, Fairness: []func(string) string{func(k string) string { return k }}})
		added := map[string]trace.SpanContext{}
		for _, key := range []string{"a", "b", "c", "d"} {
			added[key] = p.add(t, key)
		}
		var got []string
		spans := p.run(t, 4, func(_ context.Context, item string, _ int) (workqueue.Result, error) {
			got = append(got, item)
			return workqueue.Result{}, nil
		})
		require.Len(t, spans, 4)
		for i, span := range spans {
			assert.Equal(t, []trace.SpanContext{added[got[i]]}, linked(span), "the links of %s's reconcile", got[i])
		}
	})

	t.Run("a park keeps the links", func(t *testing.T) {
		p := newTracedPair(t, client)
		added := p.add(t, "key")
		spans := p.run(t, 2, func(_ context.Context, _ string, call int) (workqueue.Result, error) {
			if call == 1 {
				// The wake comes from the other handle, after the
				// hand-out and before the park, which it so ends.
				p.a.Wake("ready")
				return workqueue.Result{WaitFor: []string{"ready"}}, nil
			}
			return workqueue.Result{}, nil
		})
		require.Len(t, spans, 2)
		assert.Equal(t, []trace.SpanContext{added}, linked(spans[0]), "the first reconcile's links")
		assert.Equal(t, []trace.SpanContext{added}, linked(spans[1]), "the links after the wake")
	})
}

// TestTraceLinksLeaveNoKeys checks that the links a traced queue stores
// in Redis go with the hand-out that served them, with a Remove, or with
// the Done of a retried key's last hand-out: the queue's links key is
// gone once nothing waits.
func TestTraceLinksLeaveNoKeys(t *testing.T) {
	s := redistest.Start(t, redistest.Options{})
	client := s.Client()
	tests := []struct {
		name   string
		script func(t *testing.T, p tracedPair, addAfter func(time.Duration))
	}{
		{"Done", func(t *testing.T, p tracedPair, addAfter func(time.Duration)) {
			add := func() { addAfter(0) }
			add()
			getDone(t, p.b)
		}},
		{"Forget after Done", func(t *testing.T, p tracedPair, addAfter func(time.Duration)) {
			add := func() { addAfter(0) }
			add()
			item := get(t, p.b)
			p.b.Done(item)
			p.b.Forget(item)
		}},
		{"Remove of a queued key", func(t *testing.T, p tracedPair, addAfter func(time.Duration)) {
			add := func() { addAfter(0) }
			add()
			assert.True(t, p.a.Remove("key"))
		}},
		{"Remove of a delayed key", func(t *testing.T, p tracedPair, addAfter func(time.Duration)) {
			addAfter(time.Hour)
			assert.True(t, p.a.Remove("key"))
		}},
		{"a re-add while processing, then Done twice", func(t *testing.T, p tracedPair, addAfter func(time.Duration)) {
			add := func() { addAfter(0) }
			add()
			item := get(t, p.b)
			add()
			p.b.Done(item)
			getDone(t, p.b)
		}},
		{"a re-add taken back by Remove", func(t *testing.T, p tracedPair, addAfter func(time.Duration)) {
			add := func() { addAfter(0) }
			add()
			item := get(t, p.b)
			add()
			assert.True(t, p.a.Remove("key"))
			p.b.Done(item)
		}},
		{"a retry", func(t *testing.T, p tracedPair, addAfter func(time.Duration)) {
			add := func() { addAfter(0) }
			add()
			item := get(t, p.b)
			p.b.AddRateLimited(item)
			p.b.Done(item)
			getDone(t, p.b)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newTracedPair(t, client)
			links := p.a.parts[0].keys.prefix + "links"
			sawLinks := false
			tt.script(t, p, func(after time.Duration) {
				ctx, span := p.adder.Start(context.Background(), "add")
				require.NoError(t, p.a.AddAfterContext(ctx, "key", after))
				span.End()
				n, err := client.Exists(context.Background(), links).Result()
				require.NoError(t, err)
				sawLinks = sawLinks || n == 1
			})
			assert.True(t, sawLinks, "the adds stored no links")
			n, err := client.Exists(context.Background(), links).Result()
			require.NoError(t, err)
			assert.Zero(t, n, "the links key is left")
			assert.Zero(t, p.b.Len(), "Len at the end")
		})
	}
}

// TestGetWithInfoContext checks the info a traced handle's Get returns
// beside the item, and that an untraced handle's adds link nothing.
func TestGetWithInfoContext(t *testing.T) {
	s := redistest.Start(t, redistest.Options{})
	client := s.Client()
	p := newTracedPair(t, client)
	before := time.Now()
	added := p.add(t, "key")
	optsCtx, optsSpan := p.adder.Start(context.Background(), "add high")
	require.NoError(t, p.a.AddWithOptsContext(optsCtx, workqueue.AddOpts{Priority: new(3)}, "high"))
	optsSpan.End()
	require.NoError(t, p.a.AddWithOptsContext(context.Background(), workqueue.AddOpts{Priority: new(3)}, "high"))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	item, info, err := p.b.GetWithInfoContext(ctx)
	require.NoError(t, err)
	assert.Equal(t, "high", item)
	assert.Equal(t, 3, info.Priority, "the priority")
	require.Len(t, info.Links, 1, "the links of AddWithOptsContext's adds, one with a span")
	assert.Equal(t, [8]byte(optsSpan.SpanContext().SpanID()), info.Links[0].SpanID, "the link's span")
	p.b.Done(item)

	item, info, err = p.b.GetWithInfoContext(ctx)
	require.NoError(t, err)
	assert.Equal(t, "key", item)
	require.Len(t, info.Links, 1)
	assert.Equal(t, [16]byte(added.TraceID()), info.Links[0].TraceID, "the link's trace")
	assert.Equal(t, [8]byte(added.SpanID()), info.Links[0].SpanID, "the link's span")
	assert.Equal(t, byte(added.TraceFlags()), info.Links[0].Flags, "the link's flags")
	assert.Zero(t, info.DroppedLinks)
	assert.False(t, info.Added.Before(before.Add(-time.Second)), "Added %v is before the add (%v)", info.Added, before)
	assert.False(t, info.Added.After(time.Now()), "Added %v is after the Get", info.Added)
	p.b.Done(item)

	// A handle without a TracingProvider sends no link.
	plain := newHandle(t, client, queueNameOf(p.a), Options[string]{})
	ctx2, span := p.adder.Start(context.Background(), "add")
	require.NoError(t, plain.AddContext(ctx2, "key"))
	span.End()
	item, info, err = p.b.GetWithInfoContext(ctx)
	require.NoError(t, err)
	assert.Equal(t, "key", item)
	assert.Empty(t, info.Links, "the links of an untraced handle's add")
	p.b.Done(item)
}

func get(t *testing.T, q *Queue[string]) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	item, err := q.GetContext(ctx)
	require.NoError(t, err)
	return item
}

func getDone(t *testing.T, q *Queue[string]) {
	t.Helper()
	q.Done(get(t, q))
}

// TestTracedFIFOCommands pins what tracing costs TestFIFOCommands's run on
// the server: a traced handle whose adds carry no span, and one whose
// every add carries one. An untraced handle runs TestFIFOCommands's.
func TestTracedFIFOCommands(t *testing.T) {
	s := redistest.Start(t, redistest.Options{})
	client := s.Client()
	tests := []struct {
		name             string
		spans            bool
		wantAdds, wantGD string
	}{
		{"no span", false, tracedAddCommands, tracedDrainCommands},
		{"a span per add", true, linkedAddCommands, linkedDrainCommands},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newTracedPair(t, client)
			q := p.a
			ctx := context.Background()
			q.Len() // the look at the number of partitions, not counted
			const keys = 100
			require.NoError(t, client.ConfigResetStat(ctx).Err())
			for i := range keys {
				addCtx, span := p.adder.Start(ctx, "add")
				if !tt.spans {
					addCtx = ctx
				}
				require.NoError(t, q.AddContext(addCtx, fmt.Sprint(i)))
				span.End()
			}
			require.NoError(t, q.AddAfterContext(ctx, "late", time.Hour))
			adds := scriptCommands(t, client.Info(ctx, "commandstats").Val())
			require.NoError(t, client.ConfigResetStat(ctx).Err())
			for range keys {
				item := getNow(t, q)
				require.NoError(t, q.DoneContext(ctx, item))
			}
			drain := scriptCommands(t, client.Info(ctx, "commandstats").Val())
			t.Logf("commands run by the functions: %d keys added and one delayed: %s; %d Get+Done: %s", keys, adds, keys, drain)
			assert.Equal(t, tt.wantAdds, adds.String(), "commands of the adds")
			assert.Equal(t, tt.wantGD, drain.String(), "commands of the Gets and Dones")
			require.True(t, q.Remove("late"))
		})
	}
}

// The commands of TestTracedFIFOCommands.
const (
	tracedAddCommands   = fifoAddCommands
	tracedDrainCommands = "hdel=400 hmget=500 hset=300 incrby=100 llen=199 lpop=100 time=200 zadd=200 zcard=100 zrange=200 zrem=200"
	linkedAddCommands   = "hget=101 hmget=101 hset=200 incrby=100 llen=102 rpush=101 time=101 zadd=1 zcard=101 zrange=102"
	linkedDrainCommands = "hdel=500 hmget=500 hset=400 incrby=100 llen=199 lpop=100 time=200 zadd=200 zcard=100 zrange=200 zrem=200"
)

// TestTraceLinksOfALostGetReply: a get call whose reply is lost is sent
// again and returns the same grant with the same links.
func TestTraceLinksOfALostGetReply(t *testing.T) {
	s := redistest.Start(t, redistest.Options{})
	client := s.Client()
	lost := new(atomic.Bool)
	p := newTracedPairWith(t, client, Options[string]{Heartbeat: time.Hour})
	added := p.add(t, "k")
	p.b.client.AddHook(loseFirstGrant{done: lost})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	item, info, err := p.b.GetWithInfoContext(ctx)
	if err != nil { // GetContext returns the lost reply's error; a Get sends the nonce again
		item, info, err = p.b.GetWithInfoContext(ctx)
	}
	require.NoError(t, err)
	require.True(t, lost.Load(), "no grant's reply was lost")
	assert.Equal(t, "k", item)
	require.Len(t, info.Links, 1, "the links of the grant sent again")
	assert.Equal(t, [8]byte(added.SpanID()), info.Links[0].SpanID, "the link's span")
	p.b.Done(item)
}
