// Command redisbench measures the Redis-backed queue (module
// github.com/go-workqueue/workqueue/redis) side by side with asynq on one
// local redis-server that it starts itself, and prints markdown tables of
// medians for the README:
//
//   - keys per second through Add, then Get and Done, with 1, 4 and 16
//     workers in each of 1 and 4 worker processes (real OS processes: the
//     command runs copies of itself, each with its own go-redis client);
//   - round trips per Add and per Get+Done, counted by a go-redis hook in
//     each process;
//   - round trips per second sent by an idle worker waiting for a key;
//   - the latency from an Add to a waiting worker receiving the key.
//
// With -priorities it measures instead keys per second, round trips and
// server commands per key of four implementations side by side: our queue
// with Add and Get (FIFO), our queue with AddWithOpts at priorities 10, 0
// and -100 and GetWithPriority, and asynq with a queue per level
// ("critical", "default", "low") served by weights 6, 3 and 1, and with
// StrictPriority. Key n goes to level n%3. The ratios are to our FIFO
// queue's run of the same repetition and shape.
//
// asynq does the nearest equivalent of each step: an enqueue whose task ID
// is the key (so that a key already queued is not queued twice), and a
// server of N concurrency per process that runs a handler doing nothing
// and deletes the task when it returns. Both queues keep their defaults
// (ours: Heartbeat 2s, LeaseDuration 30s; asynq: TaskCheckInterval 1s).
//
// Run it from this module's directory (redis/bench), about 8 minutes:
//
//	go run ./cmd/redisbench -reps 5
//	go run ./cmd/redisbench -priorities -reps 5 -keys 10000 -workers 1,16
//
// The module is separate from bench/, which compares in-memory queues and
// needs no Redis: asynq and the Redis client stay out of that module's
// dependencies, and out of the root and redis modules too.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"math"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

func main() {
	if c := os.Getenv(childEnv); c != "" {
		os.Exit(childMain(c))
	}
	cfg := defaultConfig()
	flag.IntVar(&cfg.reps, "reps", cfg.reps, "repetitions of every measurement; the tables show medians")
	flag.IntVar(&cfg.keys, "keys", cfg.keys, "keys added and processed by each throughput run, split among the processes")
	workers := flag.String("workers", "1,4,16", "workers per process, comma separated")
	procs := flag.String("procs", "1,4", "worker processes, comma separated")
	flag.DurationVar(&cfg.idle, "idle", cfg.idle, "how long to count the commands of an idle worker; 0 skips it")
	flag.IntVar(&cfg.samples, "samples", cfg.samples, "Add-to-Get latency samples of go-workqueue per repetition; 0 skips latency")
	flag.IntVar(&cfg.asynqSamples, "asynq-samples", cfg.asynqSamples, "latency samples of asynq per repetition (each takes about a second: asynq polls)")
	prio := flag.Bool("priorities", false, "compare FIFO, priorities and asynq's weighted and strict queues (keys/s, round trips and server commands per key only)")
	flag.Parse()
	if *prio {
		cfg.impls = prioImpls
	}
	var err error
	if cfg.workers, err = parseInts(*workers); err != nil {
		log.Fatal(err)
	}
	if cfg.procs, err = parseInts(*procs); err != nil {
		log.Fatal(err)
	}
	cfg.command = "go run ./cmd/redisbench " + strings.Join(os.Args[1:], " ")
	if err := run(cfg); err != nil {
		log.Fatal(err)
	}
}

type config struct {
	reps, keys     int
	workers, procs []int
	idle           time.Duration
	// settle is how long an idle worker runs before its commands are
	// counted: longer than a heartbeat, so that the second connection its
	// handle opens at the first heartbeat (the listener's BLPOP and the
	// Get's script then overlap once) is not counted as idle traffic.
	settle                time.Duration
	samples, asynqSamples int
	// rawRequests is how many requests redis-benchmark sends to measure
	// the server's raw rates: SETs and scripts each, and ten times as
	// many pipelined SETs.
	rawRequests int
	// impls are the implementations measured: impls for the default
	// tables, prioImpls for those of -priorities, which skip the idle and
	// latency measurements.
	impls         []string
	command       string
	out, progress io.Writer
}

