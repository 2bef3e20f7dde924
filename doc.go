// Package workqueue provides generic work queues for reconcile loops with
// client-go's typed workqueue API: a program switches by changing its
// import path.
//
// Guarantees:
//   - Fair: items are handed out in the order they were added (with the
//     default storage; see [Queue]), passing over those of a group at its
//     limit ([GroupLimits]).
//   - Stingy: an item added several times before it is handed out is
//     handed out once.
//   - One worker at a time: an item is never handed to two workers at
//     once; one added while it is processed is handed out again after Done.
//   - Multiple producers and consumers: every method of every queue is safe
//     for concurrent use.
//   - Linearizable: every method takes effect at one instant between its
//     call and its return; ShutDownWithDrain at two, the shutdown and the
//     drain's end.
//   - Shutdown: from the instant a shutdown begins, adds do nothing and
//     AddRateLimited records no failure; items queued, or added while
//     processed, before it are still handed out. ShutDown stops the queue's
//     goroutines before it returns; ShutDownWithDrain also waits until no
//     item is queued or processing.
//
// The queues keep client-go's constructors, which return the concrete
// types, so the additions need no type assertion:
//   - [Typed] (a [TypedInterface]) is the queue.
//   - [TypedDelayingQueue] (a [TypedDelayingInterface]) adds AddAfter.
//   - [TypedRateLimitingQueue] (a [TypedRateLimitingInterface]) adds
//     AddRateLimited, Forget and NumRequeues, with delays from a
//     [TypedRateLimiter]: client-go's rate limiters are here.
//   - [TypedPriorityQueue] is a rate-limiting queue that hands out higher
//     priorities first: AddWithOpts, GetWithPriority, and in its config
//     Fairness (keys take turns within a priority, FairnessWeights more
//     turns for some) and MaxWait (a bound on the wait behind higher
//     priorities).
//
// Every queue also has GetContext (a Get that a context can end), Remove
// (take back an item that no longer needs work), Snapshot (a bounded view
// of what it holds), and Park, Wake, WakeFunc and WakeItem: hold an item
// until an event instead of polling, for at most MaxParkTime. A park is not
// a failure; on a rate-limiting queue a wake queues the item no sooner than
// its ParkBackoff after the Park. Every queue takes [GroupLimits] in its
// config (at most N items of a group in flight; SetGroupLimit changes N);
// the delaying, rate-limiting and priority queues take [Debounce] (hand an
// item out once its adds go quiet) and have Reschedule (a delay that
// replaces the pending one).
//
// [Runner] runs the worker loop: it retries failures with backoff, at the
// item's priority on a priority queue unless [Result.Priority] says
// otherwise, and when its context is cancelled stops after a grace period
// or, with [WithDrain], drains the queue first.
//
// Metrics come from a [MetricsProvider] in a queue's config. There is no
// global provider: a named queue made without one logs a warning, once per
// process.
//
// docs/design.md lists where this package differs from client-go.
package workqueue
