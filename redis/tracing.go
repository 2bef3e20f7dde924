package redisqueue

import (
	"context"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"

	"github.com/go-workqueue/workqueue"
	"github.com/go-workqueue/workqueue/reconcile"
)

// GetWithInfoContext is GetContext that also returns the item's info: its
// priority, when it was last queued (Added, on this handle's clock) and,
// if the handle's MetricsProvider is a reconcile.TracingProvider, the
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
func tracerOf(provider workqueue.MetricsProvider) reconcile.TracingProvider {
	tp, _ := provider.(reconcile.TracingProvider)
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
	if !ok || !validLink(l) {
		return ""
	}
	// A newline would end the link in Redis's encoding (see LINKS in
	// lua/workqueue.lua); a valid tracestate has none.
	return traceParent(l) + " " + strings.ReplaceAll(l.State, "\n", "")
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
		l, err := parseTraceLink(parent, state)
		if err != nil {
			dropped++
			continue
		}
		links = append(links, l)
	}
	return links, dropped
}

// traceParent returns l as a W3C traceparent header, version 00.
func traceParent(l workqueue.TraceLink) string {
	var b strings.Builder
	b.Grow(55)
	b.WriteString("00-")
	b.WriteString(hex.EncodeToString(l.TraceID[:]))
	b.WriteByte('-')
	b.WriteString(hex.EncodeToString(l.SpanID[:]))
	b.WriteByte('-')
	b.WriteString(hex.EncodeToString([]byte{l.Flags}))
	return b.String()
}

// parseTraceLink returns the link of a W3C traceparent and tracestate
// header, keeping tracestate as is; it errs if traceparent is not valid
// version 00.
func parseTraceLink(traceparent, tracestate string) (workqueue.TraceLink, error) {
	var l workqueue.TraceLink
	p := strings.Split(traceparent, "-")
	if len(p) != 4 || p[0] != "00" || len(p[1]) != 32 || len(p[2]) != 16 || len(p[3]) != 2 {
		return l, errors.New("redis: not a version 00 traceparent: " + traceparent)
	}
	// The header's hex is lowercase; hex.Decode would take uppercase too.
	if strings.ContainsFunc(p[1]+p[2]+p[3], func(r rune) bool { return (r < '0' || r > '9') && (r < 'a' || r > 'f') }) {
		return l, errors.New("redis: invalid traceparent: " + traceparent)
	}
	var flags [1]byte
	_, err1 := hex.Decode(l.TraceID[:], []byte(p[1]))
	_, err2 := hex.Decode(l.SpanID[:], []byte(p[2]))
	_, err3 := hex.Decode(flags[:], []byte(p[3]))
	if err := errors.Join(err1, err2, err3); err != nil || !validLink(l) {
		return workqueue.TraceLink{}, errors.New("redis: invalid traceparent: " + traceparent)
	}
	l.Flags, l.State = flags[0], tracestate
	return l, nil
}

// validLink reports whether l has a non-zero trace id and span id.
func validLink(l workqueue.TraceLink) bool {
	return l.TraceID != [16]byte{} && l.SpanID != [8]byte{}
}