func defaultConfig() config {
	return config{
		reps: 3, keys: 20000, workers: []int{1, 4, 16}, procs: []int{1, 4},
		idle: 10 * time.Second, settle: 3 * time.Second, samples: 200, asynqSamples: 20,
		rawRequests: 100000, impls: impls, out: os.Stdout, progress: os.Stderr,
	}
}

func parseInts(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q: want positive integers separated by commas", s)
		}
		out = append(out, n)
	}
	return out, nil
}

// shape is one throughput case: procs worker processes of workers each.
type shape struct{ procs, workers int }

// throughput is one run of one shape for one implementation.
type throughput struct {
	add, drain           time.Duration
	addCounts, getCounts snapshot // summed over the processes
	// serverCommands is what the server ran for the run's adds and drain,
	// the scripts' commands included, and the watcher's few LLEN and HLEN
	// (about one each per ms).
	serverCommands int64
	// clientCPU is the CPU time the worker processes used for the adds
	// and the drain, summed, and serverCPU the server's over the same
	// span (the watcher's polls included), in ns.
	clientCPU, serverCPU int64
	processed            int64
	// load is the 1-minute load average at the end of the run.
	load float64
}

type results struct {
	raw     []rawRates // one per repetition
	runs    map[shape]map[string][]throughput
	idle    map[string][]snapshot        // one per repetition, counted over cfg.idle
	latency map[string][][]time.Duration // one list of samples per repetition
}

func run(cfg config) error {
	srv, err := startRedis()
	if err != nil {
		return err
	}
	defer srv.stop()
	watch := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer watch.Close()

	res := results{runs: map[shape]map[string][]throughput{}, idle: map[string][]snapshot{}, latency: map[string][][]time.Duration{}}
	var shapes []shape
	for _, p := range cfg.procs {
		for _, w := range cfg.workers {
			shapes = append(shapes, shape{p, w})
			res.runs[shape{p, w}] = map[string][]throughput{}
		}
	}
	seq := 0
	for rep := range cfg.reps {
		for i, sh := range shapes {
			// Rotate which implementation goes first, so that drift of a
			// noisy machine does not always favour the same one.
			for j := range cfg.impls {
				impl := cfg.impls[(rep+i+j)%len(cfg.impls)]
				seq++
				t, err := runThroughput(watch, srv.Addr, impl, fmt.Sprintf("bench%d", seq), sh, cfg.keys)
				if err != nil {
					return fmt.Errorf("%s, %d×%d: %w", impl, sh.procs, sh.workers, err)
				}
				res.runs[sh][impl] = append(res.runs[sh][impl], t)
				fmt.Fprintf(cfg.progress, "rep %d: %-23s %d×%-2d  %8.0f keys/s  cpu µs/key client %.1f server %.1f  add %.2f rt/key  get+done %.2f rt/key  load %.2f\n",
					rep+1, impl, sh.procs, sh.workers, float64(cfg.keys)/(t.add+t.drain).Seconds(), float64(t.clientCPU)/1e3/float64(cfg.keys), float64(t.serverCPU)/1e3/float64(cfg.keys),
					perKey(t.addCounts.RoundTrips, cfg.keys), perKey(t.getCounts.RoundTrips, cfg.keys), t.load)
			}
		}
		raw, err := measureRaw(srv.Addr, cfg.rawRequests)
		if err != nil {
			return err
		}
		res.raw = append(res.raw, raw)
		fmt.Fprintf(cfg.progress, "rep %d: redis-benchmark, 16 clients: SET %.0f/s, pipelined 16 deep %.0f/s, 3-command script %.0f/s\n", rep+1, raw.set, raw.setPipelined, raw.script)
		if len(cfg.impls) != len(impls) {
			continue // -priorities: no idle or latency measurements
		}
		for j := range impls {
			impl := impls[(rep+j)%len(impls)]
			if cfg.idle > 0 {
				_ = watch.FlushAll(context.Background()).Err()
				s, err := measureIdle(srv.Addr, impl, cfg.settle, cfg.idle)
				if err != nil {
					return fmt.Errorf("%s idle: %w", impl, err)
				}
				res.idle[impl] = append(res.idle[impl], s)
				fmt.Fprintf(cfg.progress, "rep %d: %-12s idle %.2f round trips/s %v\n", rep+1, impl, float64(s.RoundTrips)/cfg.idle.Seconds(), s.Commands)
			}
			n := cfg.samples
			if impl == implAsynq {
				n = cfg.asynqSamples
			}
			if cfg.samples > 0 && n > 0 {
				_ = watch.FlushAll(context.Background()).Err()
				lat, err := measureLatency(srv.Addr, impl, n)
				if err != nil {
					return fmt.Errorf("%s latency: %w", impl, err)
				}
				res.latency[impl] = append(res.latency[impl], lat)
				fmt.Fprintf(cfg.progress, "rep %d: %-12s Add→Get median %v p99 %v\n", rep+1, impl, quantile(lat, 0.5), quantile(lat, 0.99))
			}
		}
	}
	if len(cfg.impls) != len(impls) {
		printPriorityTables(cfg, srv.version(), shapes, res)
	} else {
		printTables(cfg, srv.version(), shapes, res)
	}
	return nil
}

