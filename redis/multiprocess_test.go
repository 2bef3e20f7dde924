package redisqueue

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/go-workqueue/workqueue/redis/internal/worklog"
	"github.com/go-workqueue/workqueue/redis/redistest"
)

// binDir holds the worker binary, built once per test run (see TestMain).
var binDir string

var workerBuild struct {
	once sync.Once
	path string
	out  []byte
	err  error
}

// workerBinary builds ./internal/worker once, with the race detector when
// the tests have it.
func workerBinary(t *testing.T) string {
	t.Helper()
	workerBuild.once.Do(func() {
		goTool, err := exec.LookPath("go")
		if err != nil {
			workerBuild.err = err
			return
		}
		path := filepath.Join(binDir, "worker")
		args := []string{"build", "-o", path}
		if raceEnabled {
			args = append(args, "-race")
		}
		args = append(args, "./internal/worker")
		workerBuild.out, workerBuild.err = exec.Command(goTool, args...).CombinedOutput()
		workerBuild.path = path
	})
	require.NoError(t, workerBuild.err, "building the worker: %s", workerBuild.out)
	return workerBuild.path
}

// proc is one worker process.
type proc struct {
	cmd    *exec.Cmd
	pid    int
	stderr string // file with its log, shown when a test fails
	exited chan struct{}
	err    error // Wait's, once exited is closed
}

func startProc(t *testing.T, bin, dir string, args ...string) *proc {
	t.Helper()
	stderr, err := os.CreateTemp(dir, "worker-*.stderr")
	require.NoError(t, err)
	cmd := exec.Command(bin, args...)
	cmd.Stderr = stderr
	setDeathSignal(cmd)
	require.NoError(t, cmd.Start())
	_ = stderr.Close() // the child has its own descriptor
	p := &proc{cmd: cmd, pid: cmd.Process.Pid, stderr: stderr.Name(), exited: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.exited
		if t.Failed() {
			b, _ := os.ReadFile(p.stderr)
			lines := strings.Split(strings.TrimSpace(string(b)), "\n")
			t.Logf("stderr of worker %d (last lines):\n%s", p.pid, strings.Join(lines[max(0, len(lines)-15):], "\n"))
		}
	})
	return p
}

// waitExit waits for p to exit and returns its error: an exit code other
// than 0 (66 for a race found in it), or a timeout.
func (p *proc) waitExit(timeout time.Duration) error {
	select {
	case <-p.exited:
		return p.err
	case <-time.After(timeout):
		return fmt.Errorf("worker %d did not exit within %v", p.pid, timeout)
	}
}

// stderrCount counts the lines of p's stderr that contain s.
func (p *proc) stderrCount(s string) int {
	b, _ := os.ReadFile(p.stderr)
	return bytes.Count(b, []byte(s))
}

// watcher follows the shared log while the processes run, reading what was
// appended since its last look, so that the test can wait for conditions
// on it.
type watcher struct {
	f       *os.File
	r       *bufio.Reader
	partial string
	ended   map[string]bool // keys with an E line
	added   map[int]bool    // pids with a D line
	hung    map[int]string  // pids with an H line -> the key held
	acks    int
}

func newWatcher(t *testing.T, path string) *watcher {
	f, err := os.Open(path)
	require.NoError(t, err)
	t.Cleanup(func() { _ = f.Close() })
	return &watcher{f: f, r: bufio.NewReader(f), ended: map[string]bool{}, added: map[int]bool{}, hung: map[int]string{}}
}

// poll reads the complete lines appended since the last poll.
func (w *watcher) poll() {
	for {
		s, err := w.r.ReadString('\n')
		if err != nil { // EOF: keep the partial line for the next poll
			w.partial += s
			return
		}
		line := w.partial + s
		w.partial = ""
		f := strings.Fields(line)
		if len(f) != 4 {
			continue
		}
		pid, _ := strconv.Atoi(f[2])
		switch f[0] {
		case "E":
			w.ended[f[1]] = true
		case "D":
			w.added[pid] = true
		case "H":
			w.hung[pid] = f[1]
		case "a":
			w.acks++
		}
	}
}

// waitFor polls the log every 10ms until cond holds, failing the test
// after timeout. The processes share nothing else with the test that it
// could block on.
func (w *watcher) waitFor(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		w.poll()
		if cond() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for %s: %d keys ended, adds done by %v", timeout, what, len(w.ended), w.added)
		}
		<-tick.C
	}
}

