package reconcile

import (
	"context"
	"time"

	"github.com/go-workqueue/workqueue"
	"github.com/go-workqueue/workqueue/metrics"
)

// Span is what a [TracingProvider] records of one reconcile.
type Span struct {
	Queue   string             // the queue's name
	Attempt int                // NumRequeues of the item at its hand-out, plus 1
	Queued  time.Duration      // from Info.Added to the start; 0 if Info.Added is zero
	Info    workqueue.ItemInfo // the hand-out's priority and links
}

// TracingProvider is a metrics.Provider that also traces: a queue made with
// it (of package workqueue, or the Redis queue) keeps the links of the adds
// made with a context (AddContext) until the item's hand-out, in
// ItemInfo.Links, and a [Runner] over it starts a span for each reconcile,
// linked to them; a queue made without it stores no link. Its methods must
// be safe for concurrent use.
type TracingProvider interface {
	metrics.Provider
	// TraceLink returns the link to the span ctx carries; false if none.
	TraceLink(ctx context.Context) (workqueue.TraceLink, bool)
	// StartReconcile starts a reconcile's span, returning ctx with it and the
	// function the Runner calls with the outcome to end it.
	StartReconcile(ctx context.Context, span Span) (context.Context, func(Result, error))
}
