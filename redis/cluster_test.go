package redisqueue

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/go-workqueue/workqueue"
	"github.com/go-workqueue/workqueue/redis/internal/worklog"
	"github.com/go-workqueue/workqueue/redis/redistest"
)

// TestClusterFailover runs a queue on a real Redis Cluster of 3 primaries
// and 3 replicas with appendfsync always, kills the primary that serves
// the queue's slot with SIGKILL while keys are being added and processed,
// and checks that its replica takes over and the queue goes on: every key
// added after the failover is processed, and every key whose Add returned
// is processed unless it was acknowledged in the last second before the
// kill, the main README's bound for a promoted replica (replication is
// asynchronous) without WaitReplicas, and none with WaitReplicas 1. The
// number actually lost is logged. The keys are added at three priorities
// (worklog.Priority: a quarter each at 10, 0 and -100 with AddWithOpts,
// the rest with Add), and each must be handed out at its own.
//
// On a queue of 3 partitions, one on each primary, the primary of the
// last partition is killed; the keys of the other partitions added and
// processed while it was down are logged, not checked: a worker whose Done
// is for a key of the killed partition waits for it (up to the lease), and
// all of them may.
func TestClusterFailover(t *testing.T) {
	tests := []struct {
		name       string
		wait       int // Options.WaitReplicas
		partitions int
	}{
		{name: "without WAIT", partitions: 1},
		// With WAIT, an add returns once the replica has it: nothing
		// acknowledged may be lost.
		{name: "WaitReplicas 1", wait: 1, partitions: 1},
		{name: "3 partitions, WaitReplicas 1", wait: 1, partitions: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { runFailover(t, tt.wait, tt.partitions) })
	}
}

