package redisqueue

import (
	"context"
	"fmt"
	"hash/crc32"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/go-workqueue/workqueue/redis/redistest"
)

// queueKeysOf returns the keys of the unpartitioned queue called name, or
// of partition 0 of a partitioned one.
func queueKeysOf(name string) queueKeys {
	return partitionKeys(name, 1)[0]
}

// partitionKeys returns the keys of each of the n partitions of the queue
// called name.
func partitionKeys(name string, n int) []queueKeys {
	var keys []queueKeys
	for _, prefix := range partitionPrefixes(name, n) {
		keys = append(keys, newQueueKeys(prefix))
	}
	return keys
}

// TestClusterSlot checks clusterSlot against slots Redis Cluster's
// specification and redis-cli give.
func TestClusterSlot(t *testing.T) {
	tests := []struct {
		tag  string
		slot int
	}{
		{"123456789", 0x31C3 % clusterSlots}, // CRC-16/XMODEM's check value
		{"foo", 12182},
		{"bar", 5061},
		{"", 0},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.slot, clusterSlot(tt.tag), "slot of %q", tt.tag)
	}
}

// TestPartitionPrefixes checks the partitions' key prefixes: partition 0
// keeps the unpartitioned queue's, the others have their own hash tags,
// spread evenly round the slots, and no two queues' prefixes coincide.
func TestPartitionPrefixes(t *testing.T) {
	assert.Equal(t, []string{"wq:{q}:"}, partitionPrefixes("q", 1))
	seen := map[string]string{}
	for _, name := range []string{"q", "q:1", "q:1:2", "orders", "a", "1"} {
		sizes := []int{1, 2, 3, 7}
		if name == "q" {
			sizes = append(sizes, maxPartitions) // slow under the race detector
		}
		for _, n := range sizes {
			prefixes := partitionPrefixes(name, n)
			require.Len(t, prefixes, n)
			assert.Equal(t, "wq:{"+name+"}:", prefixes[0], "partition 0 of %q", name)
			first := clusterSlot(name)
			for i, prefix := range prefixes {
				if other, ok := seen[prefix]; ok && other != fmt.Sprint(name, "/", i) {
					t.Errorf("prefix %q of %s/%d is also %s's", prefix, name, i, other)
				}
				seen[prefix] = fmt.Sprint(name, "/", i)
				tag := prefix[strings.Index(prefix, "{")+1 : strings.Index(prefix, "}")]
				want := (first + i*clusterSlots/n) % clusterSlots
				assert.LessOrEqual(t, slotDistance(clusterSlot(tag), want), 1, "slot of partition %d of %d of %q", i, n, name)
			}
		}
	}
}

// TestPartitionOf checks that a key's partition is CRC-32 (IEEE) modulo
// the number of partitions, and that keys spread over all of them.
func TestPartitionOf(t *testing.T) {
	tests := []struct {
		key  string
		n    int
		want int
	}{
		{"anything", 1, 0},
		{"a", 3, int(crc32.ChecksumIEEE([]byte("a")) % 3)},
		{"default/web", 7, int(crc32.ChecksumIEEE([]byte("default/web")) % 7)},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, partitionOf(tt.key, tt.n), "partition of %q among %d", tt.key, tt.n)
	}
	counts := make([]int, 3)
	for i := range 3000 {
		counts[partitionOf(fmt.Sprint("key", i), 3)]++
	}
	for i, c := range counts {
		assert.InDelta(t, 1000, c, 150, "keys in partition %d", i)
	}
}

