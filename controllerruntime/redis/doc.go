// Package crredis runs controller-runtime controllers on one work queue
// shared through Redis by every replica of a controller: the queue of
// github.com/go-workqueue/workqueue/redis (package redisqueue), with
// controller-runtime's priorityqueue.PriorityQueue interface.
//
// [NewQueue] returns a function that fits controller.Options.NewQueue;
// each controller gets a handle on the Redis queue named after it, so the
// controllers of the same name in every replica share one queue:
//
//	ctrl.NewControllerManagedBy(mgr).
//		WithOptions(controller.Options{NewQueue: crredis.NewQueue[reconcile.Request](client, redisqueue.Options[reconcile.Request]{})}).
//		...
//
// What a controller keeps across replicas:
//   - a request is queued once however many replicas' informers add it,
//     and reconciled by one worker of one replica at a time;
//   - controller-runtime's handlers add initial-list and resync events
//     at handler.LowPriority, and every replica hands them out behind the
//     live changes of all replicas;
//   - Requeue, RequeueAfter and errors are retried by whichever replica
//     gets the request next, with the failure count and backoff kept in
//     Redis;
//   - a request whose replica dies is handed out again when its lease
//     expires;
//   - with redisqueue.Options.Fairness, namespaces (say) take turns
//     within each priority across all replicas, so that one namespace's
//     thousands of requests do not hold back another's few.
//
// redisqueue's README says what the queue guarantees and how it differs
// from the in-memory priority queue. The module is apart from github.com/go-workqueue/workqueue/controllerruntime
// so that the controllers that stay in one process do not depend on
// go-redis, and from the redis module so that its users do not depend on
// controller-runtime.
package crredis
