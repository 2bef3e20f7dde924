// Package redisqueue is a work queue shared by many processes through
// Redis 7.0 or later, or Valkey, with the rules of the in-memory workqueue:
//
//   - a key is queued once, however often it is added;
//   - a key is handed to one worker at a time across every process, and a
//     key added while it is processed is queued again at its Done;
//   - keys are handed out highest priority first (AddWithOpts, with the
//     in-memory TypedPriorityQueue's rules), and within a priority in the
//     order of their first add (within a partition, with
//     Options.Partitions);
//   - with Options.Fairness, the fairness keys take turns within each
//     priority, and with Options.GroupLimits at most N keys of a group are
//     leased at once, across every process;
//   - Remove takes a key back, from any process: queued, delayed, parked,
//     or its re-add while it is processed;
//   - a key parked until an event (Park) stays parked in Redis, whichever
//     process parked it, until any process wakes the event (Wake), the
//     key (WakeItem) or adds it, or MaxParkTime passes; an event woken
//     since the key's Get ends its park at Done, so no wakeup is lost; a
//     wake queues the key no sooner than its ParkBackoff after the Park;
//   - AddAfter's earliest ready time wins, and AddRateLimited's failure
//     counts live in Redis, so backoff goes on when another process
//     retries the key;
//   - a key handed out is leased to its handle, which extends the lease
//     while the key is processed; if the process dies, the key is handed
//     out again once the lease expires, so delivery is at least once;
//   - a Done whose lease expired and was taken back is refused, so a late
//     holder cannot undo another's work;
//   - with a tracing MetricsProvider, a reconcile in one process links the
//     adds made with a span in others (GetWithInfoContext).
//
// The directory is redis and the package redisqueue, so that it can be
// imported beside go-redis without an alias. Its README.md is the guide:
// a first program, what happens when a worker or Redis dies, and how to
// run it in production.
package redisqueue