// TestPartitionsChanged checks that a handle whose number of partitions
// differs from the queue's is refused with ErrPartitionsChanged by every
// call, whichever came first, a queue with keys but no recorded number
// counting as one, and that handles with the same number work together.
func TestPartitionsChanged(t *testing.T) {
	s := redistest.Start(t, redistest.Options{})
	client := s.Client()
	tests := []struct {
		name         string
		first, later int
		unrecorded   bool // the queue holds keys but no recorded number
		wantErr      error
	}{
		{name: "1 then 3", first: 1, later: 3, wantErr: ErrPartitionsChanged},
		{name: "3 then 1", first: 3, later: 1, wantErr: ErrPartitionsChanged},
		{name: "3 then 2", first: 3, later: 2, wantErr: ErrPartitionsChanged},
		{name: "0 then 1, the same", first: 0, later: 1},
		{name: "3 then 3", first: 3, later: 3},
		{name: "no recorded number, then 3", first: 1, later: 3, unrecorded: true, wantErr: ErrPartitionsChanged},
		{name: "no recorded number, then 1", first: 1, later: 1, unrecorded: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			first := newTestQueue(t, client, Options[string]{Partitions: tt.first})
			require.NoError(t, first.AddContext(ctx, "a"))
			if tt.unrecorded {
				require.NoError(t, client.Del(ctx, queueKeysOf(first.name).prefix+"partitions").Err())
			}
			later := newHandle(t, client, first.name, Options[string]{Partitions: tt.later})
			calls := []struct {
				name string
				call func() error
			}{
				{"AddContext", func() error { return later.AddContext(ctx, "b") }},
				{"AddBatchContext", func() error { return later.AddBatchContext(ctx, []string{"b"}) }},
				{"AddRateLimitedContext", func() error { return later.AddRateLimitedContext(ctx, "b") }},
				{"LenContext", func() error { _, err := later.LenContext(ctx); return err }},
				{"NumRequeuesContext", func() error { _, err := later.NumRequeuesContext(ctx, "b"); return err }},
				{"ForgetContext", func() error { return later.ForgetContext(ctx, "b") }},
				{"SnapshotContext", func() error { _, err := later.SnapshotContext(ctx, 10); return err }},
			}
			for _, c := range calls {
				if tt.wantErr == nil {
					assert.NoError(t, c.call(), c.name)
					continue
				}
				err := c.call()
				assert.ErrorIs(t, err, tt.wantErr, c.name)
				assert.ErrorContains(t, err, fmt.Sprintf("has %d, this handle %d", max(tt.first, 1), tt.later), c.name)
			}
			if tt.wantErr != nil {
				_, err := later.GetContext(ctx)
				assert.ErrorIs(t, err, tt.wantErr, "GetContext")
				_, shutdown := later.Get()
				assert.True(t, shutdown, "Get of a refused handle ends")
				assert.Equal(t, 1, first.Len(), "only the first handle's add")
			} else {
				a, b := getNow(t, later), getNow(t, first)
				later.Done(a)
				first.Done(b)
				assert.ElementsMatch(t, []string{"a", "b"}, []string{a, b})
			}
		})
	}
}

// TestPartitionsCheckReplicated: with WaitReplicas, the script that
// records the queue's number of partitions is followed by a WAIT, as the
// adds are, so that a failover cannot lose the number while handles use
// the queue. Until the replicas have it, calls go on (the number stands
// on the primary) and each checks again.
func TestPartitionsCheckReplicated(t *testing.T) {
	s := redistest.Start(t, redistest.Options{})
	ctx := context.Background()
	for _, partitions := range []int{1, 3} {
		t.Run(fmt.Sprint(partitions), func(t *testing.T) {
			client := s.Client()
			// Loaded, so that no pipeline is sent again for want of the
			// library.
			loadLibrary(t, client)
			var mu sync.Mutex
			waited := 0 // partitions scripts followed by a WAIT
			client.AddHook(pipelineHook(func(cmds []redis.Cmder) {
				for i := 1; i < len(cmds); i++ {
					prev, cur := cmds[i-1].Args(), cmds[i].Args()
					if len(prev) > 1 && prev[0] == "fcall" && prev[1] == queueLibrary.fns[opPartitions] && cur[0] == "WAIT" {
						mu.Lock()
						waited++
						mu.Unlock()
					}
				}
			}))
			q := newTestQueue(t, client, Options[string]{Partitions: partitions, WaitReplicas: 1, WaitTimeout: 10 * time.Millisecond})
			for range 2 {
				n, err := q.LenContext(ctx)
				require.NoError(t, err, "the number stands on the primary")
				require.Zero(t, n)
			}
			mu.Lock()
			defer mu.Unlock()
			require.Equal(t, 2, waited, "a WAIT after each check, none replicated")
		})
	}
}

// pipelineHook calls fn with the commands of each pipeline before sending
// it.
type pipelineHook func(cmds []redis.Cmder)

