package redisqueue

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/go-workqueue/workqueue"
	"github.com/go-workqueue/workqueue/redis/redistest"
)

// TestRoundTripsWithBacklog checks that a worker draining a backlog sends
// two round trips per key, its get and done calls: the listener must
// not block on Redis for a Get that finds a key ready (it did, and took
// the token the get call leaves while keys remain: 3.6 round trips per
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
	// The library is loaded once (INFO and FUNCTION LOAD, after the first
	// FCALL is refused), the connection's handshake sends one pipeline of
	// CLIENT SETINFO, and the handle looks once at the queue's number of
	// partitions.
	require.LessOrEqual(t, sent.Load(), int64(2*keys+2+1+1), "round trips for %d Get+Done", keys)
}

// TestRoundTripsBatched checks that concurrent calls of one handle share
// scripts: adds from 16 goroutines, Gets and Dones of 16 workers, and
// AddBatch, one script for each 256 keys.
func TestRoundTripsBatched(t *testing.T) {
	s := redistest.Start(t, redistest.Options{})
	const keys, workers = 2000, 16
	client := s.Client()
	var sent atomic.Int64
	client.AddHook(countingHook{&sent})
	q := newTestQueue(t, client, Options[string]{})

	var wg sync.WaitGroup
	var next atomic.Int64
	for range workers {
		wg.Go(func() {
			for i := next.Add(1); i <= keys; i = next.Add(1) {
				require.NoError(t, q.AddContext(context.Background(), fmt.Sprint(i)))
			}
		})
	}
	wg.Wait()
	added := sent.Swap(0)
	next.Store(keys)

	for range workers {
		wg.Go(func() {
			for next.Add(-1) >= 0 { // one Get for each key
				item, err := q.GetContext(context.Background())
				require.NoError(t, err)
				require.NoError(t, q.DoneContext(context.Background(), item))
			}
		})
	}
	wg.Wait()
	drained := sent.Swap(0)
	require.Equal(t, 0, q.Len())

	items := make([]string, keys)
	for i := range items {
		items[i] = fmt.Sprint("batch", i)
	}
	scripts := &scriptCounter{script: opAdd}
	client.AddHook(scripts)
	require.NoError(t, q.AddBatchContext(context.Background(), items))
	batched := scripts.n.Load()

	t.Logf("round trips per key: %.3f per Add from %d goroutines, %.3f per Get+Done of %d workers, %.3f per key of AddBatch",
		float64(added)/keys, workers, float64(drained)/keys, workers, float64(batched)/keys)
	// Far from 1 and 2, with a margin for a loaded machine: a batch
	// forms while the one before runs.
	require.Less(t, float64(added)/keys, 0.5, "round trips per Add from %d goroutines", workers)
	require.Less(t, float64(drained)/keys, 1.0, "round trips per Get+Done of %d workers", workers)
	require.Equal(t, int64((keys+maxBatch-1)/maxBatch), batched, "add scripts of AddBatch of %d keys", keys)
	require.Equal(t, keys, q.Len())
	for range keys {
		require.NoError(t, q.DoneContext(context.Background(), getNow(t, q)))
	}
}

// TestRoundTripsPriorities checks that adds at priorities share scripts
// as plain adds do, with and without Fairness: AddWithOpts from 16
// goroutines, at three priorities, then GetWithPriority and Done of 16
// workers, stay below the bounds of TestRoundTripsBatched.
func TestRoundTripsPriorities(t *testing.T) {
	s := redistest.Start(t, redistest.Options{})
	tests := []struct {
		name string
		opts Options[string]
	}{
		{name: "priorities"},
		{name: "priorities with fairness", opts: Options[string]{Fairness: []func(string) string{func(item string) string { return item[len(item)-1:] }}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			const keys, workers = 2000, 16
			client := s.Client()
			var sent atomic.Int64
			client.AddHook(countingHook{&sent})
			q := newTestQueue(t, client, tt.opts)
			q.Len() // the look at the number of partitions, not counted
			sent.Store(0)

			var wg sync.WaitGroup
			var next atomic.Int64
			for range workers {
				wg.Go(func() {
					for i := next.Add(1); i <= keys; i = next.Add(1) {
						priority := int(i % 3)
						require.NoError(t, q.AddWithOptsContext(context.Background(), workqueue.AddOpts{Priority: &priority}, fmt.Sprint(i)))
					}
				})
			}
			wg.Wait()
			added := sent.Swap(0)
			next.Store(keys)
			for range workers {
				wg.Go(func() {
					for next.Add(-1) >= 0 {
						item, _, err := q.GetWithPriorityContext(context.Background())
						require.NoError(t, err)
						require.NoError(t, q.DoneContext(context.Background(), item))
					}
				})
			}
			wg.Wait()
			drained := sent.Swap(0)
			t.Logf("round trips per key: %.3f per AddWithOpts from %d goroutines, %.3f per GetWithPriority+Done of %d workers",
				float64(added)/keys, workers, float64(drained)/keys, workers)
			require.Less(t, float64(added)/keys, 0.5, "round trips per AddWithOpts from %d goroutines", workers)
			require.Less(t, float64(drained)/keys, 1.0, "round trips per GetWithPriority+Done of %d workers", workers)
			require.Equal(t, 0, q.Len())
		})
	}
}

// scriptCounter counts the calls of one function.
type scriptCounter struct {
	script op
	n      atomic.Int64
}

func (h *scriptCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *scriptCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if fcalls(cmd, h.script) {
			h.n.Add(1)
		}
		return next(ctx, cmd)
	}
}

func (h *scriptCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

var _ redis.Hook = countingHook{}
