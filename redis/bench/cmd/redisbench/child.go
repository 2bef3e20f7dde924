package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/redis/go-redis/v9"
)

// childEnv, when set, makes the program (or its test binary) a worker
// process: the variable holds its childConfig as JSON. An environment
// variable rather than a flag, so that the test binary, whose flags are
// the testing package's, can be re-executed the same way.
const childEnv = "REDISBENCH_CHILD"

// childConfig is one process's share of a run.
type childConfig struct {
	Impl    string `json:"impl"`
	Addr    string `json:"addr"`
	Queue   string `json:"queue"`
	Workers int    `json:"workers"`
	// First and Count are the keys this process adds: key(First) up to
	// key(First+Count-1).
	First int `json:"first"`
	Count int `json:"count"`
}

// report is a line a child writes on its standard output when a phase
// ends.
type report struct {
	Phase     string   `json:"phase"` // ready, added, stopped
	Counts    snapshot `json:"counts"`
	Processed int64    `json:"processed"`
	// CPU is the CPU time (user and system) the process used in the
	// phase, in ns.
	CPU int64  `json:"cpu"`
	Err string `json:"err,omitempty"`
}

func key(i int) string { return fmt.Sprintf("key-%08d", i) }

// childMain runs a worker process. It reads its orders from standard
// input, one a line: "add" adds its keys with Workers goroutines and
// reports the commands sent; "drain" starts Workers workers; "stop"
// reports the commands sent since "drain" and the keys processed, then
// stops the workers and exits. The commands are counted before the
// workers stop, so that shutting down is not counted.
func childMain(config string) int {
	var cfg childConfig
	if err := json.Unmarshal([]byte(config), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "redisbench child:", err)
		return 2
	}
	client := redis.NewClient(&redis.Options{Addr: cfg.Addr, PoolSize: 4 * cfg.Workers})
	defer client.Close()
	count := newCounter()
	client.AddHook(count)
	q := newQueue(cfg.Impl, client, cfg.Queue)

	out := json.NewEncoder(os.Stdout)
	send := func(r report) {
		if err := out.Encode(r); err != nil {
			os.Exit(3) // the parent is gone
		}
	}
	send(report{Phase: "ready"})

	var processed atomic.Int64
	var drainStart snapshot
	var drainCPU int64
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		switch in.Text() {
		case "add":
			before, cpu := count.snapshot(), processCPU()
			err := addKeys(q, cfg)
			r := report{Phase: "added", Counts: count.snapshot().sub(before), CPU: processCPU() - cpu}
			if err != nil {
				r.Err = err.Error()
			}
			send(r)
		case "drain":
			drainStart, drainCPU = count.snapshot(), processCPU()
			q.start(cfg.Workers, func(string) { processed.Add(1) })
		case "stop":
			counts, cpu := count.snapshot().sub(drainStart), processCPU()-drainCPU
			q.stop()
			send(report{Phase: "stopped", Counts: counts, Processed: processed.Load(), CPU: cpu})
			return 0
		}
	}
	return 0
}

// addKeys adds the process's keys from cfg.Workers goroutines, each taking
// the next key not yet added, as the event handlers of a controller add
// keys concurrently; key n at level n%3.
func addKeys(q queue, cfg childConfig) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, cfg.Workers)
	for range cfg.Workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= cfg.Count {
					return
				}
				n := cfg.First + i
				if err := q.add(context.Background(), key(n), n%3); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// processCPU returns the CPU time, user and system, this process has used
// so far, in ns; 0 where getrusage fails.
func processCPU() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