func (h pipelineHook) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (h pipelineHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (h pipelineHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h(cmds)
		return next(ctx, cmds)
	}
}

// TestPartitionedQueue checks a queue of 3 partitions one call at a
// time: AddBatch adds each partition's keys with one script of its own,
// Gets take from every partition in turn, Len sums the partitions, a
// Snapshot merges them, and the rate limiter's bucket is shared out.
func TestPartitionedQueue(t *testing.T) {
	s := redistest.Start(t, redistest.Options{})
	client := s.Client()
	clk := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
	scripts := &scriptCounter{script: opAdd}
	client.AddHook(scripts)
	opts := Options[string]{Partitions: 3, Clock: clk, LeaseDuration: time.Hour, RateLimit: &RateLimit{Base: 10 * time.Millisecond, Max: time.Minute, QPS: 3, Burst: 4}}
	q := newTestQueue(t, client, opts)
	viewer := newHandle(t, client, q.name, opts)
	ctx := context.Background()

	keys := make([]string, 30)
	for i := range keys {
		keys[i] = fmt.Sprint("k", i)
	}
	require.NoError(t, q.AddBatchContext(ctx, keys))
	assert.Equal(t, int64(3), scripts.n.Load(), "add scripts of AddBatch: one per partition")
	assert.Equal(t, 30, viewer.Len())
	perPartition := make([]int, 3)
	for _, p := range partitionKeys(q.name, 3) {
		n, err := client.LLen(ctx, p.ready).Result()
		require.NoError(t, err)
		perPartition[slices.IndexFunc(partitionKeys(q.name, 3), func(k queueKeys) bool { return k.ready == p.ready })] = int(n)
	}
	for i, n := range perPartition {
		assert.Positive(t, n, "keys in partition %d", i)
	}

	// Gets take from the partitions in turn: the first three come from
	// three partitions, and each partition's in its order.
	var got []string
	for range 3 {
		got = append(got, getNow(t, q))
	}
	parts := map[int]bool{}
	for _, key := range got {
		parts[partitionOf(key, 3)] = true
		assert.Equal(t, firstOfPartition(keys, partitionOf(key, 3)), key, "the first of its partition")
	}
	assert.Len(t, parts, 3, "partitions of the first three Gets: %v", got)
	clk.Step(time.Minute)
	q.Add(got[0]) // marked

	snap, err := viewer.SnapshotContext(ctx, 100)
	require.NoError(t, err)
	assert.Equal(t, 27, snap.Depth)
	assert.Len(t, snap.Queued, 27)
	assert.ElementsMatch(t, slices.DeleteFunc(slices.Clone(keys), func(k string) bool { return slices.Contains(got, k) }), snap.Queued)
	assert.Equal(t, 3, snap.Processing)
	require.Len(t, snap.InFlight, 3)
	for _, f := range snap.InFlight {
		assert.Equal(t, f.Item == got[0], f.Requeue, "%s marked", f.Item)
	}
	assert.Equal(t, uint64(31), snap.Adds)
	limited, err := viewer.SnapshotContext(ctx, 2)
	require.NoError(t, err)
	assert.Len(t, limited.Queued, 2)
	assert.Len(t, limited.InFlight, 2)
	assert.Equal(t, 27, limited.Depth)
	for _, key := range got {
		q.Done(key)
	}
	assert.Equal(t, 28, viewer.Len(), "the marked key queued again")
	for range 28 {
		q.Done(getNow(t, q))
	}

	// Burst 4 over 3 partitions: a bucket of 2 in each (4/3 rounded up),
	// refilled at 1 qps. Three rate-limited adds in one partition: two
	// pass with the per-key backoff (10ms), the third waits for a token
	// (1s), where one bucket of 4 would have let it pass.
	var same []string
	for i := 0; len(same) < 3; i++ {
		if key := fmt.Sprint("r", i); partitionOf(key, 3) == 0 {
			same = append(same, key)
		}
	}
	for _, key := range same {
		q.AddRateLimited(key)
	}
	snap, err = viewer.SnapshotContext(ctx, 10)
	require.NoError(t, err)
	require.Len(t, snap.Delayed, 3)
	now := clk.Now()
	assert.Equal(t, now.Add(10*time.Millisecond), snap.Delayed[0].ReadyAt)
	assert.Equal(t, now.Add(10*time.Millisecond), snap.Delayed[1].ReadyAt)
	assert.Equal(t, now.Add(time.Second), snap.Delayed[2].ReadyAt, "the third token comes after 1s at 1 qps")
	assert.Equal(t, map[string]int{same[0]: 1, same[1]: 1, same[2]: 1}, snap.Failures)
	clk.Step(time.Second)
	for range 3 {
		q.Done(getNow(t, q))
	}
}

