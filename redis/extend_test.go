package redisqueue

import (
	"bytes"
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/go-workqueue/workqueue/redis/redistest"
)

// beforeExtend runs a function once just before the next extend script is
// sent, to put a Done between extendLeases' snapshot of the leases held
// and the script, as a worker finishing at the wrong moment does.
type beforeExtend struct {
	mu sync.Mutex
	fn func()
}

func (h *beforeExtend) DialHook(redis.DialHook) redis.DialHook { return nil }
func (h *beforeExtend) ProcessPipelineHook(redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return nil
}

func (h *beforeExtend) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		args := cmd.Args()
		if len(args) > 1 && args[0] == "evalsha" && args[1] == extendScript.Hash() {
			h.mu.Lock()
			fn := h.fn
			h.fn = nil
			h.mu.Unlock()
			if fn != nil {
				fn()
			}
		}
		return next(ctx, cmd)
	}
}

// TestExtendAfterDone: a lease ended by Done between extendLeases' look at
// what is held and its script is not a lost lease. The script cannot tell
// (the token is gone either way), so extendLeases must not warn that the
// item was handed out again. Under load that warning came at nearly every
// extension tick, for items that were simply done.
func TestExtendAfterDone(t *testing.T) {
	s := redistest.Start(t, redistest.Options{})
	client := s.Client()
	hook := &beforeExtend{}
	client.AddHook(hook)
	var logs bytes.Buffer
	q := New[string](client, "extend", Options[string]{
		LeaseDuration: time.Hour, // no tick of its own during the test
		Logger:        slog.New(slog.NewTextHandler(&logs, nil)),
	})
	defer q.ShutDownWithDrain()
	q.Add("a")
	q.Add("b")
	a, _ := q.Get()
	b, _ := q.Get()
	hook.mu.Lock()
	hook.fn = func() { require.NoError(t, q.DoneContext(context.Background(), a)) }
	hook.mu.Unlock()
	q.extendLeases()
	// The lease still held was extended and is not marked lost.
	require.NoError(t, q.DoneContext(context.Background(), b))
	require.NotContains(t, logs.String(), "leases lost")
}
