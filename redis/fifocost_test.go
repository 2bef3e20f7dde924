package redisqueue

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/go-workqueue/workqueue/redis/redistest"
)

// TestFIFOCommands pins the Redis commands a queue that never parks runs
// on the server, counted by INFO commandstats: one worker adding keys
// one at a time (some after a delay), then getting and marking each done.
// Parking must cost this path no command: its state is reached only from
// keys that were parked.
func TestFIFOCommands(t *testing.T) {
	s := redistest.Start(t, redistest.Options{})
	client := s.Client()
	q := newTestQueue(t, client, Options[string]{})
	ctx := context.Background()
	q.Len() // the look at the number of partitions, not counted
	const keys = 100
	require.NoError(t, client.ConfigResetStat(ctx).Err())
	for i := range keys {
		require.NoError(t, q.AddContext(ctx, fmt.Sprint(i)))
	}
	require.NoError(t, q.AddAfterContext(ctx, "late", time.Hour))
	adds := scriptCommands(t, client.Info(ctx, "commandstats").Val())
	require.NoError(t, client.ConfigResetStat(ctx).Err())
	for range keys {
		item := getNow(t, q)
		require.NoError(t, q.DoneContext(ctx, item))
	}
	drain := scriptCommands(t, client.Info(ctx, "commandstats").Val())
	t.Logf("commands run by the functions: %d keys added and one delayed: %s; %d Get+Done: %s", keys, adds, keys, drain)
	require.Equal(t, fifoAddCommands, adds.String(), "commands of the adds")
	require.Equal(t, fifoDrainCommands, drain.String(), "commands of the Gets and Dones")
}

// The commands of TestFIFOCommands, as the queue runs them without parks.
const (
	fifoAddCommands   = "hget=1 hmget=101 hset=100 incrby=100 llen=102 rpush=101 time=101 zadd=1 zcard=101 zrange=102"
	fifoDrainCommands = "hdel=300 hmget=400 hset=300 incrby=100 llen=199 lpop=100 time=200 zadd=200 zcard=100 zrange=200 zrem=200"
)

// commandCounts maps a command to its calls.
type commandCounts map[string]int64

func (c commandCounts) String() string {
	var parts []string
	for cmd, n := range c {
		parts = append(parts, fmt.Sprintf("%s=%d", cmd, n))
	}
	slices.Sort(parts)
	return strings.Join(parts, " ")
}

// scriptCommands returns the calls of every command in an INFO
// commandstats reply but those the test and the client send themselves.
func scriptCommands(t *testing.T, stats string) commandCounts {
	t.Helper()
	counts := commandCounts{}
	for line := range strings.SplitSeq(stats, "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_")
		if !ok {
			continue
		}
		cmd, rest, _ := strings.Cut(rest, ":calls=")
		calls, _, _ := strings.Cut(rest, ",")
		n, err := strconv.ParseInt(calls, 10, 64)
		require.NoError(t, err)
		switch cmd {
		case "info", "config|resetstat", "client|setinfo", "hello", "blpop", "function|load", "fcall", "ping":
			continue
		}
		counts[cmd] = n
	}
	return counts
}