func firstOfPartition(keys []string, part int) string {
	for _, key := range keys {
		if partitionOf(key, 3) == part {
			return key
		}
	}
	return ""
}

// TestPartitionRetry checks when Gets look at a partition whose get
// scripts failed: not before its backoff has passed, then one Get at a
// time, and every Get again once one answered.
func TestPartitionRetry(t *testing.T) {
	start := time.Unix(1_000_000, 0)
	p := &partition{}
	until, look, probe := p.retryIn(start)
	assert.True(t, look, "a partition that answered")
	assert.False(t, probe, "a partition that answered")
	assert.Zero(t, until)

	p.failedAt.Store(start.UnixNano())
	p.failures.Store(2) // backoff(1): 20ms
	tests := []struct {
		name      string
		at        time.Duration // after the failure
		wantLook  bool
		wantUntil time.Duration
	}{
		{"during the backoff", 5 * time.Millisecond, false, 15 * time.Millisecond},
		{"after it: this Get looks", 20 * time.Millisecond, true, 0},
		{"while another Get looks", 25 * time.Millisecond, false, 20 * time.Millisecond},
	}
	for _, tt := range tests {
		until, look, probe := p.retryIn(start.Add(tt.at))
		assert.Equal(t, tt.wantLook, look, tt.name)
		assert.Equal(t, tt.wantLook, probe, tt.name)
		assert.Equal(t, tt.wantUntil, until, tt.name)
	}
	p.probing.Store(false)
	p.answered()
	until, look, _ = p.retryIn(start.Add(30 * time.Millisecond))
	assert.True(t, look, "once a Get's script answered")
	assert.Zero(t, until)
}

// TestPartitionFailedOncePerScript: Gets that share a get script that
// fails count one failure of their partition, not one each, so that one
// blip with many Gets waiting does not jump the partition's backoff. The
// first script is held until the others wait for the next, which then
// serves them all.
func TestPartitionFailedOncePerScript(t *testing.T) {
	s := redistest.Start(t, redistest.Options{})
	tests := []struct {
		name         string
		behind       int // Gets waiting for the next script while the first runs
		wantFailures int64
		wantBackoff  time.Duration
	}{
		{name: "one Get, one script", behind: 0, wantFailures: 1, wantBackoff: backoff(0)},
		{name: "one Get behind, two scripts", behind: 1, wantFailures: 2, wantBackoff: backoff(1)},
		{name: "five Gets behind, two scripts", behind: 5, wantFailures: 2, wantBackoff: backoff(1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := s.Client()
			release := make(chan struct{})
			var q *Queue[string]
			client.AddHook(scriptKeyHook{opGet, func(ctx context.Context, cmd redis.Cmder, key string, next redis.ProcessHook) error {
				if key != q.parts[0].keys.fcall[0] {
					return next(ctx, cmd)
				}
				<-release
				cmd.SetErr(io.ErrUnexpectedEOF)
				return io.ErrUnexpectedEOF
			}})
			q = newTestQueue(t, client, Options[string]{Partitions: 2, LeaseDuration: time.Hour, Heartbeat: time.Hour})
			p := q.parts[0]
			// Each a Get's look at partition 0 alone.
			look := func() error {
				_, _, err := q.takeRound(context.Background(), make([]string, 2), make([]bool, 2), make([]time.Time, 2), 0)
				return err
			}
			errs := make(chan error, 1+tt.behind)
			go func() { errs <- look() }()
			require.Eventually(t, func() bool {
				p.steps.mu.Lock()
				defer p.steps.mu.Unlock()
				return p.steps.running
			}, 5*time.Second, time.Millisecond, "the first script runs")
			for range tt.behind {
				go func() { errs <- look() }()
			}
			require.Eventually(t, func() bool {
				p.steps.mu.Lock()
				defer p.steps.mu.Unlock()
				return len(p.steps.waiting) == tt.behind
			}, 5*time.Second, time.Millisecond, "the Gets behind wait for the next script")
			close(release)
			for range 1 + tt.behind {
				require.ErrorIs(t, <-errs, io.ErrUnexpectedEOF)
			}
			require.Equal(t, tt.wantFailures, p.failures.Load(), "failures counted")
			require.Equal(t, tt.wantBackoff, p.backoffFor())
		})
	}
}

