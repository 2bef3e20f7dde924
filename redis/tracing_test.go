package redisqueue

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/go-workqueue/workqueue"
	"github.com/go-workqueue/workqueue/reconcile"
	"github.com/go-workqueue/workqueue/redis/redistest"
)

// The tests of this file check what a traced handle stores in Redis and
// hands out, and the commands it runs, with linkProvider: a
// reconcile.TracingProvider without OpenTelemetry, so that this module
// does not require it. The reconcile spans of a Runner over a traced
// handle, with the OpenTelemetry SDK, are tested in the module of
// ./oteltest.

// linkProvider is a reconcile.TracingProvider whose links are the ones
// its start put into a context, and whose metrics and reconcile spans do
// nothing.
type linkProvider struct {
	spans *atomic.Uint64 // the number of links start made, shared by a pair's providers
}

type linkKey struct{}

// noMetric is every metric of linkProvider: it records nothing.
type noMetric struct{}

func (noMetric) Inc()            {}
func (noMetric) Dec()            {}
func (noMetric) Set(float64)     {}
func (noMetric) Observe(float64) {}

func (linkProvider) NewDepthMetric(string) workqueue.GaugeMetric       { return noMetric{} }
func (linkProvider) NewAddsMetric(string) workqueue.CounterMetric      { return noMetric{} }
func (linkProvider) NewLatencyMetric(string) workqueue.HistogramMetric { return noMetric{} }
func (linkProvider) NewWorkDurationMetric(string) workqueue.HistogramMetric {
	return noMetric{}
}
func (linkProvider) NewUnfinishedWorkSecondsMetric(string) workqueue.SettableGaugeMetric {
	return noMetric{}
}
func (linkProvider) NewLongestRunningProcessorSecondsMetric(string) workqueue.SettableGaugeMetric {
	return noMetric{}
}
func (linkProvider) NewRetriesMetric(string) workqueue.CounterMetric { return noMetric{} }

// TraceLink returns the link start put into ctx, if any.
func (linkProvider) TraceLink(ctx context.Context) (workqueue.TraceLink, bool) {
	l, ok := ctx.Value(linkKey{}).(workqueue.TraceLink)
	return l, ok
}

// StartReconcile returns ctx: no test of this package runs a Runner over
// a linkProvider.
func (linkProvider) StartReconcile(ctx context.Context, _ reconcile.Span) (context.Context, func(reconcile.Result, error)) {
	return ctx, func(reconcile.Result, error) {}
}

// start returns ctx carrying a new link, sampled, in a trace of its own,
// as an OpenTelemetry span started in ctx without a parent would be: the
// n-th link has trace id and span id n.
func (p linkProvider) start(ctx context.Context) (context.Context, workqueue.TraceLink) {
	n := p.spans.Add(1)
	l := workqueue.TraceLink{Flags: 1}
	binary.BigEndian.PutUint64(l.TraceID[8:], n)
	binary.BigEndian.PutUint64(l.SpanID[:], n)
	return context.WithValue(ctx, linkKey{}, l), l
}

var _ reconcile.TracingProvider = linkProvider{}

// tracedPair is two handles of one queue, each with a linkProvider of its
// own, as two processes have; adder makes the links of the adds.
type tracedPair struct {
	a, b  *Queue[string]
	adder linkProvider
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
	spans := new(atomic.Uint64)
	pa, pb := linkProvider{spans: spans}, linkProvider{spans: spans}
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
	return tracedPair{a: a, b: b, adder: pa}
}

// add adds item through a with a new link, in a trace of its own, and
// returns the link.
func (p tracedPair) add(t *testing.T, item string) workqueue.TraceLink {
	t.Helper()
	ctx, l := p.adder.start(context.Background())
	require.NoError(t, p.a.AddContext(ctx, item))
	return l
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
				ctx, _ := p.adder.start(context.Background())
				require.NoError(t, p.a.AddAfterContext(ctx, "key", after))
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
	optsCtx, optsLink := p.adder.start(context.Background())
	require.NoError(t, p.a.AddWithOptsContext(optsCtx, workqueue.AddOpts{Priority: new(3)}, "high"))
	require.NoError(t, p.a.AddWithOptsContext(context.Background(), workqueue.AddOpts{Priority: new(3)}, "high"))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	item, info, err := p.b.GetWithInfoContext(ctx)
	require.NoError(t, err)
	assert.Equal(t, "high", item)
	assert.Equal(t, 3, info.Priority, "the priority")
	require.Len(t, info.Links, 1, "the links of AddWithOptsContext's adds, one with a span")
	assert.Equal(t, [8]byte(optsLink.SpanID), info.Links[0].SpanID, "the link's span")
	p.b.Done(item)

	item, info, err = p.b.GetWithInfoContext(ctx)
	require.NoError(t, err)
	assert.Equal(t, "key", item)
	require.Len(t, info.Links, 1)
	assert.Equal(t, added.TraceID, info.Links[0].TraceID, "the link's trace")
	assert.Equal(t, added.SpanID, info.Links[0].SpanID, "the link's span")
	assert.Equal(t, added.Flags, info.Links[0].Flags, "the link's flags")
	assert.Equal(t, added, info.Links[0], "the link")
	assert.Zero(t, info.DroppedLinks)
	assert.False(t, info.Added.Before(before.Add(-time.Second)), "Added %v is before the add (%v)", info.Added, before)
	assert.False(t, info.Added.After(time.Now()), "Added %v is after the Get", info.Added)
	p.b.Done(item)

	// A handle without a TracingProvider sends no link.
	plain := newHandle(t, client, queueNameOf(p.a), Options[string]{})
	ctx2, _ := p.adder.start(context.Background())
	require.NoError(t, plain.AddContext(ctx2, "key"))
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
				addCtx := ctx
				if tt.spans {
					addCtx, _ = p.adder.start(ctx)
				}
				require.NoError(t, q.AddContext(addCtx, fmt.Sprint(i)))
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
	assert.Equal(t, added.SpanID, info.Links[0].SpanID, "the link's span")
	p.b.Done(item)
}

// TestTraceLinkText checks the W3C text a link travels in through Redis.
func TestTraceLinkText(t *testing.T) {
	l := workqueue.TraceLink{TraceID: [16]byte{0x4b, 0xf9, 0x2f, 0x35}, SpanID: [8]byte{0x00, 0xf0, 0x67, 0xaa}, Flags: 1, State: "rojo=00f067aa0ba902b7"}
	assert.Equal(t, "00-4bf92f35000000000000000000000000-00f067aa00000000-01", traceParent(l))
	got, err := parseTraceLink(traceParent(l), l.State)
	require.NoError(t, err)
	assert.Equal(t, l, got)
	for _, bad := range []string{"", "01-4bf92f35000000000000000000000000-00f067aa00000000-01",
		"00-00000000000000000000000000000000-00f067aa00000000-01", "00-4bf92f35000000000000000000000000-00f067aa0000000x-01",
		"00-4BF92F35000000000000000000000000-00f067aa00000000-01", "00-4bf92f35000000000000000000000000-00F067AA00000000-01",
		"00-4bf92f35000000000000000000000000-00f067aa00000000-0A"} {
		_, err := parseTraceLink(bad, "")
		assert.Error(t, err, "%q", bad)
	}
}
