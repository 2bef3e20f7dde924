package workqueue

import "context"

// rateLimitingQueue is what the rate-limiting and priority queues of this
// package share, for the tests that run on both.
type rateLimitingQueue[T comparable] interface {
	TypedRateLimitingInterface[T]
	GetContext(ctx context.Context) (item T, err error)
	Remove(item T) bool
	Snapshot(n int) Snapshot[T]
	Park(item T, events ...string)
	Wake(event string) int
	WakeFunc(event string, accept func(item T) bool) int
	WakeItem(item T) bool
}

var (
	_ rateLimitingQueue[string] = (*TypedRateLimitingQueue[string])(nil)
	_ rateLimitingQueue[string] = (*TypedPriorityQueue[string])(nil)
)
