package workqueue

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// linkKey is the context key of the fake tracer's links.
type linkKey struct{}

// withLink returns ctx carrying a link whose span id is n.
func withLink(ctx context.Context, n byte) context.Context {
	return context.WithValue(ctx, linkKey{}, testLink(n))
}

func testLink(n byte) TraceLink {
	return TraceLink{TraceID: [16]byte{1}, SpanID: [8]byte{n}, Flags: 1}
}

// linkTracer is the tracing half of a fake TracingProvider: a context's
// link is its linkKey value.
type linkTracer struct{}

func (*linkTracer) TraceLink(ctx context.Context) (TraceLink, bool) {
	l, ok := ctx.Value(linkKey{}).(TraceLink)
	return l, ok
}

// tracingProvider is a recordingProvider that traces with a linkTracer.
type tracingProvider struct {
	*recordingProvider
	*linkTracer
}

// tracedPriorityProvider is a priorityRecordingProvider that traces.
type tracedPriorityProvider struct {
	*priorityRecordingProvider
	*linkTracer
}

var (
	_ linker = tracingProvider{}
	_ linker = tracedPriorityProvider{}
)

// wrappedTyped is a queue from outside this package with AddContext and
// GetWithInfoContext, promoted from a Typed.
type wrappedTyped struct{ *Typed[string] }

// A delaying layer over a queue from outside passes the links on both ways:
// AddContext to the queue's AddContext, unless a Debounce holds the add back,
// and GetWithInfoContext from the queue's.
func TestDelayingQueueOverAnOutsideQueuePassesOnLinks(t *testing.T) {
	getInner := func(_ *TypedDelayingQueue[string], inner *Typed[string]) (ItemInfo, error) {
		_, info, err := inner.GetWithInfoContext(context.Background())
		return info, err
	}
	getLayer := func(d *TypedDelayingQueue[string], _ *Typed[string]) (ItemInfo, error) {
		_, info, err := d.GetWithInfoContext(context.Background())
		return info, err
	}
	addLayer := func(d *TypedDelayingQueue[string], _ *Typed[string], ctx context.Context) { d.AddContext(ctx, "a") }
	tests := []struct {
		name      string
		config    TypedDelayingQueueConfig[string]
		add       func(d *TypedDelayingQueue[string], inner *Typed[string], ctx context.Context)
		get       func(d *TypedDelayingQueue[string], inner *Typed[string]) (ItemInfo, error)
		wantLinks []TraceLink
	}{
		{"AddContext through the layer", TypedDelayingQueueConfig[string]{}, addLayer, getInner, []TraceLink{testLink(1)}},
		{"AddContext through the layer, AddCancelsDelay", TypedDelayingQueueConfig[string]{AddCancelsDelay: true}, addLayer, getInner, []TraceLink{testLink(1)}},
		{"AddContext through the layer, Debounce", TypedDelayingQueueConfig[string]{Debounce: Debounce{Quiet: time.Millisecond}}, addLayer, getInner, nil},
		{"GetWithInfoContext through the layer", TypedDelayingQueueConfig[string]{},
			func(_ *TypedDelayingQueue[string], inner *Typed[string], ctx context.Context) {
				inner.AddContext(ctx, "a")
			},
			getLayer, []TraceLink{testLink(1)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p := tracingProvider{&recordingProvider{}, &linkTracer{}}
				inner := NewTypedWithConfig(TypedQueueConfig[string]{Name: "q", MetricsProvider: p})
				tt.config.Queue = wrappedTyped{inner}
				d := NewTypedDelayingQueueWithConfig(tt.config)
				defer d.ShutDown()
				tt.add(d, inner, withLink(context.Background(), 1))
				info, err := tt.get(d, inner)
				require.NoError(t, err)
				assert.Equal(t, tt.wantLinks, info.Links)
			})
		})
	}
}

// linkedQueue is what TestLinksAtHandOut uses of a queue.
type linkedQueue interface {
	TypedInterface[string]
	AddContext(ctx context.Context, item string)
	GetWithInfoContext(ctx context.Context) (string, ItemInfo, error)
	Remove(item string) bool
	Park(item string, events ...string)
	Wake(event string) int
}

