// Package otelworkqueue records the metrics of work queues as
// OpenTelemetry instruments, and traces their reconciles.
//
// Create one [Provider] and pass it in each queue's config, or to
// workqueue.SetProvider for every queue made after it:
//
//	provider := otelworkqueue.NewProvider(
//		otelworkqueue.WithMeterProvider(meterProvider),
//		otelworkqueue.WithTracerProvider(tracerProvider))
//	queue := workqueue.NewTypedRateLimitingQueueWithConfig(limiter,
//		workqueue.TypedRateLimitingQueueConfig[string]{Name: "pods", MetricsProvider: provider})
//
// Without those options it uses the global providers, which forward to the
// first ones otel.SetMeterProvider and otel.SetTracerProvider set, even later.
//
// # Metrics
//
// Every measurement has the attribute name, the queue's name.
// OpenTelemetry's Prometheus exporter, with its default translation,
// exports these instruments under the prometheus package's names:
//
//	workqueue.depth                      up-down counter  items waiting to be handed out
//	workqueue.adds                       counter          adds not collapsed into a queued item
//	workqueue.queue_duration             histogram, s     first add to Get
//	workqueue.work_duration              histogram, s     Get to Done
//	workqueue.unfinished_work            gauge, s         summed age of the items being processed
//	workqueue.longest_running_processor  gauge, s         age of the oldest item being processed
//	workqueue.retries                    counter          AddAfter, AddRateLimited, Reschedule, AddWithOpts calls
//	workqueue.delayed_items              gauge            delayed adds and park backoffs pending
//	workqueue.depth_by_priority          up-down counter  depth of a priority queue by priority
//	workqueue.parked_items               gauge            items parked until an event
//	workqueue.wakes                      counter          parks ended by an event, by event
//	workqueue.park_timeouts              counter          parks ended by MaxParkTime
//	workqueue.items_waiting_for_slot     gauge            queued items beyond their group's free slots
//	workqueue.groups_at_limit            gauge            groups with such items
//	workqueue.reconciles                 counter          a Runner's reconciles, by result
//	workqueue.reconcile_errors           counter          reconciles that returned an error or panicked
//	workqueue.reconcile_duration         histogram, s     how long a reconcile ran
//	workqueue.reconcile_wait             histogram, s     first add to the reconcile's start
//	workqueue.active_workers             up-down counter  workers reconciling an item
//	workqueue.workers                    gauge            workers a Runner runs
//
// workqueue.retries leaves out calls after the shutdown, debounced AddAfter
// calls of zero or less and a priority queue's zero delays; without
// priorities, an item's delayed add and park backoff count apart in
// workqueue.delayed_items. workqueue.queue_duration and
// workqueue.reconcile_wait run from the add that made the item ready since
// its last hand-out (for a delayed or debounced add, the end of its delay).
// The last six are a [reconcile.Runner]'s, over a queue that has the
// provider; workqueue.reconciles has a second attribute, result, one of
// [reconcile.ResultSuccess] and the constants after it.
// workqueue.depth_by_priority has a second attribute, priority, with at
// most [MaxPriorityValues] values per queue and "other" for the rest;
// workqueue.wakes has a second attribute, event, bounded the same way by
// [MaxEventValues].
//
// # Traces
//
// A queue made with the provider keeps the span context of each add made
// with AddContext ([workqueue.Base.AddContext], a method of every queue)
// until the item is handed out; Add links nothing. Adds
// merged into one hand-out keep at most [workqueue.MaxTraceLinks] (8)
// span contexts, the first ones, and count the others. A
// [reconcile.Runner] over the queue starts one span per reconcile:
//
//   - named "reconcile NAME" ("reconcile" on an unnamed queue), of kind
//     consumer, the root of a new trace;
//   - with a link to the span of each add it serves;
//   - with the attributes [AttrQueue], [AttrAttempt] (NumRequeues at the
//     hand-out, plus 1), [AttrPriority], [AttrQueued] (as
//     workqueue.reconcile_wait; none on an unnamed queue) and, if links
//     were dropped, [AttrDroppedLinks];
//   - with an error status and the error recorded if the reconcile fails
//     or panics.
//
// The reconcile's context carries the span, so the spans the reconcile
// starts are its children. A retry (AddRateLimited, AddAfter or
// Reschedule of the item while it is processed, as the Runner does on an
// error or a requeue) and a Park (Result.WaitFor) carry the links of the
// reconcile to the next one, whose span thus links
// the same adds with the next attempt; an add made while the item is
// processed links only the next reconcile. A queue made with a provider
// that does not trace, or with none, keeps no span context. examples/traces prints a controller's spans with the
// stdout exporter.
package otelworkqueue
