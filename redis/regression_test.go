package redisqueue

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/go-workqueue/workqueue/redis/redistest"
)

// Each test in this file pins down one bug, named in its doc. The
// heartbeat is an hour wherever a wakeup is checked, so that only the
// signal list can deliver it.

// getWithin runs a Get on q in the background and returns a channel that
// gets its item, or "" if none came within d.
func getWithin(t *testing.T, q *Queue[string], d time.Duration) <-chan string {
	t.Helper()
	got := make(chan string, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		item, err := q.GetContext(ctx)
		if err != nil {
			got <- ""
			return
		}
		q.Done(item)
		got <- item
	}()
	return got
}

// waitWaiting waits until q has n Gets in progress.
func waitWaiting(t *testing.T, q *Queue[string], n int) {
	t.Helper()
	require.Eventually(t, func() bool {
		q.mu.Lock()
		defer q.mu.Unlock()
		return q.waiting == n
	}, 5*time.Second, time.Millisecond)
}

// waitBlockedPops waits until n of the server's clients are blocked in
// BLPOP, as listeners wait for wakeups.
func waitBlockedPops(t *testing.T, admin *redis.Client, n int) {
	t.Helper()
	require.Eventually(t, func() bool {
		clients, err := admin.ClientList(context.Background()).Result()
		if err != nil {
			return false
		}
		blocked := 0
		for line := range strings.SplitSeq(clients, "\n") {
			if strings.Contains(line, " flags=b ") && strings.Contains(line, " cmd=blpop ") {
				blocked++
			}
		}
		return blocked == n
	}, 5*time.Second, time.Millisecond, "%d clients blocked in BLPOP", n)
}

// TestDueTimeOutlivesTheGetThatKnewIt: an AddAfter wakes one Get, which
// learns when the key is due; if that Get leaves before then, another
// must learn it, or the key waits for a heartbeat.
func TestDueTimeOutlivesTheGetThatKnewIt(t *testing.T) {
	s := redistest.Start(t, redistest.Options{})
	client := s.Client()
	opts := Options[string]{Heartbeat: time.Hour}
	h1 := newTestQueue(t, client, opts)
	h2 := newHandle(t, client, queueNameOf(h1), opts)
	ctx1, cancel1 := context.WithCancel(context.Background())
	left := make(chan struct{})
	go func() {
		defer close(left)
		_, _ = h1.GetContext(ctx1)
	}()
	waitWaiting(t, h1, 1)
	got := getWithin(t, h2, 20*time.Second)
	waitWaiting(t, h2, 1)
	h1.AddAfter("k", 300*time.Millisecond)
	cancel1() // h1's Get, which may be the one that learned the due time, leaves
	<-left
	assert.Equal(t, "k", <-got)
}

// TestWakeupLeftWhenTheLastGetLeaves: the listener hands a wakeup to its
// handle just as the handle's only Get leaves; the wakeup must go on to
// the other handles. A hook ends the Get right after the listener's BLPOP
// returns the token.
func TestWakeupLeftWhenTheLastGetLeaves(t *testing.T) {
	s := redistest.Start(t, redistest.Options{})
	opts := Options[string]{Heartbeat: time.Hour}
	for range 5 {
		c1 := redis.NewClient(&redis.Options{Addr: s.Addr})
		ctx1, cancel1 := context.WithCancel(context.Background())
		h2 := newTestQueue(t, s.Client(), opts)
		c1.AddHook(afterPop{key: h2.parts[0].keys.signal, do: cancel1})
		h1 := newHandle(t, c1, queueNameOf(h2), opts)
		left := make(chan string)
		go func() {
			item, _ := h1.GetContext(ctx1)
			left <- item
		}()
		waitWaiting(t, h1, 1)
		// h1's listener blocks first, so that the server hands it the
		// add's wakeup rather than h2's.
		waitBlockedPops(t, s.Client(), 1)
		got := getWithin(t, h2, 20*time.Second)
		waitWaiting(t, h2, 1)
		waitBlockedPops(t, s.Client(), 2)
		h2.Add("k")
		var item string
		select {
		case item = <-left:
		case <-time.After(20 * time.Second):
			t.Fatal("h1's Get did not leave within 20s of the add")
		}
		if item != "" {
			h1.Done(item) // h1 took it before its context ended
			h2.Add("k2")
			assert.Equal(t, "k2", <-got)
		} else {
			assert.Equal(t, "k", <-got)
		}
		cancel1()
		h1.ShutDown()
		require.NoError(t, c1.Close())
	}
}

