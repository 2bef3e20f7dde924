package redisqueue

import (
	"context"
	"strconv"
	"strings"

	"github.com/go-workqueue/workqueue"
)

// GetWithInfoContext is GetContext that also returns the item's info: its
// priority, when it was last queued (Added, on this handle's clock) and,
// if the handle's MetricsProvider is a workqueue.TracingProvider, the
// links of the adds merged into this hand-out that carried a span
// (AddContext, AddAfterContext and AddWithOptsContext of a traced handle
// of the queue), in the order of the adds, at most
// workqueue.MaxTraceLinks, DroppedLinks counting the others. An add while
// the item is processed links the next hand-out. A retry (an add with a
// delay or RateLimited, by any handle, while the item is processed) and a
// Park carry the links of the hand-out being processed to the next. The
// links are stored with the key in Redis until the hand-out they went to
// ends with Done, or Remove takes its add back; a handle without a
// TracingProvider neither stores nor clears them, so every handle of a
// queue must trace or none. A reconcile.Runner over the queue uses it to
// link each reconcile to its adds. It is safe for concurrent use.
func (q *Queue[T]) GetWithInfoContext(ctx context.Context) (item T, info workqueue.ItemInfo, err error) {
	h, err := q.get(ctx, false)
	return h.item, h.info, err
}

// tracerOf returns provider as a TracingProvider, or nil.
func tracerOf(provider workqueue.MetricsProvider) workqueue.TracingProvider {
	tp, _ := provider.(workqueue.TracingProvider)
	return tp
}

// linkOf returns the link an add with ctx sends: "TRACEPARENT TRACESTATE"
// of the span ctx carries, or "" if the handle does not trace or ctx has
// no span.
func (q *Queue[T]) linkOf(ctx context.Context) string {
	if q.tracer == nil {
		return ""
	}
	l, ok := q.tracer.TraceLink(ctx)
	if !ok || !l.IsValid() {
		return ""
	}
	// A newline would end the link in Redis's encoding (see LINKS in
	// lua/workqueue.lua); a valid tracestate has none.
	return l.TraceParent() + " " + strings.ReplaceAll(l.State, "\n", "")
}

// parseLinks returns the links of a hand-out as the get function returns
// them: "COUNT DROPPED", then a newline and "TRACEPARENT TRACESTATE" for
// each link; "" for none. A link that does not parse is counted as
// dropped.
func parseLinks(s string) ([]workqueue.TraceLink, int) {
	if s == "" {
		return nil, 0
	}
	lines := strings.Split(s, "\n")
	_, d, _ := strings.Cut(lines[0], " ")
	dropped, _ := strconv.Atoi(d)
	links := make([]workqueue.TraceLink, 0, len(lines)-1)
	for _, line := range lines[1:] {
		parent, state, _ := strings.Cut(line, " ")
		l, err := workqueue.ParseTraceLink(parent, state)
		if err != nil {
			dropped++
			continue
		}
		links = append(links, l)
	}
	return links, dropped
}
