package redistest

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Cluster is a Redis Cluster of real redis-server processes on loopback,
// started by StartCluster: Primaries primaries, each with Replicas
// replicas. Its methods are not safe for concurrent use.
type Cluster struct {
	// Nodes are the servers, in the order redis-cli --cluster create was
	// given them: the primaries first, then the replicas.
	Nodes []*Server

	t testing.TB
}

// ClusterOptions configures StartCluster.
type ClusterOptions struct {
	// Primaries is the number of primaries, at least 3 (redis-cli's
	// minimum); Replicas the number of replicas of each.
	Primaries, Replicas int
	// AppendFsync is each node's Options.AppendFsync.
	AppendFsync string
	// NodeTimeout is cluster-node-timeout: how long a primary may be
	// unreachable before its replica is promoted. Default 1s.
	NodeTimeout time.Duration
}

// StartCluster starts the cluster's servers on free loopback ports, joins
// them with redis-cli --cluster create, waits until every node reports the
// cluster ok and every replica is in sync, and kills them all when t ends.
// It fails t if redis-server or redis-cli is missing, if redis-cli has
// not joined the servers within 60s, or if the cluster is not ok within
// 30s after: it does not skip.
func StartCluster(t testing.TB, opts ClusterOptions) *Cluster {
	t.Helper()
	if opts.Primaries < 3 {
		t.Fatalf("redistest: a cluster needs at least 3 primaries, got %d", opts.Primaries)
	}
	timeout := opts.NodeTimeout
	if timeout == 0 {
		timeout = time.Second
	}
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		t.Fatalf("redistest: redis-cli is not on PATH (Debian: apt-get install -y redis-tools; .ci/run installs it): %v", err)
	}
	c := &Cluster{t: t}
	n := opts.Primaries * (1 + opts.Replicas)
	for range n {
		// The config file is relative to the server's own directory.
		s := Start(t, Options{AppendFsync: opts.AppendFsync, Args: []string{
			"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", strconv.Itoa(int(timeout.Milliseconds())),
		}})
		c.Nodes = append(c.Nodes, s)
	}
	args := []string{"--cluster", "create"}
	for _, s := range c.Nodes {
		args = append(args, s.Addr)
	}
	args = append(args, "--cluster-replicas", strconv.Itoa(opts.Replicas), "--cluster-yes")
	// redis-cli waits for the nodes to agree, with no bound of its own; a
	// run that hung under load would hold a test until its timeout.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, cli, args...).CombinedOutput(); err != nil {
		t.Fatalf("redistest: redis-cli %s: %v (after at most 60s)\n%s", strings.Join(args, " "), err, out)
	}
	deadline := time.Now().Add(30 * time.Second)
	for !c.ready() {
		if time.Now().After(deadline) {
			t.Fatalf("redistest: the cluster did not form in 30s:\n%s", c.describe())
		}
		time.Sleep(50 * time.Millisecond)
	}
	return c
}

// each calls f with a client of each running node in turn, until f
// returns false, and reports whether every call returned true.
func (c *Cluster) each(f func(ctx context.Context, s *Server, client *redis.Client) bool) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, s := range c.Nodes {
		if s.cmd == nil {
			continue
		}
		client := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1})
		more := f(ctx, s, client)
		_ = client.Close()
		if !more {
			return false
		}
	}
	return true
}

// ready reports whether every running node sees the cluster ok, with
// every slot served, and every running replica is in sync with its
// primary.
func (c *Cluster) ready() bool {
	return c.each(func(ctx context.Context, _ *Server, client *redis.Client) bool {
		info, err := client.ClusterInfo(ctx).Result()
		repl, err2 := client.Info(ctx, "replication").Result()
		return err == nil && err2 == nil && strings.Contains(info, "cluster_state:ok") &&
			(!strings.Contains(repl, "role:slave") || strings.Contains(repl, "master_link_status:up"))
	})
}

func (c *Cluster) describe() string {
	var b strings.Builder
	c.each(func(ctx context.Context, s *Server, client *redis.Client) bool {
		nodes, err := client.ClusterNodes(ctx).Result()
		fmt.Fprintf(&b, "%s: %v\n%s", s.Addr, err, nodes)
		return true
	})
	return b.String()
}

// Addrs returns every node's address.
func (c *Cluster) Addrs() []string {
	addrs := make([]string, len(c.Nodes))
	for i, s := range c.Nodes {
		addrs[i] = s.Addr
	}
	return addrs
}

// Client returns a cluster client of the cluster, closed when the test
// ends.
func (c *Cluster) Client() *redis.ClusterClient {
	client := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs()})
	c.t.Cleanup(func() { _ = client.Close() })
	return client
}

// PrimaryFor returns the running node that serves key's slot as primary,
// as the nodes themselves report it, or nil if none does.
func (c *Cluster) PrimaryFor(key string) *Server {
	var primary *Server
	c.each(func(ctx context.Context, s *Server, client *redis.Client) bool {
		slot, err := client.ClusterKeySlot(ctx, key).Result()
		role, err2 := client.Do(ctx, "ROLE").Slice()
		if err == nil && err2 == nil && len(role) > 0 && role[0] == "master" && servesSlot(ctx, client, int(slot)) {
			primary = s
			return false
		}
		return true
	})
	return primary
}

// servesSlot reports whether the node client talks to lists slot among
// its own in CLUSTER NODES (the line flagged myself).
func servesSlot(ctx context.Context, client *redis.Client, slot int) bool {
	nodes, err := client.ClusterNodes(ctx).Result()
	if err != nil {
		return false
	}
	for line := range strings.SplitSeq(nodes, "\n") {
		fields := strings.Fields(line)
		if len(fields) < 8 || !strings.Contains(fields[2], "myself") {
			continue
		}
		for _, r := range fields[8:] {
			lo, hi, found := strings.Cut(r, "-")
			if !found {
				hi = lo
			}
			l, err1 := strconv.Atoi(lo)
			h, err2 := strconv.Atoi(hi)
			if err1 == nil && err2 == nil && l <= slot && slot <= h {
				return true
			}
		}
	}
	return false
}

// Ready waits until the cluster is ok again on every running node, after
// a node was killed, and fails the test after timeout.
func (c *Cluster) Ready(timeout time.Duration) {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	for !c.ready() {
		if time.Now().After(deadline) {
			c.t.Fatalf("redistest: the cluster is not ok after %v:\n%s", timeout, c.describe())
		}
		time.Sleep(50 * time.Millisecond)
	}
}