// queueIdle reports whether the queue called name, of the given number
// of partitions, holds nothing in Redis: no key queued, delayed, or held
// under a lease. With every adder finished, no key can come back after
// that. An error (Redis restarting) is not idle.
func queueIdle(client redis.UniversalClient, name string, partitions int) bool {
	for _, keys := range partitionKeys(name, partitions) {
		if !partitionIdle(client, keys) {
			return false
		}
	}
	return true
}

// partitionIdle is queueIdle for one partition, whose keys are keys.
func partitionIdle(client redis.UniversalClient, keys queueKeys) bool {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	var state, delayed, ready *redis.IntCmd
	_, err := client.Pipelined(ctx, func(p redis.Pipeliner) error {
		state = p.HLen(ctx, keys.all[1])
		delayed = p.ZCard(ctx, keys.all[2])
		ready = p.LLen(ctx, keys.ready)
		return nil
	})
	return err == nil && state.Val() == 0 && delayed.Val() == 0 && ready.Val() == 0
}

// killProc kills p with SIGKILL, waits until it has exited, and then
// writes the K line, after which its open holdings count as ended: the
// process can no longer touch a key after that line.
func killProc(t *testing.T, p *proc, logPath string) {
	t.Helper()
	require.NoError(t, p.cmd.Process.Kill())
	<-p.exited
	f, err := os.OpenFile(logPath, os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	worklog.WriteLine(f, 'K', "-", p.pid, 0)
	require.NoError(t, f.Close())
}

// stopProcs sends SIGTERM to every process, which drains and exits 0.
func stopProcs(t *testing.T, procs []*proc) {
	t.Helper()
	for _, p := range procs {
		require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	}
	for _, p := range procs {
		require.NoError(t, p.waitExit(30*time.Second), "worker %d", p.pid)
	}
}

// checkLog checks the shared log and fails the test with the first
// problems found.
func checkLog(t *testing.T, logPath string, keys int) *worklog.Report {
	t.Helper()
	rep, err := worklog.CheckFile(logPath)
	require.NoError(t, err)
	if failures := rep.Failures(); len(failures) > 0 {
		t.Errorf("%d problems in the log, the first ones:\n%s", len(failures), strings.Join(failures[:min(20, len(failures))], "\n"))
		if len(rep.BadKeys) > 0 {
			history, err := worklog.History(logPath, rep.BadKeys[0])
			require.NoError(t, err)
			t.Logf("the log's lines on %s:\n%s", rep.BadKeys[0], strings.Join(history, "\n"))
		}
	}
	require.Len(t, rep.PerKey, keys, "keys with a completed holding")
	return rep
}

func allAdded(w *watcher, procs []*proc) bool {
	for _, p := range procs {
		if !w.added[p.pid] {
			return false
		}
	}
	return true
}

// TestMultiProcess runs a queue shared by worker processes, each adding
// every key before it processes, two of them joining later (so each key is
// added four times, from different processes, some while another process
// processes it, and 5% of holders add their key again while processing
// it), has one more process add the key that one of them holds for good,
// kills that one with SIGKILL, starts another, and checks from the shared
// log that every key was processed, that no key was held by two workers
// at once, and that no acknowledged add was lost.
//
// With priorities, the processes add a quarter of the keys each at 10, 0
// and -100 with AddWithOpts and the rest with Add (worklog.Priority), take
// them with GetWithPriority, and check that every hand-out, the killed
// process's key's again included, comes at the key's priority, and that
// the first ones are of the highest priority.
//
// The lease is 5s, five times the 300ms-1s one would pick to see the killed
// process's keys come back quickly: at 1s, on two cores shared with other
// test binaries, live worker processes can be starved past 2/3 of the
// lease at start-up and lose leases for real, and the overlap that follows
// is at-least-once delivery working as documented, not a bug this test is
// after. The kill comes early enough that the reclaim overlaps the rest of
// the run. Were a lease still lost, the figures logged show it as "leases
// lost by live processes", from the workers' warnings.
func TestMultiProcess(t *testing.T) {
	tests := []struct {
		name       string
		partitions int
		priorities bool
		start      func(t *testing.T) (client redis.UniversalClient, args []string)
	}{
		{name: "one redis-server, priorities", priorities: true, start: func(t *testing.T) (redis.UniversalClient, []string) {
			s := redistest.Start(t, redistest.Options{})
			return s.Client(), []string{"-redis", s.Addr}
		}},
		// The queue lives on one of the shards; the processes find it
		// through the cluster as a controller would. Only Add and Get:
		// the scripts of a queue that never uses priorities.
		{name: "Redis Cluster", start: startClusterArgs},
		// The queue's 3 partitions live on the 3 shards.
		{name: "Redis Cluster, 3 partitions, priorities", partitions: 3, priorities: true, start: startClusterArgs},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client, redisArgs := tt.start(t)
			runMultiProcess(t, client, redisArgs, tt.partitions, tt.priorities)
		})
	}
}

