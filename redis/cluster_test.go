package redisqueue

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/go-workqueue/workqueue/redis/redistest"
)

// TestClusterFailover runs a queue on a real Redis Cluster of 3 primaries
// and 3 replicas with appendfsync always, kills the primary that serves
// the queue's slot with SIGKILL while keys are being added and processed,
// and checks that its replica takes over and the queue goes on: every key
// added after the failover is processed, and every key whose Add returned
// is processed unless it was acknowledged in the last second before the
// kill, the README's bound for a promoted replica (replication is
// asynchronous: the handle sends no WAIT). The number actually lost is
// logged.
func TestClusterFailover(t *testing.T) {
	start := time.Now()
	c := redistest.StartCluster(t, redistest.ClusterOptions{Primaries: 3, Replicas: 1, AppendFsync: "always"})
	formed := time.Since(start)
	client := c.Client()
	const name, keys, workers = "failover", 3000, 4
	q := newHandle(t, client, name, Options[string]{LeaseDuration: 3 * time.Second, Heartbeat: time.Second})

	var mu sync.Mutex
	acked := map[string]time.Time{}
	processed := map[string]int{}
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := range keys {
			key := fmt.Sprintf("k%05d", i)
			q.Add(key) // retries through the failover
			mu.Lock()
			acked[key] = time.Now()
			mu.Unlock()
			time.Sleep(time.Millisecond)
		}
	})
	for range workers {
		wg.Go(func() {
			for {
				key, shutdown := q.Get()
				if shutdown {
					return
				}
				mu.Lock()
				processed[key]++
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

	primary := c.PrimaryFor(newQueueKeys(name).ready)
	require.NotNil(t, primary, "no primary serves the queue's slot")
	before := perNodeScripts(t, c)
	primary.Kill()
	killedAt := time.Now()
	c.Ready(30 * time.Second)
	failedOver := time.Since(killedAt)
	promoted := c.PrimaryFor(newQueueKeys(name).ready)
	require.NotNil(t, promoted, "no primary serves the queue's slot after the failover")
	require.NotEqual(t, primary.Addr, promoted.Addr)

	// Every key acknowledged is processed, but those the failover may have
	// lost: the queue holds nothing more once it is idle.
	waitFor("every key added and the queue idle", 60*time.Second, func() bool {
		a, _ := count()
		return a == keys && queueIdle(client, name)
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
	again := 0
	for _, n := range processed {
		again += n - 1
	}
	t.Logf("cluster formed in %v; primary %s killed after %v, replica %s promoted and the cluster ok %v later; "+
		"%d keys: %d acknowledged adds lost, %d keys processed more than once (%d times more); whole test %v; "+
		"scripts run per node before the kill: %s",
		formed.Round(time.Millisecond), primary.Addr, killedAt.Sub(start).Round(time.Millisecond), promoted.Addr,
		failedOver.Round(time.Millisecond), keys, len(lost), len(processed)-countOnce(processed), again,
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

// perNodeScripts returns, for every running primary, how many scripts it
// ran (INFO commandstats: EVALSHA and EVAL calls), as "addr=n" pairs.
func perNodeScripts(t *testing.T, c *redistest.Cluster) string {
	t.Helper()
	var parts []string
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
		if len(role) == 0 || role[0] != "master" {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s=%d", s.Addr, commandCalls(stats, "evalsha")+commandCalls(stats, "eval")))
	}
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