// afterPop runs do once a BLPOP returns from key.
type afterPop struct {
	key string
	do  func()
}

func (h afterPop) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h afterPop) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if pop, ok := cmd.(*redis.StringSliceCmd); ok && cmd.Name() == "blpop" && err == nil && pop.Val()[0] == h.key {
			h.do()
		}
		return err
	}
}

func (h afterPop) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestMoreDueKeysThanOnePromoteMoves: a promote moves at most 256 due
// keys; if all of them are being processed, nothing becomes ready, and the
// next due key must still count as due, not as "nothing delayed".
func TestMoreDueKeysThanOnePromoteMoves(t *testing.T) {
	s := redistest.Start(t, redistest.Options{})
	clk := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
	q := newTestQueue(t, s.Client(), Options[string]{Clock: clk, Heartbeat: time.Hour, LeaseDuration: time.Hour})
	var held []string
	for i := range 256 {
		q.Add(fmt.Sprintf("p%03d", i))
		held = append(held, getNow(t, q))
	}
	for _, k := range held {
		q.AddAfter(k, 10*time.Millisecond)
	}
	q.AddAfter("x", 20*time.Millisecond)
	clk.Step(30 * time.Millisecond)
	assert.Equal(t, "x", getNow(t, q))
	q.Done("x")
	for _, k := range held {
		q.Done(k)
	}
	for range held { // each was marked while processed
		q.Done(getNow(t, q))
	}
}

// TestRegrantToTheSameHandle: a handle that lost a key's lease and gets
// the key back while its first worker is still on it must not hand it to
// a second worker; the first worker's Done then ends the new lease, and
// the key is processed again.
func TestRegrantToTheSameHandle(t *testing.T) {
	s := redistest.Start(t, redistest.Options{})
	client := s.Client()
	ctx := context.Background()
	q := newTestQueue(t, client, Options[string]{Heartbeat: time.Hour})
	q.Add("k")
	require.Equal(t, "k", getNow(t, q)) // the first worker
	// Its lease expires, as after an outage longer than the lease.
	require.NoError(t, client.ZAdd(ctx, q.parts[0].keys.all[3], redis.Z{Score: 0, Member: "k"}).Err())
	assert.Equal(t, "", <-getWithin(t, q, 300*time.Millisecond), "k handed to a second worker of the same handle")
	require.NoError(t, q.DoneContext(ctx, "k"), "the first worker's Done ends the new lease")
	assert.Equal(t, "k", getNow(t, q), "processed again after the lost lease")
	q.Done("k")
}

// TestTransientServerErrors: errors that pass (out of memory, out of
// connections) are retried by Add and Get, not turned into a dropped item
// or a shutdown.
func TestTransientServerErrors(t *testing.T) {
	s := redistest.Start(t, redistest.Options{})
	admin := s.Client()
	ctx := context.Background()
	q := newTestQueue(t, s.Client(), Options[string]{})
	require.NoError(t, admin.ConfigSet(ctx, "maxmemory-policy", "noeviction").Err())
	require.NoError(t, admin.ConfigSet(ctx, "maxmemory", "1").Err())
	added := make(chan struct{})
	go func() {
		q.Add("a")
		close(added)
	}()
	require.Eventually(t, func() bool {
		info := admin.Info(ctx, "errorstats").Val()
		return strings.Contains(info, "errorstat_OOM")
	}, 5*time.Second, time.Millisecond, "the Add never met the out-of-memory error")
	require.NoError(t, admin.ConfigSet(ctx, "maxmemory", "0").Err())
	<-added
	assert.Equal(t, 1, q.Len())
	assert.Equal(t, "a", getNow(t, q))
	q.Done("a")
}

