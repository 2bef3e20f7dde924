package redisqueue

import (
	"context"
	"time"

	"github.com/go-workqueue/workqueue"
)

// Add queues item unless it is already queued; if it is being processed,
// anywhere, it is queued again after its Done. After ShutDown it does
// nothing. It retries while Redis is unreachable (see Queue); an item that
// cannot be encoded or is too large is logged and dropped.
func (q *Queue[T]) Add(item T) {
	q.addRetrying("Add", item, func(ctx context.Context, key string) error {
		return q.addKey(ctx, key, 0)
	})
}

// AddContext is Add without retries: it returns Redis's error, the codec's,
// ErrKeyTooLarge, or workqueue.ErrShutDown after ShutDown.
func (q *Queue[T]) AddContext(ctx context.Context, item T) error {
	return q.AddAfterContext(ctx, item, 0)
}

// AddAfter adds item once duration has passed; zero or less adds it at
// once. If item is already waiting, the earlier ready time wins. A due
// item is moved to the queue by whichever handle looks first, once. It
// retries as Add does.
func (q *Queue[T]) AddAfter(item T, duration time.Duration) {
	q.addRetrying("AddAfter", item, func(ctx context.Context, key string) error {
		return q.addKey(ctx, key, duration)
	})
}

// AddAfterContext is AddAfter without retries, with AddContext's errors.
func (q *Queue[T]) AddAfterContext(ctx context.Context, item T, duration time.Duration) error {
	if q.ShuttingDown() {
		return workqueue.ErrShutDown
	}
	key, err := q.encode(item)
	if err != nil {
		return err
	}
	return q.addKey(ctx, key, duration)
}

// AddRateLimited counts a failure of item in Redis and adds it after the
// larger of its backoff and the shared bucket's wait (see RateLimit). After
// ShutDown it does nothing and counts nothing. It retries as Add does.
func (q *Queue[T]) AddRateLimited(item T) {
	q.addRetrying("AddRateLimited", item, q.addRateLimited)
}

// AddRateLimitedContext is AddRateLimited without retries, with
// AddContext's errors.
func (q *Queue[T]) AddRateLimitedContext(ctx context.Context, item T) error {
	if q.ShuttingDown() {
		return workqueue.ErrShutDown
	}
	key, err := q.encode(item)
	if err != nil {
		return err
	}
	return q.addRateLimited(ctx, key)
}

func (q *Queue[T]) addRetrying(op string, item T, add func(ctx context.Context, key string) error) {
	if q.ShuttingDown() {
		return
	}
	key, err := q.encode(item)
	if err != nil {
		q.logger.Error("workqueue: item dropped", "op", op, "err", err)
		return
	}
	err = q.retry(op, q.stopCh, func(ctx context.Context) error { return add(ctx, key) })
	if err != nil {
		q.logger.Error("workqueue: item dropped", "op", op, "key", key, "err", err)
	}
}

func (q *Queue[T]) addKey(ctx context.Context, key string, delay time.Duration) error {
	res, err := addScript.Run(ctx, q.client, q.keys.all, q.now(), key, delay.Milliseconds()).Int64Slice()
	if err != nil {
		return err
	}
	q.metrics.added(res[0], res[1])
	return nil
}

func (q *Queue[T]) addRateLimited(ctx context.Context, key string) error {
	args := append([]any{q.now(), key}, q.limit...)
	res, err := rateLimitedScript.Run(ctx, q.client, q.keys.all, args...).Int64Slice()
	if err != nil {
		return err
	}
	q.metrics.retries.Inc()
	q.metrics.added(res[0], res[1])
	return nil
}
