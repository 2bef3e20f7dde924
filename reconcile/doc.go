// Package reconcile runs a controller's worker loop over a queue of package
// workqueue: a [Runner] gets each item, calls a [Func] with it, and retries,
// requeues, parks or forgets it as the Func's [Result] and error say, until
// its context ends.
//
// Over a queue that records metrics with a [MetricsProvider], or traces
// with a [TracingProvider], the Runner records its own beside the queue's,
// under the queue's name; packages prometheus and otelworkqueue provide
// both.
package reconcile