func runFailover(t *testing.T, waitReplicas, partitions int) {
	start := time.Now()
	c := redistest.StartCluster(t, redistest.ClusterOptions{Primaries: 3, Replicas: 1, AppendFsync: "always"})
	formed := time.Since(start)
	client := c.Client()
	const name, keys, workers = "failover", 3000, 4
	q := newHandle(t, client, name, Options[string]{LeaseDuration: 3 * time.Second, Heartbeat: time.Second, WaitReplicas: waitReplicas, Partitions: partitions})
	parts := partitionKeys(name, partitions)
	victim := parts[partitions-1].ready

	var mu sync.Mutex
	acked := map[string]time.Time{}
	processed := map[string]int{}
	var wrongPriority []string
	var processedAt []time.Time // of the keys of the partitions not killed
	var wg sync.WaitGroup
	// One adder per partition, so that the adds of the partitions whose
	// primary lives go on while the killed one's retry.
	for part := range partitions {
		wg.Go(func() {
			for i := range keys {
				key := fmt.Sprintf("k%05d", i)
				if partitionOf(key, partitions) != part {
					continue
				}
				// Both retry through the failover.
				if priority, plain := worklog.Priority(key); plain {
					q.Add(key)
				} else {
					q.AddWithOpts(workqueue.AddOpts{Priority: &priority}, key)
				}
				mu.Lock()
				acked[key] = time.Now()
				mu.Unlock()
				time.Sleep(time.Millisecond * time.Duration(partitions))
			}
		})
	}
	for range workers {
		wg.Go(func() {
			for {
				key, priority, shutdown := q.GetWithPriority()
				if shutdown {
					return
				}
				mu.Lock()
				processed[key]++
				if want, _ := worklog.Priority(key); priority != want {
					wrongPriority = append(wrongPriority, fmt.Sprintf("%s at %d, added at %d", key, priority, want))
				}
				if partitionOf(key, partitions) != partitions-1 {
					processedAt = append(processedAt, time.Now())
				}
				mu.Unlock()
				q.Done(key)
			}
		})
	}
	count := func() (int, int) {
		mu.Lock()
		defer mu.Unlock()
		return len(acked), len(processed)
	}
	waitFor := func(what string, timeout time.Duration, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(timeout)
		for !cond() {
			if time.Now().After(deadline) {
				a, p := count()
				t.Fatalf("%s: not after %v (%d keys added, %d processed)", what, timeout, a, p)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitFor("500 keys processed", 30*time.Second, func() bool { _, p := count(); return p >= 500 })

	primary := c.PrimaryFor(victim)
	require.NotNil(t, primary, "no primary serves the queue's slot")
	before := perNodeScripts(t, c)
	primary.Kill()
	killedAt := time.Now()
	c.Ready(30 * time.Second)
	failedOver := time.Since(killedAt)
	promoted := c.PrimaryFor(victim)
	require.NotNil(t, promoted, "no primary serves the queue's slot after the failover")
	require.NotEqual(t, primary.Addr, promoted.Addr)
	if waitReplicas > 0 {
		// The promoted replica has no replica of its own: adds wait (they
		// retry ErrNotReplicated) until the dead primary restarts and
		// rejoins as its replica, as a crashed node does.
		primary.Restart()
		c.Ready(30 * time.Second)
	}

	// Every key acknowledged is processed, but those the failover may have
	// lost: the queue holds nothing more once it is idle.
	// Idle as its primary sees it: a cluster client may route the check
	// to a node that has just restarted and not yet learnt it is a
	// replica now, whose stale copy says idle.
	waitFor("every key added and the queue idle", 60*time.Second, func() bool {
		a, _ := count()
		if a != keys {
			return false
		}
		for _, keys := range parts {
			p := c.PrimaryFor(keys.ready)
			if p == nil {
				return false
			}
			direct := redis.NewClient(&redis.Options{Addr: p.Addr})
			idle := partitionIdle(direct, keys)
			_ = direct.Close()
			if !idle {
				return false
			}
		}
		return true
	})
	q.ShutDown()
	wg.Wait()

	var lost []string
	var lostLate []string
	for key, at := range acked {
		if processed[key] > 0 {
			continue
		}
		lost = append(lost, key)
		if at.Before(killedAt.Add(-time.Second)) || at.After(killedAt.Add(failedOver)) {
			lostLate = append(lostLate, key)
		}
	}
	assert.Empty(t, lostLate, "acknowledged keys lost outside the last second before the kill")
	assert.Empty(t, wrongPriority, "keys handed out at another priority than their adds'")
	if waitReplicas > 0 {
		assert.Empty(t, lost, "acknowledged keys lost, with WaitReplicas %d", waitReplicas)
	}
	outage := func(at time.Time) bool { return at.After(killedAt) && at.Before(killedAt.Add(failedOver)) }
	during, addedDuring := 0, 0
	for _, at := range processedAt {
		if outage(at) {
			during++
		}
	}
	for key, at := range acked {
		if partitionOf(key, partitions) != partitions-1 && outage(at) {
			addedDuring++
		}
	}
	again := 0
	for _, n := range processed {
		again += n - 1
	}
	t.Logf("%d partitions; cluster formed in %v; primary %s killed after %v, replica %s promoted and the cluster ok %v later; "+
		"%d keys: %d acknowledged adds lost, %d keys processed more than once (%d times more), %d keys of the other partitions added and %d processed meanwhile; whole test %v; "+
		"scripts run per node before the kill: %s",
		partitions, formed.Round(time.Millisecond), primary.Addr, killedAt.Sub(start).Round(time.Millisecond), promoted.Addr,
		failedOver.Round(time.Millisecond), keys, len(lost), len(processed)-countOnce(processed), again, addedDuring, during,
		time.Since(start).Round(time.Millisecond), before)
}

func countOnce(processed map[string]int) int {
	n := 0
	for _, c := range processed {
		if c == 1 {
			n++
		}
	}
	return n
}

// perNodeScripts formats scriptsPerPrimary as "addr=n" pairs.
func perNodeScripts(t *testing.T, c *redistest.Cluster) string {
	t.Helper()
	var parts []string
	for addr, n := range scriptsPerPrimary(t, c) {
		parts = append(parts, fmt.Sprintf("%s=%d", addr, n))
	}
	slices.Sort(parts)
	return strings.Join(parts, " ")
}

// commandCalls returns the calls of command in an INFO commandstats reply.
func commandCalls(stats, command string) int64 {
	for line := range strings.SplitSeq(stats, "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_"+command+":calls=")
		if !ok {
			continue
		}
		calls, _, _ := strings.Cut(rest, ",")
		n, _ := strconv.ParseInt(calls, 10, 64)
		return n
	}
	return 0
}

// TestClusterSpread runs queues on a 3-primary cluster, with handles of
// workers on each, and counts the scripts each primary ran (INFO
// commandstats): a queue, or a partition of one, lives on one shard, so
// its work goes to that shard alone, and splitting the keys, over queues
// of different names or over the partitions of one queue, spreads the
// work over the shards, each shard's share close to its queues' or
// partitions' share of the keys. It is the measured ground for the
// README's rule of thumb; on 2 cores the shards share the CPU, so the
// counts, not the throughput (logged), show what more cores would scale.
func TestClusterSpread(t *testing.T) {
	c := redistest.StartCluster(t, redistest.ClusterOptions{Primaries: 3, Replicas: 1})
	client := c.Client()
	tests := []struct {
		name       string
		queues     []string
		partitions int
		keys       int // per queue
		// handles of workers goroutines each work each queue.
		handles, workers int
		// spread: the queues' partitions are on every primary.
		spread bool
	}{
		{name: "one queue", queues: []string{"spread-a"}, partitions: 1, keys: 3600, handles: 1, workers: 16},
		// One partition on each primary: partitionPrefixes spaces their
		// slots a third of the way round from each other.
		{name: "one queue of 3 partitions", queues: []string{"spread-b"}, partitions: 3, keys: 3600, handles: 1, workers: 16, spread: true},
		// Several handles, as several processes would have: each shares
		// scripts only among its own calls.
		{name: "one queue, 4 handles", queues: []string{"spread-c"}, partitions: 1, keys: 3600, handles: 4, workers: 4},
		{name: "one queue of 3 partitions, 4 handles", queues: []string{"spread-d"}, partitions: 3, keys: 3600, handles: 4, workers: 4, spread: true},
		// Names whose slots cover every primary (redis-cli gives the
		// primaries the same slots in every run).
		{name: "six queues", queues: []string{"spread-0", "spread-1", "spread-2", "spread-3", "spread-4", "spread-5"}, partitions: 1, keys: 600, handles: 1, workers: 16, spread: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			runSpread(t, c, client, tt.queues, tt.partitions, tt.keys, tt.handles, tt.workers, tt.spread)
		})
	}
}

func runSpread(t *testing.T, c *redistest.Cluster, client redis.UniversalClient, names []string, partitions, keys, handles, workers int, spread bool) {
	served := map[string][]string{} // primary address -> the queues' partitions it serves
	for i := range names {
		for p, keys := range partitionKeys(names[i], partitions) {
			primary := c.PrimaryFor(keys.ready)
			require.NotNil(t, primary, "no primary serves partition %d of %s", p, names[i])
			served[primary.Addr] = append(served[primary.Addr], fmt.Sprint(names[i], "/", p))
		}
	}
	if spread {
		require.Len(t, served, 3, "the queues' partitions are on every primary: %v", served)
	}
	parts := len(names) * partitions

	before, commandsBefore := scriptsPerPrimary(t, c), commandsPerPrimary(t, c)
	start := time.Now()
	var wg sync.WaitGroup
	for _, name := range names {
		qs := make([]*Queue[string], handles)
		for i := range qs {
			qs[i] = newHandle(t, client, name, Options[string]{Partitions: partitions})
		}
		items := make([]string, keys)
		for i := range items {
			items[i] = fmt.Sprint(i)
		}
		wg.Go(func() {
			require.NoError(t, qs[0].AddBatchContext(context.Background(), items))
			var done sync.WaitGroup
			left := make(chan struct{}, keys)
			for range keys {
				left <- struct{}{}
			}
			close(left)
			for w := range handles * workers {
				q := qs[w%handles]
				done.Go(func() {
					for range left {
						item, err := q.GetContext(context.Background())
						require.NoError(t, err)
						require.NoError(t, q.DoneContext(context.Background(), item))
					}
				})
			}
			done.Wait()
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	after, commandsAfter := scriptsPerPrimary(t, c), commandsPerPrimary(t, c)

	var total int64
	for addr := range served {
		total += after[addr] - before[addr]
	}
	var report []string
	for addr, what := range served {
		ran := after[addr] - before[addr]
		report = append(report, fmt.Sprintf("%s: %d partitions, %d scripts, %d commands", addr, len(what), ran, commandsAfter[addr]-commandsBefore[addr]))
		// Each partition of the primary costs it at least one script per
		// 256 adds and a share of the batched Gets and Dones, close to its
		// share of the keys: at least half of it.
		assert.GreaterOrEqual(t, ran, int64(len(what)*keys/partitions/maxBatch), "scripts run by %s, which serves %v", addr, what)
		assert.GreaterOrEqual(t, ran, total*int64(len(what))/int64(parts)/2, "scripts run by %s, which serves %v, against its share", addr, what)
	}
	for addr := range after {
		if _, serves := served[addr]; !serves {
			assert.Zero(t, after[addr]-before[addr], "scripts run by %s, which serves none of the queues", addr)
		}
	}
	slices.Sort(report)
	t.Logf("%d queues of %d partitions, %d keys and %d handles of %d workers each, in %v: %.0f keys/s on 2 shared cores; per primary: %s",
		len(names), partitions, keys, handles, workers, elapsed.Round(time.Millisecond), float64(len(names)*keys)/elapsed.Seconds(), strings.Join(report, "; "))
}

// scriptsPerPrimary returns how many scripts each running primary has run.
func scriptsPerPrimary(t *testing.T, c *redistest.Cluster) map[string]int64 {
	t.Helper()
	return perPrimary(t, c, func(stats string) int64 {
		return commandCalls(stats, "fcall")
	})
}

// commandsPerPrimary returns how many commands each running primary has
// run for clients, those of scripts included, leaving out the cluster's
// and the tests' own (INFO, ROLE, CLUSTER, replication).
func commandsPerPrimary(t *testing.T, c *redistest.Cluster) map[string]int64 {
	t.Helper()
	return perPrimary(t, c, func(stats string) int64 {
		var n int64
		for line := range strings.SplitSeq(stats, "\n") {
			name, _, ok := strings.Cut(strings.TrimPrefix(strings.TrimSpace(line), "cmdstat_"), ":")
			if !ok || strings.HasPrefix(line, "#") {
				continue
			}
			switch strings.Split(name, "|")[0] {
			case "info", "role", "cluster", "replconf", "ping", "client", "hello", "psync", "command":
			default:
				n += commandCalls(stats, name)
			}
		}
		return n
	})
}

// perPrimary returns count of the INFO commandstats of each running
// primary.
func perPrimary(t *testing.T, c *redistest.Cluster, count func(stats string) int64) map[string]int64 {
	t.Helper()
	counts := map[string]int64{}
	for _, s := range c.Nodes {
		if _, err := s.Pid(); err != nil {
			continue
		}
		client := redis.NewClient(&redis.Options{Addr: s.Addr})
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		role, _ := client.Do(ctx, "ROLE").Slice()
		stats, err := client.Info(ctx, "commandstats").Result()
		cancel()
		_ = client.Close()
		require.NoError(t, err)
		if len(role) > 0 && role[0] == "master" {
			counts[s.Addr] = count(stats)
		}
	}
	return counts
}

// TestWaitReplicas checks that with WaitReplicas an add returns once that
// many replicas have it, and fails with ErrNotReplicated, its effect on the
// primary standing, when they do not within WaitTimeout.
func TestWaitReplicas(t *testing.T) {
	tests := []struct {
		name     string
		replicas int
		wantErr  error
	}{
		{name: "a replica acknowledges", replicas: 1},
		{name: "no replica", replicas: 0, wantErr: ErrNotReplicated},
	}
	ring := redis.NewRing(&redis.RingOptions{})
	defer ring.Close()
	require.PanicsWithValue(t, "workqueue: redisqueue.New: WaitReplicas needs a *redis.Client or *redis.ClusterClient, got *redis.Ring", func() {
		New[string](ring, "q", Options[string]{WaitReplicas: 1})
	})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			primary := redistest.Start(t, redistest.Options{})
			host, port, _ := strings.Cut(primary.Addr, ":")
			for range tt.replicas {
				replica := redistest.Start(t, redistest.Options{Args: []string{"--replicaof", host, port}})
				waitInSync(t, replica)
			}
			q := newTestQueue(t, primary.Client(), Options[string]{WaitReplicas: 1, WaitTimeout: 100 * time.Millisecond})
			ctx := context.Background()
			err := q.AddContext(ctx, "a")
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
				assert.True(t, isOutage(err), "ErrNotReplicated is retried as an outage")
			} else {
				require.NoError(t, err)
			}
			err = q.AddBatchContext(ctx, []string{"b", "c"})
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
			} else {
				require.NoError(t, err)
			}
			n, err := q.LenContext(ctx)
			require.NoError(t, err)
			assert.Equal(t, 3, n, "keys on the primary")
		})
	}
}