// TestIdleGetsDoNotWakeForLeases: idle Gets must not wake at every lease
// expiry time of keys other handles hold, which move on at every
// extension: with 20 idle Gets and a 2s lease held elsewhere, extended
// every 667ms, such Gets would each wake every 1.33s and send some 45
// commands in the 3s measured. The lease is that long so that a stalled
// holder does not lose it, which would hand the key to an idle Get.
func TestIdleGetsDoNotWakeForLeases(t *testing.T) {
	s := redistest.Start(t, redistest.Options{})
	counted := redis.NewClient(&redis.Options{Addr: s.Addr, PoolSize: 50})
	t.Cleanup(func() { _ = counted.Close() })
	var sent atomic.Int64
	counted.AddHook(countingHook{&sent})
	opts := Options[string]{LeaseDuration: 2 * time.Second, Heartbeat: time.Second}
	holder := newTestQueue(t, s.Client(), opts)
	idle := newHandle(t, counted, queueNameOf(holder), opts)
	holder.Add("busy")
	getNow(t, holder) // held, its lease extended every 667ms
	ctx, cancel := context.WithCancel(context.Background())
	var gets sync.WaitGroup
	for range 20 {
		gets.Go(func() {
			_, err := idle.GetContext(ctx)
			assert.ErrorIs(t, err, context.Canceled)
		})
	}
	waitWaiting(t, idle, 20)
	// Time passing is what is measured here, so sleeps are the point: one
	// heartbeat for each Get's first look, then three measured.
	time.Sleep(time.Second)
	before := sent.Load()
	time.Sleep(3 * time.Second)
	during := sent.Load() - before
	cancel()
	gets.Wait()
	t.Logf("20 idle Gets sent %d commands in 3 heartbeats", during)
	assert.LessOrEqual(t, during, int64(2*3+4))
	holder.Done("busy")
}

// TestGetContextDuringOutage: a GetContext whose context ends while Redis
// does not answer returns soon after, and a key its abandoned script
// leases afterwards is given back to the queue, not lost until its lease
// expires.
func TestGetContextDuringOutage(t *testing.T) {
	s := redistest.Start(t, redistest.Options{})
	admin := s.Client()
	ctx := context.Background()
	q := newTestQueue(t, s.Client(), Options[string]{Heartbeat: time.Hour})
	other := newHandle(t, s.Client(), queueNameOf(q), Options[string]{Heartbeat: time.Hour})
	q.Add("k")
	start := time.Now()
	require.NoError(t, admin.Do(ctx, "CLIENT", "PAUSE", "3000", "ALL").Err())
	shortCtx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	_, err := q.GetContext(shortCtx)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	// About 700ms (its deadline, then 400ms and 200ms): the bound leaves
	// room for a stalled machine, not for waiting out the pause.
	assert.Less(t, time.Since(start), 2500*time.Millisecond, "GetContext waited for the pause to end")
	// After the pause the abandoned script leases k; it comes back.
	assert.Equal(t, "k", <-getWithin(t, other, 20*time.Second))
}

// TestGetReplyLost: a get script whose reply is lost after it ran (a
// connection reset) is sent again with the same nonce and returns the same
// lease, instead of taking another and leaving the first to expire with
// nobody holding it.
func TestGetReplyLost(t *testing.T) {
	s := redistest.Start(t, redistest.Options{})
	client := s.Client()
	lost := new(atomic.Bool)
	client.AddHook(loseFirstGrant{done: lost})
	q := newTestQueue(t, client, Options[string]{Heartbeat: time.Hour})
	q.Add("k")
	got := make(chan string, 1)
	go func() {
		item, _ := q.Get() // retries the lost reply
		got <- item
	}()
	select {
	case item := <-got:
		assert.Equal(t, "k", item)
	case <-time.After(10 * time.Second):
		t.Fatal("the key whose grant reply was lost was not handed out")
	}
	assert.True(t, lost.Load(), "no grant's reply was lost")
	q.Done("k")
	ctx := context.Background()
	assert.Zero(t, client.ZCard(ctx, q.parts[0].keys.all[3]).Val(), "a lease left behind")
	assert.Zero(t, client.HLen(ctx, q.parts[0].keys.all[9]).Val(), "a grant left behind")
}

