// Package inspect serves a read-only page that shows what work queues hold
// and which keys are stuck, as HTML for a browser and as JSON for scripts.
//
// Register each queue of the workqueue package with a [Handler] and mount
// the handler where you serve debug endpoints; give the queue's Runner the
// [Failures] that Register returns, so the page shows the keys that fail
// and what became of them:
//
//	h := inspect.NewHandler()
//	failures := inspect.Register(h, "pods", queue)
//	runner := reconcile.NewRunner(queue, reconcileKey, reconcile.WithErrorObserver(failures))
//	mux.Handle("/debug/queues", h)
//
// For each queue the page shows, in this order:
//   - the counts of a [workqueue.Snapshot]: queued (depth), processing,
//     delays pending, parked, adds since the queue was made, and adds per
//     second; then the failed reconciles of the last minute, and the
//     failures and give-ups since registration;
//   - on a queue with group limits ([workqueue.GroupLimits]), the groups
//     that have keys in flight or queued, those with keys waiting for a
//     free slot first, each with its limit, keys in flight, keys queued
//     and keys waiting for a slot, and how many queued keys wait for a
//     slot in all; the section is left out while no group has keys;
//   - the keys in flight, longest first, with how long they have been;
//   - the keys failing now, most failures in a row first, with the last
//     error, when it happened and whether the Runner retries them, gave up
//     on them or dropped their retry at shutdown;
//   - the keys that failed most recently, latest first, even those that
//     have succeeded since, so that failures retried between two loads of
//     the page still show;
//   - the delays pending, soonest first, with their key and the time left;
//   - the keys parked until an event, longest first, with their events;
//   - the next keys to be handed out, leaving out those of groups at their
//     limit.
//
// Limits, stated up front:
//   - Each list shows at most a fixed number of keys (see [WithLimit]), and
//     each queue's [Failures] keeps no more failing keys, and no more
//     recent failures, than that, each error cut to 1 KiB.
//   - Keys in flight are listed only from their registration on: a queue
//     records when it hands out an item once it has been asked for a
//     snapshot, and Register asks for the first one.
//   - The handler only reads: it calls each queue's Snapshot method, which
//     holds the queue's lock for a number of steps bounded by the limit, and
//     nothing it serves changes a queue. On a queue with group limits the
//     snapshot also lists every group that has keys, which takes steps in
//     proportion to their number; the page shows the first of them, as many
//     as the limit.
package inspect
