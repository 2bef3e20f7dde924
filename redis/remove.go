package redisqueue

import (
	"context"
	"fmt"
)

// Remove takes item back, whichever handle added it, and reports whether
// it took anything: an item queued or waiting for its delay leaves the
// queue; an item being processed, by any handle, is not queued again at
// its Done. It also clears item's failure count and this handle's
// ParkBackoff count of it, as Forget does. It
// retries while Redis is unreachable, and logs a failure it gives up on
// and returns false.
func (q *Queue[T]) Remove(item T) bool {
	removed, err := retryValue(q, "Remove", func(ctx context.Context) (bool, error) {
		return q.RemoveContext(ctx, item)
	})
	if err != nil {
		q.logger.Error("workqueue: Remove failed", "item", fmt.Sprint(item), "err", err)
	}
	return removed
}

// RemoveContext is Remove without retries: it returns Redis's error, the
// codec's or ErrKeyTooLarge.
func (q *Queue[T]) RemoveContext(ctx context.Context, item T) (bool, error) {
	q.parkBackoff.Forget(item)
	key, err := q.encode(item)
	if err != nil {
		return false, err
	}
	p := q.part(key)
	removed, err := q.runCalls(ctx, p, opRemove, 1, []any{key, q.now()})
	if err != nil {
		return false, err
	}
	return removed[0] == 1, nil
}
