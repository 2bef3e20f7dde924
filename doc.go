// Package workqueue provides generic work queues for reconcile loops with
// client-go's typed workqueue API: a program switches by changing its
// import path.
//
// Guarantees, on every queue:
//   - Fair: items are handed out in the order they were added (with the
//     default storage), passing over those of a group at its limit.
//   - Stingy: an item added several times before it is handed out is
//     handed out once.
//   - One worker at a time: an item added while it is processed is handed
//     out again after Done.
//   - Linearizable: every method is safe for concurrent use and takes
//     effect at one instant between its call and its return;
//     ShutDownWithDrain at two, the shutdown and the drain's end.
//   - Shutdown: from the instant a shutdown begins, adds do nothing and
//     AddRateLimited records no failure; items queued before it are still
//     handed out.
//
// The constructors are client-go's and return the concrete types:
// [Typed], [TypedDelayingQueue] (adds AddAfter), [TypedRateLimitingQueue]
// (adds AddRateLimited, Forget and NumRequeues) and [TypedPriorityQueue]
// (priorities, fairness keys, MaxWait). Each embeds [Base], which holds the
// methods they share, Park and Wake among them; [Runner] runs the worker
// loop over any of them. Metrics come from the [MetricsProvider] of a
// queue's config, or else the one [SetProvider] set. docs/design.md lists
// where this package differs from client-go.
package workqueue
