// Package crqueue runs controller-runtime controllers on the
// [workqueue.TypedPriorityQueue] of github.com/go-workqueue/workqueue.
//
// [NewQueue] returns a function that fits controller.Options.NewQueue
// directly, and the queue it makes satisfies controller-runtime's
// priorityqueue.PriorityQueue, so controller-runtime's handlers keep
// pushing initial-list and resync events behind real changes:
//
//	ctrl.NewControllerManagedBy(mgr).
//		WithOptions(controller.Options{NewQueue: crqueue.NewQueue[reconcile.Request]()}).
//		...
//
// The package is named crqueue, not after its directory, so that it can be
// imported next to controller-runtime's own packages (ctrl, which is
// named controllerruntime, controller, reconcile, handler, source,
// workqueue, priorityqueue) without an alias.
package crqueue
