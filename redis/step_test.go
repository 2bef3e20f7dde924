package redisqueue

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/go-workqueue/workqueue/redis/redistest"
)

// TestRunSteps runs Dones and Gets of one handle that wait at once, mixed
// in arrival order, and checks that each gets its own result: without
// WaitReplicas in one step call, the Dones first, so that a Get may be
// handed the key a Done queued again; with it, the Dones apart, whose
// error (too few replicas) is theirs alone.
func TestRunSteps(t *testing.T) {
	s := redistest.Start(t, redistest.Options{})
	tests := []struct {
		name  string
		opts  Options[string]
		steps int64 // step calls made
		// doneErr is the Dones' error; the Gets must have none.
		doneErr error
	}{
		{name: "one call", steps: 1},
		{name: "WaitReplicas, no replica", opts: Options[string]{WaitReplicas: 1, WaitTimeout: 10 * time.Millisecond}, doneErr: ErrNotReplicated},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			client := s.Client()
			loadLibrary(t, client)
			q := newTestQueue(t, client, tt.opts)
			for _, key := range []string{"a", "b", "c"} {
				require.NoError(t, ignoreNotReplicated(q.AddContext(ctx, key)))
			}
			held := map[string]string{} // key -> token
			for range 2 {
				item, err := q.GetContext(ctx)
				require.NoError(t, err)
				q.mu.Lock()
				held[item] = q.held[item].token
				q.mu.Unlock()
			}
			require.NoError(t, ignoreNotReplicated(q.AddContext(ctx, "a")), "a is marked to be queued again at its Done")
			steps := &scriptCounter{script: opStep}
			client.AddHook(steps)

			p := q.parts[0]
			calls := []stepCall{
				{nonce: newNonce()},
				{isDone: true, done: doneCall{"a", held["a"]}},
				{nonce: newNonce()},
				{isDone: true, done: doneCall{"b", held["b"]}},
				{isDone: true, done: doneCall{"b", held["b"]}},
			}
			results, err := q.runSteps(p, calls)
			require.NoError(t, err)
			require.Len(t, results, len(calls))
			assert.Equal(t, tt.steps, steps.n.Load(), "step calls")
			var got []string
			for i, c := range calls {
				r := results[i]
				if c.isDone {
					assert.ErrorIs(t, r.err, tt.doneErr, "call %d, a Done", i)
					continue
				}
				require.NoError(t, r.err, "call %d, a Get", i)
				require.True(t, r.grant.ok, "call %d, a Get: granted", i)
				got = append(got, r.grant.key)
			}
			assert.Equal(t, []string{"c", "a"}, got, "the Gets take c, then a, queued again by its Done")
			// The Dones ran past the handle: it forgets their leases, so
			// that its shutdown does not wait for them.
			for key := range held {
				q.mu.Lock()
				h := q.held[key]
				q.mu.Unlock()
				q.release(key, h)
			}
			if tt.doneErr == nil {
				assert.Equal(t, []int64{1, 0, -1}, []int64{results[1].outcome, results[3].outcome, results[4].outcome},
					"outcomes: a queued again, b idle, b's second Done finds the lease ended")
			}
		})
	}
}

// ignoreNotReplicated returns err but ErrNotReplicated: a server without
// replicas has the write all the same.
func ignoreNotReplicated(err error) error {
	if errors.Is(err, ErrNotReplicated) {
		return nil
	}
	return err
}