// loadAverage returns the 1-minute load average, or NaN where
// /proc/loadavg cannot be read.
func loadAverage() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return math.NaN()
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return math.NaN()
	}
	l, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return math.NaN()
	}
	return l
}

func perKey(n int64, keys int) float64 { return float64(n) / float64(keys) }

// runThroughput runs one shape for one implementation on a flushed Redis:
// the processes add cfg.keys keys between them, each from as many
// goroutines as it has workers; once all are added, they start their
// workers, and the run ends when Redis shows nothing queued or being
// processed. Adding and draining are timed apart so that asynq, which
// polls an empty queue once a second, is measured on its throughput and
// not on its idle wait; the Add-to-Get latency is measured on its own.
func runThroughput(watch *redis.Client, addr, impl, name string, sh shape, keys int) (throughput, error) {
	var t throughput
	ctx := context.Background()
	if err := watch.FlushAll(ctx).Err(); err != nil {
		return t, err
	}
	exe, err := os.Executable()
	if err != nil {
		return t, err
	}
	type child struct {
		cmd *exec.Cmd
		in  io.WriteCloser
		out *bufio.Scanner
	}
	var children []child
	defer func() {
		for _, c := range children {
			_ = c.in.Close()
			_ = c.cmd.Wait()
		}
	}()
	for p := range sh.procs {
		first, last := keys*p/sh.procs, keys*(p+1)/sh.procs
		cc, _ := json.Marshal(childConfig{Impl: impl, Addr: addr, Queue: name, Workers: sh.workers, First: first, Count: last - first})
		cmd := exec.Command(exe)
		cmd.Env = append(os.Environ(), childEnv+"="+string(cc))
		cmd.Stderr = os.Stderr
		in, err := cmd.StdinPipe()
		if err != nil {
			return t, err
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			return t, err
		}
		if err := cmd.Start(); err != nil {
			return t, err
		}
		children = append(children, child{cmd, in, bufio.NewScanner(out)})
	}
	// tell gives every child an order and, unless want is empty, waits for
	// each one's report of that phase.
	tell := func(order, want string) ([]report, error) {
		for _, c := range children {
			if order != "" {
				if _, err := io.WriteString(c.in, order+"\n"); err != nil {
					return nil, err
				}
			}
		}
		if want == "" {
			return nil, nil
		}
		var reports []report
		for _, c := range children {
			if !c.out.Scan() {
				return nil, fmt.Errorf("a worker process ended before %q: %v", want, c.out.Err())
			}
			var r report
			if err := json.Unmarshal(c.out.Bytes(), &r); err != nil {
				return nil, fmt.Errorf("worker process said %q: %w", c.out.Text(), err)
			}
			if r.Err != "" {
				return nil, errors.New(r.Err)
			}
			if r.Phase != want {
				return nil, fmt.Errorf("worker process reported %q, want %q", r.Phase, want)
			}
			reports = append(reports, r)
		}
		return reports, nil
	}
	if _, err := tell("", "ready"); err != nil {
		return t, err
	}

	commandsBefore, err := serverCommands(ctx, watch)
	if err != nil {
		return t, err
	}
	cpuBefore, err := serverCPU(ctx, watch)
	if err != nil {
		return t, err
	}
	start := time.Now()
	added, err := tell("add", "added")
	if err != nil {
		return t, err
	}
	t.add = time.Since(start)
	for _, r := range added {
		t.addCounts = t.addCounts.plus(r.Counts)
		t.clientCPU += r.CPU
	}

	start = time.Now()
	if _, err := tell("drain", ""); err != nil {
		return t, err
	}
	deadline := start.Add(5 * time.Minute)
	for {
		n, err := outstanding(ctx, watch, impl, name)
		if err != nil {
			return t, err
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			return t, fmt.Errorf("%d keys still outstanding after 5 minutes", n)
		}
		time.Sleep(time.Millisecond)
	}
	t.drain = time.Since(start)
	commandsAfter, err := serverCommands(ctx, watch)
	if err != nil {
		return t, err
	}
	t.serverCommands = commandsAfter - commandsBefore
	cpuAfter, err := serverCPU(ctx, watch)
	if err != nil {
		return t, err
	}
	t.serverCPU = cpuAfter - cpuBefore
	stopped, err := tell("stop", "stopped")
	if err != nil {
		return t, err
	}
	for _, r := range stopped {
		t.getCounts = t.getCounts.plus(r.Counts)
		t.processed += r.Processed
		t.clientCPU += r.CPU
	}
	if t.processed != int64(keys) {
		return t, fmt.Errorf("%d keys processed, want %d", t.processed, keys)
	}
	t.load = loadAverage()
	return t, nil
}

