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

// scriptHook runs a function once, just before the next run of script
// (after it, if after is set), to put a Done and an extension in the
// order a worker finishing at the wrong moment does.
type scriptHook struct {
	mu     sync.Mutex
	script *redis.Script
	after  bool
	fn     func()
}

func (h *scriptHook) DialHook(redis.DialHook) redis.DialHook { return nil }
func (h *scriptHook) ProcessPipelineHook(redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return nil
}

func (h *scriptHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		args := cmd.Args()
		var fn func()
		h.mu.Lock()
		if len(args) > 1 && args[0] == "evalsha" && h.script != nil && args[1] == h.script.Hash() {
			fn = h.fn
			h.fn, h.script = nil, nil
		}
		after := h.after
		h.mu.Unlock()
		if fn == nil {
			return next(ctx, cmd)
		}
		if !after {
			fn()
			return next(ctx, cmd)
		}
		err := next(ctx, cmd)
		fn()
		return err
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
	hook := &scriptHook{}
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
	hook.script, hook.after = extendScript, false
	hook.fn = func() { require.NoError(t, q.DoneContext(context.Background(), a)) }
	hook.mu.Unlock()
	q.extendLeases()
	// The lease still held was extended and is not marked lost.
	require.NoError(t, q.DoneContext(context.Background(), b))
	require.NotContains(t, logs.String(), "leases lost", "Done before the extension")

	// The same with the extension between the done script and the end of
	// DoneContext, which still holds the item until the reply is read.
	q.Add("c")
	c, _ := q.Get()
	hook.mu.Lock()
	hook.script, hook.after = doneScript, true
	hook.fn = q.extendLeases
	hook.mu.Unlock()
	require.NoError(t, q.DoneContext(context.Background(), c))
	require.NotContains(t, logs.String(), "leases lost", "extension during Done")
}