// loseFirstGrant turns the reply of the first get script that granted a
// lease into a connection error, after the script ran.
type loseFirstGrant struct{ done *atomic.Bool }

func (h loseFirstGrant) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h loseFirstGrant) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		c, ok := cmd.(*redis.Cmd)
		if !ok || err != nil || cmd.Name() != "fcall" {
			return err
		}
		// Only the get script answers with grants, arrays from the fourth
		// value on.
		res, _ := c.Slice()
		if len(res) < 4 {
			return err
		}
		if _, grant := res[3].([]any); grant && h.done.CompareAndSwap(false, true) {
			cmd.SetErr(io.ErrUnexpectedEOF)
			return io.ErrUnexpectedEOF
		}
		return err
	}
}

func (h loseFirstGrant) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestLostGetReplyRecovered: a get script that leased a key and lost its
// reply leaves its nonce to the next Get there, which gets that grant,
// instead of the key staying leased to no one until the lease (an hour
// here) expires. The Get that lost it left without sending it again: on
// a partitioned queue it found an item in another partition, and a
// GetContext returns the error.
func TestLostGetReplyRecovered(t *testing.T) {
	s := redistest.Start(t, redistest.Options{})
	tests := []struct {
		name       string
		partitions int
		// first is what the Get whose reply was lost returns: the index of
		// another partition's key, or -1 for the error.
		first int
		// abandoned: the script, and the cancel the GetContext sends when
		// its deadline passes, are held past the time it waits for Redis,
		// so that it returns without either.
		abandoned bool
	}{
		{name: "item from another partition", partitions: 2, first: 1},
		{name: "GetContext returns the error", partitions: 1, first: -1},
		{name: "GetContext abandoned the script", partitions: 1, first: -1, abandoned: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := s.Client()
			// Loaded, so that the hook sees the FCALL that runs, not one
			// that fails for want of the library.
			loadLibrary(t, client)
			q := newTestQueue(t, client, Options[string]{Partitions: tt.partitions, LeaseDuration: time.Hour, Heartbeat: time.Hour})
			// The first get script of partition 0 runs and loses its
			// reply, as one whose connection is cut after it ran does.
			var lost atomic.Bool
			release, ran := make(chan struct{}), make(chan struct{})
			if !tt.abandoned {
				close(release)
			}
			client.AddHook(scriptKeyHook{opGet, func(ctx context.Context, cmd redis.Cmder, key string, next redis.ProcessHook) error {
				if key != q.parts[0].keys.fcall[0] || !lost.CompareAndSwap(false, true) {
					return next(ctx, cmd)
				}
				<-release
				_ = next(ctx, cmd)
				close(ran)
				cmd.SetErr(io.ErrUnexpectedEOF)
				return io.ErrUnexpectedEOF
			}})
			client.AddHook(scriptKeyHook{opCancel, func(ctx context.Context, cmd redis.Cmder, _ string, next redis.ProcessHook) error {
				<-release
				return next(ctx, cmd)
			}})
			keys := keysOfPartitions(tt.partitions)
			for _, k := range keys {
				q.Add(k)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			item, err := q.GetContext(ctx)
			switch {
			case tt.abandoned:
				require.ErrorIs(t, err, context.DeadlineExceeded)
				close(release)
				// The abandoned script fails after the Get left. If it ran
				// before the cancel, it leased the key and its nonce is
				// left to the next Get once it fails; if after, the
				// cancel's mark made it lease nothing.
				<-ran
				require.Eventually(t, func() bool {
					q.parts[0].orphansMu.Lock()
					orphaned := len(q.parts[0].orphans) == 1
					q.parts[0].orphansMu.Unlock()
					leased, err := client.HExists(context.Background(), q.parts[0].keys.all[slices.Index(keyParts, "tokens")], keys[0]).Result()
					return orphaned || (err == nil && !leased)
				}, 5*time.Second, time.Millisecond)
			case tt.first < 0:
				require.ErrorIs(t, err, io.ErrUnexpectedEOF)
			default:
				require.NoError(t, err)
				require.Equal(t, keys[tt.first], item)
				q.Done(item)
			}
			require.Equal(t, keys[0], getNow(t, q), "the key whose grant was lost")
			q.Done(keys[0])
		})
	}
}

