// Command distributed runs one redisqueue queue across several worker
// processes, kills one of them with SIGKILL while it holds a key, starts
// a replacement, and prints that every key was processed, one holder at a
// time, with the retries it took:
//
//	go run ./examples/distributed            # from the redis module
//	go run ./examples/distributed -redis 127.0.0.1:6379
//
// Without -redis it starts a redis-server from PATH on a free loopback
// port, in a temporary directory, and stops it at the end. The workers
// are this program run again with -worker; each appends what it does to
// one shared log file (one write per line, O_APPEND), whose order across
// processes is real time, and the summary is read from that log.
//
// It lives in the redis module, not in the root module's examples, so
// that the root module does not depend on go-redis.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	redisqueue "github.com/go-workqueue/workqueue/redis"
	"github.com/go-workqueue/workqueue/redis/internal/worklog"
	"github.com/go-workqueue/workqueue/redis/redistest"
)

const (
	// lease is how long a killed worker's key waits before it is handed
	// out again; the holders extend it every third while they work, so a
	// live worker stalled for less than two thirds of it keeps its key.
	lease = 5 * time.Second
	// failEvery: keys whose number is a multiple of it fail on their first
	// attempt and are retried with AddRateLimited, to show the backoff
	// kept in Redis across processes.
	failEvery = 10
)

func main() {
	addr := flag.String("redis", "", "Redis address; default: start a redis-server from PATH")
	keys := flag.Int("keys", 200, "keys to process")
	procs := flag.Int("procs", 3, "worker processes, one of which is killed")
	// The flags of a worker process, set by the parent.
	worker := flag.Bool("worker", false, "run as a worker process (internal)")
	queue := flag.String("queue", "", "queue name (internal)")
	logPath := flag.String("log", "", "shared log (internal)")
	goroutines := flag.Int("goroutines", 2, "goroutines per worker process (internal)")
	hang := flag.Bool("hang", false, "hold the first key for good, to be killed (internal)")
	flag.Parse()

	var err error
	if *worker {
		err = work(*addr, *queue, *logPath, *goroutines, *hang)
	} else {
		err = run(os.Stdout, *addr, *keys, *procs)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "distributed:", err)
		os.Exit(1)
	}
}

