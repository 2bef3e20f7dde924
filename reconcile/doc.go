// Package reconcile runs a controller's worker loop over a
// workqueue.TypedRateLimitingInterface (the rate-limiting and priority queues
// of package workqueue, or the Redis queue): a [Runner] gets each item, calls
// a [Func] with it, and retries, requeues, parks or forgets it as the Func's
// [Result] and error say, until its context ends or the queue is shut down.
//
// Over a queue that records metrics with a [MetricsProvider], or traces
// with a [TracingProvider], the Runner records its own beside the queue's,
// under the queue's name; packages prometheus and otelworkqueue provide
// both.
package reconcile
