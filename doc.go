// Package workqueue provides generic work queues for reconcile loops: a
// queue that hands each item to one worker at a time, a delaying layer that
// adds items later, and a rate-limiting layer that retries failures with
// backoff.
//
// The API is client-go's typed workqueue API (k8s.io/client-go/util/workqueue),
// so a program switches by changing its import path. The package has no
// Kubernetes dependencies.
//
// Guarantees:
//   - Fair: items are handed out in the order in which they were added
//     (with the default storage; see [Queue] to plug in another order).
//   - Stingy: an item added several times before it is handed out is
//     handed out once.
//   - One worker at a time: an item is never handed to two workers at once.
//     An item added while it is being processed is handed out again after
//     [Typed.Done].
//   - Multiple producers and consumers: every method of every queue is safe
//     for concurrent use, and an item may be added while it is processed.
//   - Linearizable: every method takes effect at one instant between its
//     call and its return, so any concurrent history of calls is one that
//     the same calls made one at a time could produce. ShutDownWithDrain is
//     two such instants: the shutdown, then the drain's end. The test suite
//     checks recorded concurrent histories with a linearizability checker.
//   - Shutdown: a shutdown begins at one instant for every layer: from then
//     on Add, AddAfter and AddRateLimited do nothing, and AddRateLimited
//     records no failure. Items queued before it are still handed out, and
//     an item added while processing before it is queued again by Done.
//     ShutDown stops the queue's goroutines before it returns;
//     ShutDownWithDrain also waits until no item is queued or processing.
//
// The three layers nest: [TypedInterface] is the queue,
// [TypedDelayingInterface] adds AddAfter, and [TypedRateLimitingInterface]
// adds AddRateLimited, Forget and NumRequeues on top of a [TypedRateLimiter].
//
// Beyond client-go's API, every queue of this package has GetContext (a Get
// that a context can end), Remove (take back an item that no longer needs
// work) and Snapshot (a bounded view of what the queue holds, for
// inspection). The constructors keep client-go's signatures; reach these
// methods on the delaying and rate-limiting layers through
// [TypedDelayingQueue] and [TypedRateLimitingQueue].
//
// [Runner] runs the worker loop over a rate-limiting queue: it reconciles
// each item, retries failures with backoff up to a limit, gives up on
// terminal errors, recovers panics, bounds each reconcile with a timeout and
// drains the queue when its context is cancelled.
//
// Where client-go has known bugs, this package differs; the README lists each
// difference.
package workqueue