// run is the parent: it adds the keys, runs the workers, kills one and
// prints the summary.
func run(out io.Writer, addr string, keys, procs int) error {
	if keys < 1 || procs < 2 {
		return errors.New("need at least 1 key and 2 processes")
	}
	dir, err := os.MkdirTemp("", "distributed-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if addr == "" {
		server, err := redistest.Launch(dir, redistest.Options{})
		if err != nil {
			return fmt.Errorf("%w; or pass -redis ADDR", err)
		}
		defer server.Stop()
		addr = server.Addr
		fmt.Fprintf(out, "started redis-server on %s\n", addr)
	}
	client := redis.NewClient(&redis.Options{Addr: addr})
	defer client.Close()
	if err := client.Ping(context.Background()).Err(); err != nil {
		return fmt.Errorf("redis at %s: %w", addr, err)
	}

	// A fresh name, so that a shared Redis's other queues are untouched.
	suffix := make([]byte, 4)
	_, _ = rand.Read(suffix)
	name := "distributed-" + hex.EncodeToString(suffix)
	q := redisqueue.New[string](client, name, redisqueue.Options[string]{LeaseDuration: lease})
	for i := range keys {
		if err := q.AddContext(context.Background(), keyName(i)); err != nil {
			return err
		}
	}
	q.ShutDown()
	defer cleanup(client, name)

	logPath := filepath.Join(dir, "work.log")
	if err := os.WriteFile(logPath, nil, 0o644); err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	start := func(hang bool) (*child, error) {
		args := []string{"-worker", "-redis", addr, "-queue", name, "-log", logPath}
		if hang {
			args = append(args, "-hang", "-goroutines", "1")
		}
		return startChild(self, args...)
	}
	var children []*child
	defer func() {
		for _, c := range children {
			c.kill()
		}
	}()
	victim, err := start(true)
	if err != nil {
		return err
	}
	children = append(children, victim)
	for range procs - 1 {
		c, err := start(false)
		if err != nil {
			return err
		}
		children = append(children, c)
	}

	// The victim stops for good holding its first key; kill it then, and
	// only then mark it killed in the log: from that line on, the key is
	// free to be handed out again once its lease runs out.
	held, err := waitLog(logPath, 30*time.Second, func(lines []string) (string, bool) {
		for _, l := range lines {
			if f := strings.Fields(l); f[0] == "H" && f[2] == strconv.Itoa(victim.pid()) {
				return f[1], true
			}
		}
		return "", false
	})
	if err != nil {
		return err
	}
	victim.kill()
	f, err := os.OpenFile(logPath, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	worklog.WriteLine(f, 'K', "-", victim.pid(), 0)
	_ = f.Close()
	fmt.Fprintf(out, "killed worker %d (SIGKILL) while it held %s; started a replacement\n", victim.pid(), held)
	replacement, err := start(false)
	if err != nil {
		return err
	}
	children = append(children, replacement)

	// Done when every key completed, and the failing ones twice.
	if _, err := waitLog(logPath, 30*time.Second, func(lines []string) (string, bool) {
		completed := make(map[string]int)
		for _, l := range lines {
			if f := strings.Fields(l); f[0] == "E" {
				completed[f[1]]++
			}
		}
		for i := range keys {
			want := 1
			if i%failEvery == 0 {
				want = 2
			}
			if completed[keyName(i)] < want {
				return "", false
			}
		}
		return "", true
	}); err != nil {
		return err
	}
	for _, c := range children[1:] {
		if err := c.stop(); err != nil {
			return err
		}
	}
	return summarize(out, logPath, keys, procs)
}

func keyName(i int) string { return fmt.Sprintf("key-%03d", i) }

// summarize checks the log and prints the figures that do not depend on
// timing, so that they read the same on every run.
func summarize(out io.Writer, logPath string, keys, procs int) error {
	rep, err := worklog.CheckFile(logPath)
	if err != nil {
		return err
	}
	if failures := rep.Failures(); len(failures) > 0 {
		return fmt.Errorf("the log shows %d problems, the first: %s", len(failures), failures[0])
	}
	retries := rep.Adds // the workers' AddRateLimited calls; the parent's adds are not logged
	fmt.Fprintf(out, "\n%d keys, %d worker processes (one killed, one started after)\n", keys, procs)
	fmt.Fprintf(out, "every key processed:         %d of %d\n", len(rep.PerKey), keys)
	fmt.Fprintf(out, "held by two workers at once: never\n")
	fmt.Fprintf(out, "hand-outs:                   %d\n", rep.Handouts)
	fmt.Fprintf(out, "  first attempts:            %d\n", keys)
	fmt.Fprintf(out, "  retries after a failure:   %d (AddRateLimited, backoff counted in Redis)\n", retries)
	fmt.Fprintf(out, "  after the kill:            %d (its lease expired, the key went to another worker)\n", rep.Reclaimed)
	if extra := rep.Handouts - keys - retries - rep.Reclaimed; extra != 0 {
		fmt.Fprintf(out, "  other:                     %d (a lease expired under load)\n", extra)
	}
	return nil
}

// work is a worker process: it processes keys until its stdin closes (the
// parent's stop, or the parent's death), then drains and exits.
func work(addr, name, logPath string, goroutines int, hang bool) error {
	log, err := worklog.Open(logPath)
	if err != nil {
		return err
	}
	defer log.Close()
	client := redis.NewClient(&redis.Options{Addr: addr})
	defer client.Close()
	q := redisqueue.New[string](client, name, redisqueue.Options[string]{
		LeaseDuration: lease,
		RateLimit:     &redisqueue.RateLimit{Base: 10 * time.Millisecond, Max: 100 * time.Millisecond},
	})
	var wg sync.WaitGroup
	for range goroutines {
		wg.Go(func() {
			for {
				key, shutdown := q.Get()
				if shutdown {
					return
				}
				seq := log.Next()
				log.Line('B', key, seq)
				if hang {
					log.Line('H', key, seq)
					select {} // until the parent's SIGKILL
				}
				n, _ := strconv.Atoi(strings.TrimPrefix(key, "key-"))
				time.Sleep(2 * time.Millisecond) // the work
				if n%failEvery == 0 && q.NumRequeues(key) == 0 {
					retry := log.Next()
					log.Line('A', key, retry)
					q.AddRateLimited(key)
					log.Line('a', key, retry)
				} else {
					q.Forget(key)
				}
				log.Line('E', key, seq)
				q.Done(key)
			}
		})
	}
	_, _ = io.Copy(io.Discard, os.Stdin)
	q.ShutDownWithDrain()
	wg.Wait()
	return nil
}

// child is a worker process. Its stdin is a pipe that the parent closes
// to stop it; the pipe also closes if the parent dies, so no worker
// outlives it.
type child struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	exited chan struct{}
	err    error
}

func startChild(path string, args ...string) (*child, error) {
	cmd := exec.Command(path, args...)
	cmd.Stdout = os.Stderr
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c := &child{cmd: cmd, stdin: stdin, exited: make(chan struct{})}
	go func() {
		c.err = cmd.Wait()
		close(c.exited)
	}()
	return c, nil
}

func (c *child) pid() int { return c.cmd.Process.Pid }

// kill kills the process with SIGKILL and waits until it has exited.
func (c *child) kill() {
	_ = c.cmd.Process.Kill()
	<-c.exited
}

// stop closes the process's stdin and waits for it to drain and exit.
func (c *child) stop() error {
	_ = c.stdin.Close()
	select {
	case <-c.exited:
		if c.err != nil {
			return fmt.Errorf("worker %d: %w", c.pid(), c.err)
		}
		return nil
	case <-time.After(30 * time.Second):
		return fmt.Errorf("worker %d did not stop", c.pid())
	}
}

// waitLog reads the log every 20ms until cond holds for its lines.
func waitLog(path string, timeout time.Duration, cond func(lines []string) (string, bool)) (string, error) {
	deadline := time.Now().Add(timeout)
	for {
		b, err := os.ReadFile(path)
		if err != nil {
			return "", err
		}
		var lines []string
		for l := range strings.Lines(string(b)) {
			if strings.HasSuffix(l, "\n") && len(strings.Fields(l)) == 4 {
				lines = append(lines, l)
			}
		}
		if v, ok := cond(lines); ok {
			return v, nil
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("nothing happened in %v; the log has %d lines", timeout, len(lines))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// cleanup deletes the queue's keys, which matters on a shared Redis.
func cleanup(client *redis.Client, name string) {
	ctx := context.Background()
	iter := client.Scan(ctx, 0, "wq:{"+name+"}:*", 100).Iterator()
	for iter.Next(ctx) {
		client.Del(ctx, iter.Val())
	}
}
