package redisqueue

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/go-workqueue/workqueue/redis/redistest"
)

// scriptHook runs fn once, just before the next call of function, if
// armed (after it, if after is set), to put a Done and an extension in the
// order a worker finishing at the wrong moment does.
type scriptHook struct {
	mu       sync.Mutex
	function op
	armed    bool
	after    bool
	fn       func()
}

func (h *scriptHook) DialHook(redis.DialHook) redis.DialHook { return nil }
func (h *scriptHook) ProcessPipelineHook(redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return nil
}

func (h *scriptHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		var fn func()
		h.mu.Lock()
		if h.armed && fcalls(cmd, h.function) {
			fn = h.fn
			h.fn, h.armed = nil, false
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
// item was handed out again: under load the race comes at nearly every
// extension tick, and the warning would drown the real ones.
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
	hook.function, hook.armed, hook.after = opExtend, true, false
	hook.fn = func() { require.NoError(t, q.DoneContext(context.Background(), a)) }
	hook.mu.Unlock()
	q.extendLeases().Wait()
	// The lease still held was extended and is not marked lost.
	require.NoError(t, q.DoneContext(context.Background(), b))
	require.NotContains(t, logs.String(), "leases lost", "Done before the extension")

	// The same with the extension between the done script and the end of
	// DoneContext, which still holds the item until the reply is read.
	q.Add("c")
	c, _ := q.Get()
	hook.mu.Lock()
	hook.function, hook.armed, hook.after = opDone, true, true
	hook.fn = func() { q.extendLeases().Wait() }
	hook.mu.Unlock()
	require.NoError(t, q.DoneContext(context.Background(), c))
	require.NotContains(t, logs.String(), "leases lost", "extension during Done")
}

// scriptKeyHook calls fn for each FCALL of function, with the call's
// first key, in place of sending it; fn sends it with next.
type scriptKeyHook struct {
	function op
	fn       func(ctx context.Context, cmd redis.Cmder, key string, next redis.ProcessHook) error
}

func (h scriptKeyHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h scriptKeyHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (h scriptKeyHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		args := cmd.Args()
		if len(args) < 4 || !fcalls(cmd, h.function) {
			return next(ctx, cmd)
		}
		key, _ := args[3].(string)
		return h.fn(ctx, cmd, key, next)
	}
}

// keysOfPartitions returns a key of each of n partitions.
func keysOfPartitions(n int) []string {
	keys := make([]string, n)
	for i, found := 0, 0; found < n; i++ {
		k := fmt.Sprint("k", i)
		if p := partitionOf(k, n); keys[p] == "" {
			keys[p] = k
			found++
		}
	}
	return keys
}

// TestExtendPartitionsIndependently is the regression test for a stalled
// partition delaying the extensions of the others: while partition 0's
// shard holds its extend script, partition 1's leases must go on being
// extended at every tick, so that the other handle reclaims partition 0's
// key once its lease runs out, but never partition 1's, which a worker
// still holds. A keeper that extends the partitions one after another
// makes partition 1 wait for partition 0's script, and partition 1's key
// is handed to a second worker.
func TestExtendPartitionsIndependently(t *testing.T) {
	s := redistest.Start(t, redistest.Options{})
	clk := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
	const lease = 3 * time.Second
	opts := Options[string]{Partitions: 2, Clock: clk, LeaseDuration: lease}
	clientA := s.Client()
	a := newTestQueue(t, clientA, opts)
	b := newHandle(t, s.Client(), queueNameOf(a), opts)
	// Partition 0's extend script is held until release is closed, as a
	// blackholed shard holds it for go-redis's ReadTimeout; partition 1's
	// report on ran.
	held, ran, release := make(chan struct{}, 1), make(chan struct{}, 1), make(chan struct{})
	clientA.AddHook(scriptKeyHook{opExtend, func(ctx context.Context, cmd redis.Cmder, key string, next redis.ProcessHook) error {
		switch key {
		case a.parts[0].keys.fcall[0]:
			held <- struct{}{}
			<-release
		case a.parts[1].keys.fcall[0]:
			defer func() { ran <- struct{}{} }()
		}
		return next(ctx, cmd)
	}})
	released := false
	releaseHook := func() {
		if !released {
			released = true
			close(release)
		}
	}
	t.Cleanup(releaseHook)
	keys := keysOfPartitions(2)
	for _, k := range keys {
		a.Add(k)
	}
	require.ElementsMatch(t, keys, []string{getNow(t, a), getNow(t, a)})

	receive := func(ch chan struct{}, what string) {
		t.Helper()
		select {
		case <-ch:
		case <-time.After(5 * time.Second):
			require.FailNow(t, "timed out waiting: "+what)
		}
	}
	// Both handles' keepers tick on clk; a's must be ticking before the
	// first step, or the step passes it by.
	require.Eventually(t, func() bool { return clk.Waiters() == 2 }, 5*time.Second, time.Millisecond, "the keepers' tickers")
	for tick := 1; tick <= 3; tick++ {
		clk.Step(lease / 3)
		if tick == 1 {
			receive(held, "partition 0's extension stalls")
		}
		receive(ran, fmt.Sprintf("partition 1's extension at tick %d while partition 0's stalls", tick))
	}
	clk.Step(time.Millisecond) // partition 0's lease ran out, partition 1's to 6s

	require.Equal(t, keys[0], getNow(t, b), "partition 0's key, whose lease ran out")
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	item, err := b.GetContext(ctx)
	require.ErrorIs(t, err, context.DeadlineExceeded, "b got %q, which a still holds", item)

	releaseHook()
	b.Done(keys[0])
	a.Done(keys[0])
	a.Done(keys[1])
}

// TestExtendTimeout checks the deadline of an extension: until the first
// of its leases runs out, as a later reply is no use to it, but at least
// a tick, for leases that ran out on the handle's clock only.
func TestExtendTimeout(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	q := &Queue[string]{lease: 3 * time.Second, clock: clocktesting.NewFakeClock(now)}
	renewedAgo := func(ago ...time.Duration) []heldLease {
		leases := make([]heldLease, len(ago))
		for i, d := range ago {
			leases[i] = heldLease{fmt.Sprint(i), &holding{renewed: now.Add(-d)}}
		}
		return leases
	}
	tests := []struct {
		name   string
		leases []heldLease
		want   time.Duration
	}{
		{"just renewed", renewedAgo(0), 3 * time.Second},
		{"the first to run out", renewedAgo(0, 1500*time.Millisecond, time.Second), 1500 * time.Millisecond},
		{"nearly out: a tick", renewedAgo(2900 * time.Millisecond), time.Second},
		{"out on this clock: a tick", renewedAgo(time.Hour), time.Second},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, q.extendTimeout(tt.leases), tt.name)
	}
}