func (s snapshot) plus(o snapshot) snapshot {
	sum := snapshot{RoundTrips: s.RoundTrips + o.RoundTrips, Commands: make(map[string]int64)}
	for k, v := range s.Commands {
		sum.Commands[k] += v
	}
	for k, v := range o.Commands {
		sum.Commands[k] += v
	}
	return sum
}

// measureIdle starts one worker on an empty queue, lets it settle, and
// counts what its client sends over d.
func measureIdle(addr, impl string, settle, d time.Duration) (snapshot, error) {
	client := redis.NewClient(&redis.Options{Addr: addr})
	defer client.Close()
	count := newCounter()
	client.AddHook(count)
	q := newQueue(impl, client, "idle")
	q.start(1, func(string) {})
	defer q.stop()
	time.Sleep(settle)
	before := count.snapshot()
	time.Sleep(d)
	return count.snapshot().sub(before), nil
}

// measureLatency adds n keys one at a time from a producer with its own
// client, each once the consumer's single worker has been waiting for
// 20ms, and returns how long each took from the start of the Add to the
// worker receiving it. Producer and consumer share this process's clock.
func measureLatency(addr, impl string, n int) ([]time.Duration, error) {
	consumerClient := redis.NewClient(&redis.Options{Addr: addr})
	defer consumerClient.Close()
	producerClient := redis.NewClient(&redis.Options{Addr: addr})
	defer producerClient.Close()
	consumer := newQueue(impl, consumerClient, "latency")
	got := make(chan time.Time, 1)
	consumer.start(1, func(string) { got <- time.Now() })
	defer consumer.stop()
	producer := newQueue(impl, producerClient, "latency")
	defer producer.stop()

	const warmup = 2 // loads the scripts and the connections
	var lat []time.Duration
	for i := range n + warmup {
		time.Sleep(20 * time.Millisecond)
		start := time.Now()
		if err := producer.add(context.Background(), key(i), 0); err != nil {
			return nil, err
		}
		select {
		case at := <-got:
			if i >= warmup {
				lat = append(lat, at.Sub(start))
			}
		case <-time.After(30 * time.Second):
			return nil, fmt.Errorf("key %d not received in 30s", i)
		}
	}
	return lat, nil
}

func quantile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, int(math.Ceil(q*float64(len(s))))-1)]
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// medianOf returns the median over runs of f.
func medianOf(runs []throughput, f func(throughput) float64) float64 {
	v := make([]float64, len(runs))
	for i, r := range runs {
		v[i] = f(r)
	}
	return median(v)
}