// TestGetContextCancelledWhileItsScriptRuns: a GetContext whose context
// ends while its get script is on its way settles with Redis which came
// first. If the cancel runs first, the script leases nothing and the key
// stays queued for others; if the script ran first, the Get returns the
// key it leased. Before, the Get returned the error either way and a key
// leased meanwhile was held by no one until it was given back: a key
// gone from the queue that no Get had returned.
func TestGetContextCancelledWhileItsScriptRuns(t *testing.T) {
	tests := []struct {
		name        string
		scriptFirst bool
		// lateScript: the get script's reply is lost before it runs, and
		// it runs after the Get returned (a command read by Redis late).
		lateScript bool
	}{
		{name: "cancel runs first", scriptFirst: false},
		{name: "get script runs first", scriptFirst: true},
		{name: "cancel runs first, the script's reply lost, it runs late", lateScript: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := redistest.Start(t, redistest.Options{})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			hook := &cancelRace{scriptFirst: tt.scriptFirst, lateScript: tt.lateScript, cancelGet: cancel, cancelRan: make(chan struct{}), late: make(chan redis.Cmder, 1)}
			client := s.Client()
			client.AddHook(hook)
			q := newTestQueue(t, client, Options[string]{Heartbeat: time.Hour})
			other := newHandle(t, s.Client(), queueNameOf(q), Options[string]{Heartbeat: time.Hour})
			q.Add("k")
			// Loaded, each function is one FCALL that the hook can order.
			loadLibrary(t, s.Client())
			hook.armed.Store(true)

			item, err := q.GetContext(ctx)
			grants := q.parts[0].keys.grants
			if tt.scriptFirst {
				require.NoError(t, err)
				assert.Equal(t, "k", item)
				n, err := s.Client().HLen(context.Background(), grants).Result()
				require.NoError(t, err)
				assert.EqualValues(t, 1, n, "the lease's grant alone")
				q.Done(item)
			} else {
				require.ErrorIs(t, err, context.Canceled)
				if tt.lateScript {
					// The late script finds the cancel's mark, which the
					// Get, its reply lost, left for it: it leases nothing.
					require.NoError(t, s.Client().Do(context.Background(), (<-hook.late).Args()...).Err())
				}
				assert.Equal(t, "k", <-getWithin(t, other, 10*time.Second), "the key stayed queued")
			}
			// Neither way leaves a cancel mark behind.
			assert.Eventually(t, func() bool {
				n, err := s.Client().HLen(context.Background(), grants).Result()
				return err == nil && n == 0
			}, 5*time.Second, time.Millisecond)
		})
	}
}

// cancelRace is a hook that, once armed, ends the Get's context while its
// get script is on its way, and lets that script run either before the
// cancel script (holding its reply until the cancel answered) or after,
// or, with lateScript, fails it unsent for the test to run later.
type cancelRace struct {
	armed       atomic.Bool
	scriptFirst bool
	lateScript  bool
	cancelGet   context.CancelFunc
	cancelRan   chan struct{}
	late        chan redis.Cmder // the get script held back, with lateScript
}

func (h *cancelRace) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *cancelRace) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		switch {
		case runsScript(cmd, opCancel):
			defer close(h.cancelRan)
			return next(ctx, cmd)
		case runsScript(cmd, opGet) && h.armed.CompareAndSwap(true, false):
			if h.scriptFirst {
				err := next(ctx, cmd)
				h.cancelGet()
				<-h.cancelRan
				return err
			}
			h.cancelGet()
			<-h.cancelRan
			if h.lateScript {
				h.late <- cmd
				cmd.SetErr(io.ErrUnexpectedEOF)
				return io.ErrUnexpectedEOF
			}
			return next(ctx, cmd)
		}
		return next(ctx, cmd)
	}
}

func (h *cancelRace) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// runsScript reports whether cmd calls function o.
func runsScript(cmd redis.Cmder, o op) bool {
	return fcalls(cmd, o)
}