// waitInSync waits until replica reports its link to the primary up.
func waitInSync(t *testing.T, replica *redistest.Server) {
	t.Helper()
	client := replica.Client()
	deadline := time.Now().Add(10 * time.Second)
	for {
		info, err := client.Info(context.Background(), "replication").Result()
		if err == nil && strings.Contains(info, "master_link_status:up") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the replica is not in sync after 10s: %v %s", err, info)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestClusterLibraryReloaded: a replica promoted without the library (its
// primary's functions were flushed, which the replica copied, before the
// primary died) is given it by the queue's next call, and the queue goes
// on.
func TestClusterLibraryReloaded(t *testing.T) {
	c := redistest.StartCluster(t, redistest.ClusterOptions{Primaries: 3, Replicas: 1})
	client := c.Client()
	ctx := context.Background()
	q := newHandle(t, client, "reload", Options[string]{LeaseDuration: 3 * time.Second, Heartbeat: time.Second})
	require.NoError(t, q.AddContext(ctx, "a"))
	require.Equal(t, "a", getNow(t, q))
	require.NoError(t, q.DoneContext(ctx, "a"))

	slotKey := q.parts[0].keys.ready
	primary := c.PrimaryFor(slotKey)
	require.NotNil(t, primary, "no primary serves the queue's slot")
	direct := primary.Client()
	require.NoError(t, direct.FunctionFlush(ctx).Err())
	// The flush reaches the replica before the primary dies.
	require.NoError(t, direct.Do(ctx, "WAIT", 1, 5000).Err())
	primary.Kill()
	c.Ready(30 * time.Second)
	promoted := c.PrimaryFor(slotKey)
	require.NotNil(t, promoted, "no primary serves the queue's slot after the failover")
	require.NotEqual(t, primary.Addr, promoted.Addr)
	hasLibrary := func() bool {
		libs, err := promoted.Client().FunctionList(ctx, redis.FunctionListQuery{LibraryNamePattern: queueLibrary.name}).Result()
		require.NoError(t, err)
		return len(libs) == 1
	}
	require.False(t, hasLibrary(), "the promoted replica has the library before the queue's next call")

	q.Add("b") // retries while the client learns the new primary
	assert.True(t, hasLibrary(), "the promoted replica has the library after the queue's call")
	item, err := func() (string, error) {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		return q.GetContext(ctx)
	}()
	require.NoError(t, err)
	require.Equal(t, "b", item)
	require.NoError(t, q.DoneContext(ctx, "b"))
}