func printTables(cfg config, redisVersion string, shapes []shape, res results) {
	w := cfg.out
	k := float64(cfg.keys)
	fmt.Fprintf(w, "Measured with `%s` (in redis/bench) on %s, %s, GOMAXPROCS %d, redis-server %s on loopback; medians of %d runs of %d keys each; the ratio is the median of the ratios of the runs made back to back.\n\n",
		strings.TrimSpace(cfg.command), time.Now().UTC().Format("2006-01-02"), runtime.Version(), runtime.GOMAXPROCS(0), redisVersion, cfg.reps, cfg.keys)

	fmt.Fprintln(w, "| processes × workers | go-workqueue keys/s | asynq keys/s | ratio (paired) | Add/s: ours / asynq | Get+Done/s: ours / asynq |")
	fmt.Fprintln(w, "|---|--:|--:|--:|--:|--:|")
	for _, sh := range shapes {
		o, a := res.runs[sh][implOurs], res.runs[sh][implAsynq]
		total := func(t throughput) float64 { return k / (t.add + t.drain).Seconds() }
		adds := func(t throughput) float64 { return k / t.add.Seconds() }
		drains := func(t throughput) float64 { return k / t.drain.Seconds() }
		// The ratio is the median of each repetition's ratio: the two
		// runs of a repetition are back to back, so that they share the
		// machine's state, which drifts by a factor of two on a noisy
		// machine between repetitions.
		var ratios []float64
		for i := range min(len(o), len(a)) {
			ratios = append(ratios, total(o[i])/total(a[i]))
		}
		fmt.Fprintf(w, "| %d × %d | %.0f | %.0f | %.2f | %.0f / %.0f | %.0f / %.0f |\n", sh.procs, sh.workers,
			medianOf(o, total), medianOf(a, total), median(ratios),
			medianOf(o, adds), medianOf(a, adds), medianOf(o, drains), medianOf(a, drains))
	}

	fmt.Fprintln(w, "\nRound trips per key, counted by a go-redis hook in every worker process (one per command sent alone or per pipeline):")
	fmt.Fprintln(w, "\n| processes × workers | per Add: ours / asynq | per Get+Done: ours / asynq |")
	fmt.Fprintln(w, "|---|--:|--:|")
	for _, sh := range shapes {
		o, a := res.runs[sh][implOurs], res.runs[sh][implAsynq]
		add := func(t throughput) float64 { return perKey(t.addCounts.RoundTrips, cfg.keys) }
		get := func(t throughput) float64 { return perKey(t.getCounts.RoundTrips, cfg.keys) }
		fmt.Fprintf(w, "| %d × %d | %.3f / %.3f | %.3f / %.3f |\n", sh.procs, sh.workers,
			medianOf(o, add), medianOf(a, add), medianOf(o, get), medianOf(a, get))
	}

	rawMedian := func(f func(rawRates) float64) float64 {
		v := make([]float64, len(res.raw))
		for i, r := range res.raw {
			v[i] = f(r)
		}
		return median(v)
	}
	set, pipelined, script := rawMedian(func(r rawRates) float64 { return r.set }),
		rawMedian(func(r rawRates) float64 { return r.setPipelined }), rawMedian(func(r rawRates) float64 { return r.script })
	fmt.Fprintf(w, "\nThe raw limit of the same redis-server in the same run, redis-benchmark with 16 clients (medians): SET %.0f/s one at a time, %.0f/s pipelined 16 deep; a Lua script of 3 commands %.0f/s. Commands the server ran per key (INFO commandstats: the scripts' own commands, plus one per EVALSHA or FCALL), and the server's command rate during the run as a fraction of the pipelined SET rate:\n\n", set, pipelined, script)
	fmt.Fprintln(w, "| processes × workers | server commands per key: ours / asynq | ours: keys/s ÷ (pipelined SET/s ÷ 3) | ours: server commands/s ÷ pipelined SET/s |")
	fmt.Fprintln(w, "|---|--:|--:|--:|")
	for _, sh := range shapes {
		o, a := res.runs[sh][implOurs], res.runs[sh][implAsynq]
		perKeyServer := func(t throughput) float64 { return float64(t.serverCommands) / k }
		total := func(t throughput) float64 { return k / (t.add + t.drain).Seconds() }
		rate := func(t throughput) float64 { return float64(t.serverCommands) / (t.add + t.drain).Seconds() }
		fmt.Fprintf(w, "| %d × %d | %.1f / %.1f | %.3f | %.2f |\n", sh.procs, sh.workers,
			medianOf(o, perKeyServer), medianOf(a, perKeyServer), medianOf(o, total)/(pipelined/3), medianOf(o, rate)/pipelined)
	}

	fmt.Fprintln(w, "\nCPU time per key (µs), user and system: of the worker processes (getrusage, summed over them) and of the redis-server (INFO cpu, the watcher's polls included), over the adds and the drain:")
	fmt.Fprintln(w, "\n| processes × workers | worker processes: ours / asynq | redis-server: ours / asynq | both: ours / asynq |")
	fmt.Fprintln(w, "|---|--:|--:|--:|")
	for _, sh := range shapes {
		o, a := res.runs[sh][implOurs], res.runs[sh][implAsynq]
		client := func(t throughput) float64 { return float64(t.clientCPU) / 1e3 / k }
		server := func(t throughput) float64 { return float64(t.serverCPU) / 1e3 / k }
		both := func(t throughput) float64 { return float64(t.clientCPU+t.serverCPU) / 1e3 / k }
		fmt.Fprintf(w, "| %d × %d | %.1f / %.1f | %.1f / %.1f | %.1f / %.1f |\n", sh.procs, sh.workers,
			medianOf(o, client), medianOf(a, client), medianOf(o, server), medianOf(a, server), medianOf(o, both), medianOf(a, both))
	}

	fmt.Fprintln(w, "\nCommands per key of the last repetition, by name:")
	fmt.Fprintln(w)
	for _, sh := range shapes {
		for _, impl := range impls {
			runs := res.runs[sh][impl]
			if len(runs) == 0 {
				continue
			}
			last := runs[len(runs)-1]
			fmt.Fprintf(w, "- %d × %d %s: Add %s; Get+Done %s\n", sh.procs, sh.workers, impl,
				breakdown(last.addCounts, k), breakdown(last.getCounts, k))
		}
	}

	if len(res.idle) == 0 && len(res.latency) == 0 {
		return
	}
	fmt.Fprintf(w, "\nAn idle worker (one worker waiting on an empty queue, defaults), and the time from the start of an Add to a waiting worker receiving the key (%d samples per repetition for go-workqueue, %d for asynq; the medians over the repetitions of each one's median and p99):\n\n",
		cfg.samples, cfg.asynqSamples)
	fmt.Fprintln(w, "| | idle: round trips/s | idle: commands sent | Add → waiting worker: median | p99 |")
	fmt.Fprintln(w, "|---|--:|---|--:|--:|")
	for _, impl := range impls {
		var rates []float64
		var sum snapshot
		for _, s := range res.idle[impl] {
			rates = append(rates, float64(s.RoundTrips)/cfg.idle.Seconds())
			sum = sum.plus(s)
		}
		// The median of the repetitions' p99s rather than the p99 of
		// all samples, so that one repetition hit by the noise of the
		// machine does not make the column.
		var p50s, p99s []float64
		for _, lat := range res.latency[impl] {
			p50s = append(p50s, float64(quantile(lat, 0.5)))
			p99s = append(p99s, float64(quantile(lat, 0.99)))
		}
		idle, sent := "-", "-"
		if len(rates) > 0 {
			idle = fmt.Sprintf("%.2f", median(rates))
			sent = breakdown(sum, float64(len(rates))*cfg.idle.Seconds()) + " per s"
		}
		p50, p99 := "-", "-"
		if len(p50s) > 0 {
			p50 = time.Duration(median(p50s)).Round(10 * time.Microsecond).String()
			p99 = time.Duration(median(p99s)).Round(10 * time.Microsecond).String()
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s |\n", impl, idle, sent, p50, p99)
	}
}

// breakdown lists the commands counted in s divided by per, most first.
func breakdown(s snapshot, per float64) string {
	names := make([]string, 0, len(s.Commands))
	for name := range s.Commands {
		names = append(names, name)
	}
	slices.SortFunc(names, func(a, b string) int {
		if c := int(s.Commands[b] - s.Commands[a]); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, len(names))
	for i, name := range names {
		parts[i] = fmt.Sprintf("%s %.3g", name, float64(s.Commands[name])/per)
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}
