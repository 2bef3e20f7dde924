package redisqueue

import (
	"context"
	"errors"
	"io"
	"net"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// retry runs op until it succeeds, fails for another reason than an
// outage, or cancel is closed, waiting with a capped exponential backoff
// between tries. It logs the first failure and every twentieth.
func (q *Queue[T]) retry(op string, cancel <-chan struct{}, f func(ctx context.Context) error) error {
	_, err := retryValue(q, op, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, f(ctx)
	}, cancel)
	return err
}

func retryValue[T comparable, V any](q *Queue[T], op string, f func(ctx context.Context) (V, error), cancel ...<-chan struct{}) (V, error) {
	var stop <-chan struct{}
	if len(cancel) > 0 {
		stop = cancel[0]
	}
	for attempt := 0; ; attempt++ {
		v, err := f(context.Background())
		if err == nil || !isOutage(err) {
			if attempt > 0 && err == nil {
				q.logger.Info("workqueue: Redis reachable again", "op", op, "attempts", attempt+1)
			}
			return v, err
		}
		if attempt%20 == 0 {
			q.logger.Warn("workqueue: Redis unreachable, retrying", "op", op, "attempt", attempt+1, "err", err)
		}
		if !q.sleepBackoff(attempt, stop) {
			return v, err
		}
	}
}

// sleepBackoff waits before retry number attempt+1: 10ms doubling up to
// 1s on the handle's clock, as every other wait of the handle. It returns
// false if stop was closed first.
func (q *Queue[T]) sleepBackoff(attempt int, stop <-chan struct{}) bool {
	// A cluster client keeps sending a slot's commands to the node it last
	// knew as the slot's primary: after a failover it may dial the dead
	// primary for a minute before it looks again. Each retry asks it to
	// reload the cluster's layout (it does so in the background, at most
	// every 200ms), so that the new primary is found within a backoff once
	// the cluster has promoted it.
	if cluster, ok := q.client.(*redis.ClusterClient); ok {
		cluster.ReloadState(context.Background())
	}
	t := q.clock.NewTimer(backoff(attempt))
	defer t.Stop()
	select {
	case <-t.C():
		return true
	case <-stop:
		return false
	}
}

// isOutage reports whether err may go away by itself: a network error or
// timeout, a connection refused, reset or closed by the server, a full
// connection pool, or a server that is loading, read-only, failing over,
// out of memory, unable to persist or out of connections, a slot moved to
// another node, a blocking command (WAIT) ended by the node's turning
// replica, or an add that too few replicas acknowledged in time.
// Errors of a call, of the arguments or of the codec, a closed client and
// an ended context are not.
func isOutage(err error) bool {
	var netErr net.Error
	switch {
	case errors.Is(err, redis.ErrClosed), errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return false
	case errors.Is(err, ErrNotReplicated), errors.As(err, &netErr), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE),
		errors.Is(err, redis.ErrPoolTimeout):
		return true
	}
	// MOVED and ASK reach a handle only from the pipelines it sends to
	// one node itself (WaitReplicas): the cluster client's layout was
	// stale, and a retry reloads it (see sleepBackoff).
	for _, prefix := range []string{"LOADING", "READONLY", "MASTERDOWN", "TRYAGAIN", "CLUSTERDOWN", "BUSY", "NOREPLICAS", "OOM", "MISCONF", "ERR max number of clients", "MOVED", "ASK", "UNBLOCKED"} {
		if redis.HasErrorPrefix(err, prefix) {
			return true
		}
	}
	return false
}

// backoff is the wait before retry number attempt+1: 10ms doubling up to
// 1s.
func backoff(attempt int) time.Duration {
	return min(10*time.Millisecond<<min(attempt, 7), time.Second)
}