// TestLinksAtHandOut checks, on every kind of queue, which adds' links a
// hand-out carries: the adds merged into it, in order, up to MaxTraceLinks;
// a re-add while processing goes to the next; a retry carries the failed
// hand-out's; a removed add's are forgotten.
func TestLinksAtHandOut(t *testing.T) {
	limiter := func() TypedRateLimiter[string] {
		return NewTypedItemExponentialFailureRateLimiter[string](time.Second, time.Minute)
	}
	queues := []struct {
		name string
		make func(p MetricsProvider) linkedQueue
		// retry retries item, being processed, and returns how long its
		// delay is; nil on a queue without delays.
		retry func(q linkedQueue, item string) time.Duration
	}{
		{"Typed", func(p MetricsProvider) linkedQueue {
			return NewTypedWithConfig(TypedQueueConfig[string]{Name: "q", MetricsProvider: p})
		}, nil},
		{"delaying", func(p MetricsProvider) linkedQueue {
			return NewTypedDelayingQueueWithConfig(TypedDelayingQueueConfig[string]{Name: "q", MetricsProvider: p})
		}, func(q linkedQueue, item string) time.Duration {
			q.(*TypedDelayingQueue[string]).AddAfter(item, time.Second)
			return time.Second
		}},
		{"delaying, retried at once", func(p MetricsProvider) linkedQueue {
			return NewTypedDelayingQueueWithConfig(TypedDelayingQueueConfig[string]{Name: "q", MetricsProvider: p})
		}, func(q linkedQueue, item string) time.Duration {
			q.(*TypedDelayingQueue[string]).AddAfter(item, 0)
			return 0
		}},
		{"delaying with AddCancelsDelay", func(p MetricsProvider) linkedQueue {
			return NewTypedDelayingQueueWithConfig(TypedDelayingQueueConfig[string]{Name: "q", MetricsProvider: p, AddCancelsDelay: true})
		}, func(q linkedQueue, item string) time.Duration {
			q.(*TypedDelayingQueue[string]).Reschedule(item, 0)
			return 0
		}},
		{"delaying with Debounce", func(p MetricsProvider) linkedQueue {
			return NewTypedDelayingQueueWithConfig(TypedDelayingQueueConfig[string]{Name: "q", MetricsProvider: p,
				Debounce: Debounce{Quiet: time.Millisecond, MaxDelay: time.Second}})
		}, func(q linkedQueue, item string) time.Duration {
			q.(*TypedDelayingQueue[string]).Reschedule(item, time.Second)
			return time.Second
		}},
		{"rate-limiting", func(p MetricsProvider) linkedQueue {
			return NewTypedRateLimitingQueueWithConfig(limiter(), TypedRateLimitingQueueConfig[string]{Name: "q", MetricsProvider: p})
		}, func(q linkedQueue, item string) time.Duration {
			q.(*TypedRateLimitingQueue[string]).AddRateLimited(item)
			return time.Second
		}},
		{"priority", func(p MetricsProvider) linkedQueue {
			return NewTypedPriorityQueue(limiter(), TypedPriorityQueueConfig[string]{Name: "q", MetricsProvider: p})
		}, func(q linkedQueue, item string) time.Duration {
			q.(*TypedPriorityQueue[string]).AddRateLimited(item)
			return time.Second
		}},
		{"priority with Debounce", func(p MetricsProvider) linkedQueue {
			return NewTypedPriorityQueue(limiter(), TypedPriorityQueueConfig[string]{Name: "q", MetricsProvider: p,
				Debounce: Debounce{Quiet: time.Millisecond, MaxDelay: time.Second}})
		}, func(q linkedQueue, item string) time.Duration {
			q.(*TypedPriorityQueue[string]).AddAfter(item, time.Second)
			return time.Second
		}},
	}
	for _, queue := range queues {
		t.Run(queue.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx := t.Context()
				var p MetricsProvider = tracingProvider{&recordingProvider{}, &linkTracer{}}
				if strings.HasPrefix(queue.name, "priority") {
					p = tracedPriorityProvider{&priorityRecordingProvider{}, &linkTracer{}}
				}
				q := queue.make(p)
				defer q.ShutDown()
				verify := func(step string) {
					t.Helper()
					require.NoError(t, verifyLinks(q), "after %s", step)
				}
				get := func(want string, links ...byte) ItemInfo {
					t.Helper()
					time.Sleep(time.Millisecond) // a debounced add's burst ends
					item, info, err := q.GetWithInfoContext(ctx)
					require.NoError(t, err)
					require.Equal(t, want, item)
					var wantLinks []TraceLink
					for _, n := range links {
						wantLinks = append(wantLinks, testLink(n))
					}
					assert.Equal(t, wantLinks, info.Links, "links of %s", want)
					verify("get")
					return info
				}

				start := time.Now()
				q.AddContext(withLink(ctx, 1), "a")
				q.Add("a")
				time.Sleep(time.Second)
				q.AddContext(withLink(ctx, 2), "a")
				q.AddContext(ctx, "a") // no span: links nothing
				verify("adds")
				info := get("a", 1, 2)
				wantAdded := start
				if strings.Contains(queue.name, "Debounce") {
					wantAdded = start.Add(time.Millisecond) // the end of the burst's quiet time
				}
				assert.Equal(t, wantAdded, info.Added, "the first add")
				assert.Zero(t, info.DroppedLinks)

				q.AddContext(withLink(ctx, 3), "a") // while processing: the next hand-out's
				verify("re-add")
				require.True(t, q.Remove("a"))
				verify("remove while processing") // forgot link 3
				q.AddContext(withLink(ctx, 5), "a")
				q.Done("a")
				get("a", 5)
				q.Done("a")

				q.AddContext(withLink(ctx, 4), "b")
				require.True(t, q.Remove("b"))
				q.Add("b")
				get("b")
				q.Done("b")

				for n := range byte(MaxTraceLinks + 2) {
					q.AddContext(withLink(ctx, 10+n), "c")
				}
				info = get("c", 10, 11, 12, 13, 14, 15, 16, 17)
				assert.Equal(t, 2, info.DroppedLinks)

				if queue.retry != nil {
					delay := queue.retry(q, "c")
					verify("retry")
					q.Done("c")
					verify("done")
					time.Sleep(delay)
					info = get("c", 10, 11, 12, 13, 14, 15, 16, 17)
					assert.Equal(t, 2, info.DroppedLinks, "a retry carries the dropped count")
				}
				q.Done("c")

				// A park keeps the links for the hand-out after the wake,
				// or after an add that ends it, ahead of the add's.
				q.AddContext(withLink(ctx, 20), "d")
				get("d", 20)
				q.Park("d", "ready")
				q.Done("d")
				verify("park")
				require.Equal(t, 1, q.Wake("ready"))
				time.Sleep(time.Minute) // a park's backoff
				get("d", 20)
				q.Park("d", "ready")
				q.Done("d")
				q.AddContext(withLink(ctx, 21), "d")
				verify("an add that ends a park")
				get("d", 20, 21)
				q.Done("d")

				time.Sleep(time.Minute)
				verify("the end")
				tr := traceOf(q)
				assert.Empty(t, tr.items, "links left")
				assert.Empty(t, tr.delayed, "delayed links left")
			})
		})
	}
}