// startClusterArgs starts a cluster of 3 primaries and 3 replicas and
// returns a client of it and the worker's flags to reach it.
func startClusterArgs(t *testing.T) (redis.UniversalClient, []string) {
	c := redistest.StartCluster(t, redistest.ClusterOptions{Primaries: 3, Replicas: 1})
	return c.Client(), []string{"-cluster", "-redis", strings.Join(c.Addrs(), ",")}
}

// runMultiProcess runs TestMultiProcess on a queue of the given number
// of partitions (0: unpartitioned), with or without priorities.
func runMultiProcess(t *testing.T, client redis.UniversalClient, redisArgs []string, partitions int, priorities bool) {
	const (
		keys    = 6000
		procs   = 4
		workers = 4
		name    = "mp"
	)
	start := time.Now()
	bin := workerBinary(t)
	dir := t.TempDir()
	logPath := filepath.Join(dir, "work.log")
	require.NoError(t, os.WriteFile(logPath, nil, 0o644))
	w := newWatcher(t, logPath)
	args := append(slices.Clone(redisArgs),
		"-queue", name, "-log", logPath, "-lease", "5s",
		"-keys", strconv.Itoa(keys), "-workers", strconv.Itoa(workers),
		"-adders", "2", "-work", "10ms", "-readd", "0.05", "-add-first",
		"-partitions", strconv.Itoa(partitions),
	)
	if priorities {
		args = append(args, "-priorities")
	}

	// Two processes add every key, then process; two more join once they
	// have, adding every key again while the first two process, as
	// processes joining a busy queue do. The victim's first worker stops
	// for good holding its 300th key.
	victim := startProc(t, bin, dir, append(args, "-hang-after", "300")...)
	live := []*proc{startProc(t, bin, dir, args...)}
	w.waitFor(t, "the first two processes to add every key", 60*time.Second, func() bool {
		return allAdded(w, append([]*proc{victim}, live...))
	})
	for range procs - 2 {
		live = append(live, startProc(t, bin, dir, args...))
	}
	w.waitFor(t, "the victim to hang holding a key", 60*time.Second, func() bool { return w.hung[victim.pid] != "" })
	hungKey := w.hung[victim.pid]
	addWhileHeld(t, w, bin, dir, args, hungKey)
	killed := len(w.ended)
	killProc(t, victim, logPath)
	// The replacement only processes: the keys are added by the others.
	replacementArgs := slices.Clone(args)
	replacementArgs[slices.Index(replacementArgs, "-adders")+1] = "0"
	live = append(live, startProc(t, bin, dir, replacementArgs...))

	w.waitFor(t, "every key processed and the queue idle", 60*time.Second, func() bool {
		return allAdded(w, live) && len(w.ended) == keys && queueIdle(client, name, max(partitions, 1))
	})
	elapsed := time.Since(start)
	stopProcs(t, live)

	rep := checkLog(t, logPath, keys)
	require.Equal(t, []int{victim.pid}, rep.Killed)
	require.GreaterOrEqual(t, rep.Reclaimed, 1, "the hung key at least was in flight at the kill")
	// The hung key was handed out again after the kill, and (checkLog
	// found no P line) at its priority.
	require.True(t, handedOutAfterKill(t, logPath, hungKey), "%s handed out again after the kill", hungKey)
	hung := hungKey
	if priorities {
		// The first processes start processing once their adds returned,
		// so every key is queued at the first hand-out, a quarter of them
		// at 10: the first 1,000 hand-outs are all at 10 (with partitions,
		// each of which holds about 500 of them, too: a Get takes from
		// the partitions in turn).
		for i, key := range firstHandouts(t, logPath, 1000) {
			priority, _ := worklog.Priority(key)
			require.Equal(t, 10, priority, "hand-out %d, of %s", i+1, key)
		}
		priority, _ := worklog.Priority(hungKey)
		hung = fmt.Sprintf("%s at priority %d", hungKey, priority)
	}
	// Each hand-out consumes an add or a reclaimed lease; the killed
	// process's unacknowledged adds may have run, and up to one key per
	// worker of it may have been reclaimed between its Get and B line or
	// its E line and Done, invisibly in the log.
	require.LessOrEqual(t, rep.Handouts, rep.Adds+rep.Unacked+rep.Reclaimed+workers)
	perKey := float64(rep.Completed) / keys
	addsPerKey := float64(rep.Adds) / keys
	// Most adds find the key still queued and collapse. The adds that
	// find it being processed or already done cost one more reconcile
	// each; how many do depends on how fast the joining processes add
	// against how fast the first ones process, so the bound is loose: at
	// least a quarter of the adds collapsed.
	require.Less(t, perKey, addsPerKey*3/4, "reconciles per key against adds per key")
	require.Positive(t, rep.AddsOnHeld, "adds made while another process held the key")
	lost := 0
	for _, p := range live {
		lost += p.stderrCount("Done after the lease was lost")
	}
	t.Logf("%d partitions, priorities %v, %d keys, %d processes of %d workers (2 joining later, +1 after killing one with %d keys done), %.0fms: "+
		"%d adds (%.2f per key, %d while another process held the key), %d reconciles (%.2f per key, at most %d), %d holdings reclaimed from the killed process (the hung one %s), %d leases lost by live processes, %d log lines",
		max(partitions, 1), priorities, keys, procs, workers, killed, float64(elapsed.Milliseconds()), rep.Adds, addsPerKey, rep.AddsOnHeld,
		rep.Completed, perKey, rep.MaxPerKey(), rep.Reclaimed, hung, lost, rep.Lines)
}

