package reconcile

import (
	"context"

	"github.com/go-workqueue/workqueue"
)

// Prioritized is a queue with priorities, as workqueue.TypedPriorityQueue and
// the Redis queue are; a [Runner] over one retries and requeues items at
// their priority.
type Prioritized[T comparable] interface {
	GetWithPriorityContext(ctx context.Context) (item T, priority int, err error)
	AddWithOpts(opts workqueue.AddOpts, items ...T)
}

// InfoGetter hands out items with their workqueue.ItemInfo, as the queues of
// package workqueue do; a [Runner] uses it to record waits and link adds, but
// not a method a queue gets by embedding one, which may bypass its
// GetContext.
type InfoGetter[T comparable] interface {
	GetWithInfoContext(ctx context.Context) (item T, info workqueue.ItemInfo, err error)
}

// contextGetter is a queue's GetContext; over a queue that cannot get with
// a context it returns an error wrapping errors.ErrUnsupported.
type contextGetter[T comparable] interface {
	GetContext(ctx context.Context) (item T, err error)
}

// parker is a queue's Park.
type parker[T comparable] interface {
	Park(item T, events ...string)
}

var (
	_ Prioritized[int] = (*workqueue.TypedPriorityQueue[int])(nil)
	_ InfoGetter[int]  = (*workqueue.Typed[int])(nil)
	_ InfoGetter[int]  = (*workqueue.TypedRateLimitingQueue[int])(nil)
	_ InfoGetter[int]  = (*workqueue.TypedPriorityQueue[int])(nil)
	_ parker[int]      = (*workqueue.TypedRateLimitingQueue[int])(nil)
)
