package redisqueue

import (
	"context"
	"errors"

	"github.com/redis/go-redis/v9"
)

// listen blocks on partition p's signal list while a Get of this handle
// waits, and wakes one of them for each token: the calls leave one when
// a key becomes ready and none waits, and the woken Get passes it on if
// more are ready. A token taken when no Get waits any more is put back for
// the other handles. Each Heartbeat without a token wakes a Get to look
// for expired leases. It stops at ShutDown. (A cluster cannot block on
// keys of several slots at once: each partition has its listener.)
func (q *Queue[T]) listen(p *partition) {
	wakeKey := p.keys.wakeKey(q.handle)
	ctx := context.Background()
	for attempt := 0; ; {
		q.mu.Lock()
		sleeping, stopping := q.sleeping, q.shuttingDown
		q.mu.Unlock()
		if stopping {
			return
		}
		if sleeping == 0 {
			select {
			case <-p.hasWaiter:
			case <-q.stopCh:
				return
			}
			continue
		}
		popped, err := q.client.BLPop(ctx, q.heartbeat, p.keys.signal, wakeKey).Result()
		switch {
		case errors.Is(err, redis.Nil):
			// A heartbeat: a Get looks at this partition for expired
			// leases and due keys.
			q.mu.Lock()
			q.beat[p.index] = true
			q.wakeOne()
			q.mu.Unlock()
		case err != nil:
			if errors.Is(err, redis.ErrClosed) {
				q.logger.Error("workqueue: the Redis client was closed; Gets can only time out or shut down", "err", err)
				<-q.stopCh
				return
			}
			if attempt%20 == 0 {
				q.logger.Warn("workqueue: Redis unreachable, retrying", "op", "wait", "attempt", attempt+1, "err", err)
			}
			q.sleepBackoff(attempt, q.stopCh)
			attempt++
			continue
		case popped[0] == wakeKey:
		default:
			// Under q.mu, so that the last Get to leave sees this wakeup
			// in q.wake and passes it on.
			q.mu.Lock()
			handed := q.sleeping > 0 && !q.shuttingDown
			if handed {
				q.woke[p.index] = true
				q.wakeOne()
			}
			q.mu.Unlock()
			if !handed {
				q.passOn(p)
			}
		}
		attempt = 0
	}
}

func (q *Queue[T]) wakeOne() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}
