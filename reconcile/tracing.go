package reconcile

import (
	"context"
	"time"

	"github.com/go-workqueue/workqueue"
)

// Span is what a [TracingProvider] records of one reconcile.
type Span struct {
	Queue   string             // the queue's name
	Attempt int                // NumRequeues of the item at its hand-out, plus 1
	Queued  time.Duration      // from Info.Added to the start; 0 if Info.Added is zero
	Info    workqueue.ItemInfo // the hand-out's priority and links
}

// TracingProvider is a workqueue.TracingProvider that also traces
// reconciles: a [Runner] over a queue that uses it starts a span for each.
// Its methods must be safe for concurrent use.
type TracingProvider interface {
	workqueue.TracingProvider
	// StartReconcile starts a reconcile's span, returning ctx with it and the
	// function the Runner calls with the outcome to end it.
	StartReconcile(ctx context.Context, span Span) (context.Context, func(Result, error))
}
