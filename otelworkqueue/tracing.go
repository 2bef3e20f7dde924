package otelworkqueue

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/go-workqueue/workqueue"
	"github.com/go-workqueue/workqueue/reconcile"
)

// The attributes of a reconcile's span.
const (
	AttrQueue        = "workqueue.name"          // the queue's name
	AttrAttempt      = "workqueue.attempt"       // 1 for the first reconcile, NumRequeues+1 after
	AttrPriority     = "workqueue.priority"      // the item's priority
	AttrQueued       = "workqueue.queued"        // seconds from the first add to the start
	AttrDroppedLinks = "workqueue.links.dropped" // links beyond workqueue.MaxTraceLinks, if any
)

// TraceLink returns the link to the span ctx carries, if it is valid.
func (p *Provider) TraceLink(ctx context.Context) (workqueue.TraceLink, bool) {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return workqueue.TraceLink{}, false
	}
	return workqueue.TraceLink{
		TraceID: sc.TraceID(),
		SpanID:  sc.SpanID(),
		Flags:   byte(sc.TraceFlags()),
		State:   sc.TraceState().String(),
	}, true
}

// StartReconcile starts the span "reconcile NAME", of kind consumer, as the
// root of a new trace, with a link to each add the reconcile serves and
// the attributes above; the function it returns sets an error status with
// the reconcile's error and ends the span.
func (p *Provider) StartReconcile(ctx context.Context, s reconcile.Span) (context.Context, func(reconcile.Result, error)) {
	links := make([]trace.Link, 0, len(s.Info.Links))
	for _, l := range s.Info.Links {
		state, _ := trace.ParseTraceState(l.State)
		links = append(links, trace.Link{SpanContext: trace.NewSpanContext(trace.SpanContextConfig{
			TraceID: l.TraceID, SpanID: l.SpanID, TraceFlags: trace.TraceFlags(l.Flags), TraceState: state, Remote: true,
		})})
	}
	attrs := []attribute.KeyValue{
		attribute.String(AttrQueue, s.Queue),
		attribute.Int(AttrAttempt, s.Attempt),
		attribute.Int(AttrPriority, s.Info.Priority),
	}
	if !s.Info.Added.IsZero() {
		attrs = append(attrs, attribute.Float64(AttrQueued, s.Queued.Seconds()))
	}
	if s.Info.DroppedLinks > 0 {
		attrs = append(attrs, attribute.Int(AttrDroppedLinks, s.Info.DroppedLinks))
	}
	name := "reconcile"
	if s.Queue != "" {
		name += " " + s.Queue
	}
	ctx, span := p.tracer.Start(ctx, name, trace.WithNewRoot(), trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithLinks(links...), trace.WithAttributes(attrs...))
	return ctx, func(_ reconcile.Result, err error) {
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
	}
}
