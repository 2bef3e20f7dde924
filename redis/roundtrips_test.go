package redisqueue

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/go-workqueue/workqueue/redis/redistest"
)

// TestRoundTripsWithBacklog checks that a worker draining a backlog sends
// two round trips per key, its get and done scripts: the listener must
// not block on Redis for a Get that finds a key ready (it did, and took
// the token the get script leaves while keys remain: 3.6 round trips per
// key with one worker).
func TestRoundTripsWithBacklog(t *testing.T) {
	s := redistest.Start(t, redistest.Options{})
	const keys = 200
	producer := New[string](s.Client(), "rt", Options[string]{})
	defer producer.ShutDown()
	for i := range keys {
		require.NoError(t, producer.AddContext(context.Background(), fmt.Sprint(i)))
	}

	worker := s.Client()
	var sent atomic.Int64
	worker.AddHook(countingHook{&sent})
	q := New[string](worker, "rt", Options[string]{})
	defer q.ShutDown()
	for range keys {
		item, shutdown := q.Get()
		require.False(t, shutdown)
		q.Done(item)
	}
	// The first get and done scripts are loaded with EVAL after EVALSHA
	// fails, and the connection's handshake sends one pipeline of CLIENT
	// SETINFO.
	require.LessOrEqual(t, sent.Load(), int64(2*keys+2+1), "round trips for %d Get+Done", keys)
}

var _ redis.Hook = countingHook{}