// addWhileHeld runs a process that adds key once, and nothing else, while
// the victim holds it: the log then has an acknowledged add of a key held
// by another process, which checkLog requires to be handed out again
// after it, whatever the timing of the other processes' adds. The key's
// flags pick it alone from the worker's k00000.. keys.
func addWhileHeld(t *testing.T, w *watcher, bin, dir string, args []string, key string) {
	t.Helper()
	n, err := strconv.Atoi(strings.TrimPrefix(key, "k"))
	require.NoError(t, err, "key %q", key)
	adder := startProc(t, bin, dir, append(slices.Clone(args),
		"-keys", strconv.Itoa(n+1), "-shards", strconv.Itoa(n+1), "-shard", strconv.Itoa(n),
		"-adders", "1", "-workers", "0")...)
	w.waitFor(t, "the add of the held key", 60*time.Second, func() bool { return w.added[adder.pid] })
	stopProcs(t, []*proc{adder})
}

// firstHandouts returns the keys of the first n B lines of the log at
// path.
func firstHandouts(t *testing.T, path string, n int) []string {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	var keys []string
	sc := bufio.NewScanner(f)
	for sc.Scan() && len(keys) < n {
		if f := strings.Fields(sc.Text()); len(f) == 4 && f[0] == "B" {
			keys = append(keys, f[1])
		}
	}
	require.NoError(t, sc.Err())
	return keys
}

// handedOutAfterKill reports whether the log at path has a B line of key
// after its first K line.
func handedOutAfterKill(t *testing.T, path, key string) bool {
	t.Helper()
	history, err := worklog.History(path, key)
	require.NoError(t, err)
	killed := false
	for _, line := range history {
		// "N: OP KEY PID SEQ"
		f := strings.Fields(line)
		switch {
		case len(f) == 5 && f[1] == "K":
			killed = true
		case len(f) == 5 && f[1] == "B" && killed:
			return true
		}
	}
	return false
}

// fenceValue returns the queue's fence counter, 0 before any hand-out.
func fenceValue(t *testing.T, client *redis.Client, fence string) int64 {
	t.Helper()
	n, err := client.Get(context.Background(), fence).Int64()
	if errors.Is(err, redis.Nil) {
		return 0
	}
	require.NoError(t, err)
	return n
}

