// Package otelworkqueue records the metrics of work queues as
// OpenTelemetry instruments.
//
// Create one [Provider] and pass it in each queue's config:
//
//	provider := otelworkqueue.NewProvider(otelworkqueue.WithMeterProvider(meterProvider))
//	queue := workqueue.NewTypedRateLimitingQueueWithConfig(limiter,
//		workqueue.TypedRateLimitingQueueConfig[string]{Name: "pods", MetricsProvider: provider})
//
// Every measurement has the attribute name, the queue's name. The
// instruments are those of the prometheus package under OpenTelemetry's
// names; OpenTelemetry's Prometheus exporter, with its default
// translation, exports them under the prometheus package's names, so
// dashboards built for Kubernetes controllers work unchanged:
//
//	workqueue.depth                      up-down counter  items waiting to be handed out
//	workqueue.adds                       counter          items that entered the queue
//	workqueue.queue_duration             histogram, s     first add to Get
//	workqueue.work_duration              histogram, s     Get to Done
//	workqueue.unfinished_work            gauge, s         summed age of the items being processed
//	workqueue.longest_running_processor  gauge, s         age of the oldest item being processed
//	workqueue.retries                    counter          AddAfter and AddRateLimited calls
//	workqueue.delayed_items              gauge            items waiting for their delay
//	workqueue.depth_by_priority          up-down counter  depth of a priority queue by priority
//	workqueue.parked_items               gauge            items parked until an event
//	workqueue.wakes                      counter          parks ended by an event, by event
//	workqueue.park_timeouts              counter          parks ended by MaxParkTime
//	workqueue.items_waiting_for_slot     gauge            queued items beyond their group's free slots
//	workqueue.groups_at_limit            gauge            groups with such items
//	workqueue.reconciles                 counter          a Runner's reconciles, by result
//	workqueue.reconcile_errors           counter          reconciles that returned an error or panicked
//	workqueue.reconcile_duration         histogram, s     how long a reconcile ran
//	workqueue.active_workers             up-down counter  workers reconciling an item
//	workqueue.workers                    gauge            workers a Runner runs
//
// The last five are a [workqueue.Runner]'s, over a queue that has the
// provider; workqueue.reconciles has a second attribute, result, one of
// [workqueue.ResultSuccess] and the constants after it.
//
// workqueue.depth_by_priority has a second attribute, priority, with at
// most [MaxPriorityValues] values per queue and "other" for the rest;
// workqueue.wakes has a second attribute, event, bounded the same way by
// [MaxEventValues].
package otelworkqueue
