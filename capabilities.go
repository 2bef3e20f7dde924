package workqueue

import (
	"context"
	"time"
)

// TypedInterface is client-go's work queue interface; see [Typed].
type TypedInterface[T comparable] interface {
	Add(item T)
	Len() int
	Get() (item T, shutdown bool)
	Done(item T)
	ShutDown()
	ShutDownWithDrain()
	ShuttingDown() bool
}

// TypedDelayingInterface is client-go's delaying queue interface.
type TypedDelayingInterface[T comparable] interface {
	TypedInterface[T]
	AddAfter(item T, duration time.Duration)
}

// TypedRateLimitingInterface is client-go's rate-limiting queue interface.
type TypedRateLimitingInterface[T comparable] interface {
	TypedDelayingInterface[T]
	AddRateLimited(item T)
	Forget(item T)
	NumRequeues(item T) int
}

// The capabilities below are what this package's queues look for in a
// queue they are given, which may be one from outside this package: each
// layer uses what the queue below it has and falls back where it has not. Who implements which:
//
//	                 Typed  TypedDelayingQueue  TypedRateLimitingQueue  TypedPriorityQueue
//	addStopper       yes    yes                 -                       -
//	contextGetter    yes    yes                 yes                     yes
//	remover          yes    yes                 yes                     yes
//	snapshotter      yes    yes                 yes                     yes
//	parker           yes    yes                 yes                     yes
//	groupLimiter     yes    yes                 yes                     yes
//	parkingQueue     yes    yes                 Base's, not used        yes
//	ownParkBackoff   -      -                   yes                     -
//	infoGetter       yes    yes                 yes                     yes
//	metricsSource    yes    yes                 yes                     yes
//	rescheduler      -      yes                 yes                     yes
//	retryAdder       -      yes                 -                       -
//
// Each queue's file checks its row.

// ownParkBackoff is implemented by the rate-limiting queue, which parks
// with a backoff of its own: a layer above does not park through it.
type ownParkBackoff interface {
	parksWithOwnBackoff()
}

// addStopper is implemented by the queues of this package whose shutdown can
// begin (stopAdds) apart from waiting for a drain, so that a layer above
// makes its own check-and-act atomic with that one instant.
type addStopper interface {
	stopAdds()
}

// parkingQueue is what the layers look for in the queue below them to
// park items there: this package's queues.
type parkingQueue[T comparable] interface {
	park(item T, backoff func() time.Duration, events []string)
	WakeFunc(event string, accept func(item T) bool) int
	WakeItem(item T) bool
}

// contextGetter and remover are the additions of this package's queues,
// which the layers look for in the queue below them.
type contextGetter[T comparable] interface {
	GetContext(ctx context.Context) (T, error)
}

type remover[T comparable] interface {
	Remove(item T) bool
}

// snapshotter is implemented by every queue of this package; the layers
// look for it in the queue below them.
type snapshotter[T comparable] interface {
	Snapshot(n int) Snapshot[T]
}

// AddOpts configures [TypedPriorityQueue.AddWithOpts]; the zero value is Add.
type AddOpts struct {
	After       time.Duration // delays the add; 0 or less adds at once, or debounced
	RateLimited bool          // delays it as AddRateLimited; the shorter delay wins
	Priority    *int          // higher is handed out first; nil means 0
	Reschedule  bool          // the delay replaces the pending one; never debounced
}

// metricsSource is a queue that tells its provider and name, which a
// rate-limiting queue over it reports as its own.
type metricsSource interface {
	MetricsConfig() (provider MetricsProvider, name string)
}

// groupLimiter is the SetGroupLimit method of this package's queues.
type groupLimiter interface {
	SetGroupLimit(group string, limit int)
}

// parker is the Park method of this package's queues.
type parker[T comparable] interface {
	Park(item T, events ...string)
}

// rescheduler is implemented by the delaying queue, which the rate-limiting
// layer looks for below it.
type rescheduler[T comparable] interface {
	Reschedule(item T, duration time.Duration)
}

// retryAdder is implemented by the delaying queue: an AddAfter that is
// never debounced, for AddRateLimited.
type retryAdder[T comparable] interface {
	addRetry(item T, duration time.Duration)
}

// additions are the capabilities every queue of this package has.
type additions[T comparable] interface {
	contextGetter[T]
	remover[T]
	snapshotter[T]
	parker[T]
	groupLimiter
}
