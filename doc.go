// Package workqueue provides generic work queues for reconcile loops with
// client-go's typed workqueue API: a program switches by changing its
// import path.
//
// Guarantees, on every queue:
//   - Fair: first in, first out (within a priority and Fairness key; custom
//     storage sets its own), passing over the groups at their limit.
//   - Stingy: adds of an item before it is handed out collapse into one.
//   - One worker at a time: an item added while processed is queued at Done.
//   - Linearizable: every method is safe for concurrent use and takes
//     effect at one instant between its call and its return;
//     ShutDownWithDrain at two, the shutdown and the drain's end.
//   - Shutdown: once a shutdown begins, adds do nothing and AddRateLimited
//     records no failure; queued items are still handed out.
//
// The constructors (client-go's) return [Typed], [TypedDelayingQueue],
// [TypedRateLimitingQueue] and [TypedPriorityQueue]; package reconcile runs
// the worker loop over the last two. docs/design.md lists where this package
// differs from client-go.
package workqueue