// coreOf returns the core under one of this package's queues.
func traceOf(q any) *traceState[string] {
	switch q := q.(type) {
	case *Typed[string]:
		return q.core.trace
	case *TypedDelayingQueue[string]:
		return q.typed.core.trace
	case *TypedRateLimitingQueue[string]:
		return traceOf(q.delaying)
	case *TypedPriorityQueue[string]:
		return q.core.trace
	}
	panic("no core")
}

// verifyLinks checks the core of q, one of this package's queues.
func verifyLinks(q any) error {
	switch q := q.(type) {
	case *Typed[string]:
		return verifyQueue(q)
	case *TypedDelayingQueue[string]:
		return verifyQueue(q.typed)
	case *TypedRateLimitingQueue[string]:
		return verifyLinks(q.delaying)
	case *TypedPriorityQueue[string]:
		return verifyPriorityQueue(q)
	}
	panic("no core")
}

// TestNoTracingProviderStoresNothing checks that a queue whose provider does
// not trace keeps no link and that its AddContext is Add.
func TestNoTracingProviderStoresNothing(t *testing.T) {
	for _, p := range []MetricsProvider{nil, &recordingProvider{}} {
		q := NewTypedWithConfig(TypedQueueConfig[string]{Name: "q", MetricsProvider: p})
		assert.Nil(t, q.core.trace)
		q.AddContext(withLink(t.Context(), 1), "a")
		_, info, err := q.GetWithInfoContext(t.Context())
		require.NoError(t, err)
		assert.Nil(t, info.Links)
		q.Done("a")
		q.ShutDown()
	}
}