// TestUntilDue checks how long a Get waits for the times it is due to
// look at partitions again.
func TestUntilDue(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	var none time.Time
	tests := []struct {
		name string
		due  []time.Time
		want time.Duration
	}{
		{"none", []time.Time{none, none}, -1},
		{"the soonest", []time.Time{now.Add(time.Second), none, now.Add(time.Millisecond)}, time.Millisecond},
		{"one has come", []time.Time{now.Add(time.Second), now}, 0},
		{"one is past", []time.Time{now.Add(-time.Second), now.Add(time.Second)}, 0},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, untilDue(tt.due, now), tt.name)
	}
}

// TestRoundOrder checks the order in which a Get looks at the
// partitions: the cursor's first, then those last seen holding keys, then
// the rest; and that the cursor moves on only with a script of its own
// partition.
func TestRoundOrder(t *testing.T) {
	s := redistest.Start(t, redistest.Options{})
	q := newTestQueue(t, s.Client(), Options[string]{Partitions: 4})
	tests := []struct {
		name   string
		cursor uint64
		depths []int64
		want   []int
	}{
		{"all empty", 0, []int64{0, 0, 0, 0}, []int{0, 1, 2, 3}},
		{"from the cursor", 2, []int64{0, 0, 0, 0}, []int{2, 3, 0, 1}},
		{"those holding keys first", 1, []int64{5, 0, 0, 3}, []int{1, 3, 0, 2}},
		{"the cursor's first even if empty", 0, []int64{0, 1, 0, 0}, []int{0, 1, 2, 3}},
	}
	for _, tt := range tests {
		q.cursor.Store(tt.cursor)
		for i, d := range tt.depths {
			q.parts[i].depth.Store(d)
		}
		assert.Equal(t, tt.want, q.roundOrder(), tt.name)
	}
	q.cursor.Store(1)
	q.turn(q.parts[2])
	assert.Equal(t, uint64(1), q.cursor.Load(), "a script of another partition")
	q.turn(q.parts[1])
	assert.Equal(t, uint64(2), q.cursor.Load(), "a script of the cursor's partition")
}

// TestListenersLeaveRoomInThePool: while a Get waits, each partition's
// listener holds a pooled connection in BLPOP, so a pool larger than the
// partitions (as Options.Partitions asks) leaves the handle's Add a
// connection of its own, and the waiting Get gets the key at once. With
// a pool of the partitions' size the Add would wait for a connection
// until a heartbeat, an hour here.
func TestListenersLeaveRoomInThePool(t *testing.T) {
	s := redistest.Start(t, redistest.Options{})
	for _, partitions := range []int{1, 8} {
		t.Run(fmt.Sprint(partitions), func(t *testing.T) {
			client := redis.NewClient(&redis.Options{Addr: s.Addr, PoolSize: partitions + 2})
			t.Cleanup(func() { _ = client.Close() })
			q := newTestQueue(t, client, Options[string]{Partitions: partitions, Heartbeat: time.Hour})
			got := make(chan string, 1)
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				item, _ := q.GetContext(ctx)
				got <- item
			}()
			// Blocked on the server, not only busy in the pool, which the
			// Get's own first look also is.
			waitBlockedPops(t, s.Client(), partitions)
			require.Eventually(t, func() bool {
				stats := client.PoolStats()
				return int(stats.TotalConns-stats.IdleConns) == partitions
			}, 5*time.Second, time.Millisecond, "only the listeners' connections busy")
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			require.NoError(t, q.AddContext(ctx, "a"))
			require.Equal(t, "a", <-got)
			q.Done("a")
		})
	}
}