// TestRedisCrashAOF kills redis-server with SIGKILL twice while worker
// processes add and process keys, restarting it each time from its
// append-only file (fsync always), and checks that every key whose add
// returned, before or after a crash, was processed after that add, and
// that no key was held by two workers at once. The workers use only the
// retrying methods and ride through the restarts.
//
// The lease is 5s. A holder extends its lease every third of it; an
// extension due while Redis is down fails and the next comes a third
// later, so a lease survives an outage shorter than a third of it, 1.7s,
// where a restart takes tens of milliseconds (and a live process starved
// as long, which TestMultiProcess found to happen at 1s). With a lease shorter than the outage
// plus an extension period, a key would legitimately be handed out again
// while its holder still worked on it (the holder's Done is then refused),
// and the overlap check would fail for a reason that is not a bug. The
// cost of the long lease: a Get whose script ran but whose reply the crash
// lost leaves its key leased to no one until the lease expires.
func TestRedisCrashAOF(t *testing.T) {
	const (
		keys    = 2000
		procs   = 3
		workers = 4
		name    = "crash"
	)
	start := time.Now()
	s := redistest.Start(t, redistest.Options{AppendFsync: "always"})
	bin := workerBinary(t)
	dir := t.TempDir()
	logPath := filepath.Join(dir, "work.log")
	require.NoError(t, os.WriteFile(logPath, nil, 0o644))
	w := newWatcher(t, logPath)
	args := []string{
		"-redis", s.Addr, "-queue", name, "-log", logPath, "-lease", "5s",
		"-keys", strconv.Itoa(keys), "-workers", strconv.Itoa(workers),
		"-adders", "1", "-work", "1ms", "-readd", "0.05", "-add-first",
	}
	// Each key is added by one process (plus the 5% added again), to keep
	// the number of fsyncs down: dedup is TestMultiProcess's subject. A
	// process processes once its adds returned, so that many keys are
	// queued at each crash: without persistence, they would be lost (a
	// run with AppendFsync "" and no fence check lost 1,040 of 2,000; without
	// -add-first, workers kept up with adders and a run lost one key).
	var live []*proc
	for i := range procs {
		live = append(live, startProc(t, bin, dir, append(args, "-shard", strconv.Itoa(i), "-shards", strconv.Itoa(procs))...))
	}
	client := s.Client()
	fence := queueKeysOf(name).all[5]
	// Crash while the adds are going on, once early and once late, so
	// that some keys are added before, some during and some after. Redis
	// stays down until a worker has seen it gone (go-redis's own retries
	// hide a quick restart), so that the queue's retries are exercised.
	var backlog []int
	for _, frac := range []int{4, 2} {
		w.waitFor(t, fmt.Sprintf("1/%d of the adds acknowledged", frac), 60*time.Second, func() bool {
			return w.acks >= keys/frac
		})
		before := fenceValue(t, client, fence)
		// Acknowledged adds not yet processed: what a crash without
		// persistence would lose (approximately: the log runs on).
		backlog = append(backlog, w.acks-len(w.ended))
		seen := 0 // the outages the workers reported before this crash
		for _, p := range live {
			seen += p.stderrCount("Redis unreachable")
		}
		s.Kill()
		w.waitFor(t, "a worker to see Redis gone", 10*time.Second, func() bool {
			now := 0
			for _, p := range live {
				now += p.stderrCount("Redis unreachable")
			}
			return now > seen
		})
		s.Restart()
		// The fence counter survives: the server replayed its append-only
		// file, so the queue's state (and each lease) is back.
		require.GreaterOrEqual(t, fenceValue(t, client, fence), before, "the fence counter after the restart")
	}
	w.waitFor(t, "every key processed and the queue idle", 60*time.Second, func() bool {
		return allAdded(w, live) && len(w.ended) == keys && queueIdle(client, name, 1)
	})
	elapsed := time.Since(start)
	stopProcs(t, live)

	rep := checkLog(t, logPath, keys)
	require.Empty(t, rep.Killed)
	outages, lost := 0, 0
	for _, p := range live {
		outages += p.stderrCount("Redis unreachable, retrying")
		lost += p.stderrCount("Done after the lease was lost")
	}
	require.Positive(t, outages, "the workers saw Redis go away")
	require.Positive(t, backlog[0], "keys waiting at the first crash")
	t.Logf("%d keys, %d processes of %d workers, 2 redis-server crashes with about %v adds not yet processed, %.0fms: %d adds, %d reconciles (%.2f per key), "+
		"%d retry warnings logged, %d Dones refused as lease lost (most likely executed, their reply lost in a crash, and sent again by go-redis)",
		keys, procs, workers, backlog, float64(elapsed.Milliseconds()), rep.Adds, rep.Completed,
		float64(rep.Completed)/keys, outages, lost)
}
