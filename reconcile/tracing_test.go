package reconcile

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-workqueue/workqueue"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type linkKey struct{}

// withLink returns ctx carrying testLink(n), which linkTracer finds.
func withLink(ctx context.Context, n byte) context.Context {
	return context.WithValue(ctx, linkKey{}, testLink(n))
}

func testLink(n byte) workqueue.TraceLink {
	return workqueue.TraceLink{TraceID: [16]byte{1}, SpanID: [8]byte{n}, Flags: 1}
}

// linkTracer is the tracing half of a fake TracingProvider: a context's
// link is its linkKey value, and it records the reconciles it starts.
type linkTracer struct {
	mu    sync.Mutex
	spans []Span
	ended []error
}

func (*linkTracer) TraceLink(ctx context.Context) (workqueue.TraceLink, bool) {
	l, ok := ctx.Value(linkKey{}).(workqueue.TraceLink)
	return l, ok
}

func (lt *linkTracer) StartReconcile(ctx context.Context, s Span) (context.Context, func(Result, error)) {
	lt.mu.Lock()
	defer lt.mu.Unlock()
	lt.spans = append(lt.spans, s)
	return ctx, func(_ Result, err error) {
		lt.mu.Lock()
		defer lt.mu.Unlock()
		lt.ended = append(lt.ended, err)
	}
}

// tracingProvider is a recordingProvider that traces with a linkTracer.
type tracingProvider struct {
	*recordingProvider
	*linkTracer
}

var _ TracingProvider = tracingProvider{}

// TestRunnerTraces checks what a Runner hands its TracingProvider: one
// span per reconcile with the queue's name, the attempt, the priority, the
// time queued and the links, and each reconcile's outcome.
func TestRunnerTraces(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tracer := &linkTracer{}
		q := workqueue.NewTypedPriorityQueue(workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Second, time.Minute),
			workqueue.TypedPriorityQueueConfig[string]{Name: "q", MetricsProvider: tracingProvider{&recordingProvider{}, tracer}})
		q.AddContext(withLink(t.Context(), 1), "a")
		seven := 7
		q.AddWithOpts(workqueue.AddOpts{Priority: &seven}, "a")
		time.Sleep(time.Second)
		calls := 0
		boom := assert.AnError
		runner := NewRunner(q, func(context.Context, string) (Result, error) {
			if calls++; calls == 1 {
				return Result{}, boom
			}
			return Result{}, nil
		}, WithLogger(slog.New(slog.DiscardHandler)))
		ctx, cancel := context.WithCancel(t.Context())
		exited := startRunner(ctx, runner, 1)
		time.Sleep(time.Minute)
		cancel()
		<-exited
		require.Len(t, tracer.spans, 2)
		for i, s := range tracer.spans {
			assert.Equal(t, "q", s.Queue)
			assert.Equal(t, i+1, s.Attempt)
			assert.Equal(t, 7, s.Info.Priority)
			assert.Equal(t, []workqueue.TraceLink{testLink(1)}, s.Info.Links)
		}
		assert.Equal(t, time.Second, tracer.spans[0].Queued)
		assert.Zero(t, tracer.spans[1].Queued, "from the end of the retry's delay, when the worker was idle")
		assert.Equal(t, []error{boom, nil}, tracer.ended)
	})
}
