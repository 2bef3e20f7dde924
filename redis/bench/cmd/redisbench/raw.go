package main

import (
	"context"
	"encoding/csv"
	"fmt"
	"os/exec"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// rawRates are the raw limits of the run's redis-server, measured with
// redis-benchmark from 16 clients, as the queues' runs have 16 workers:
// plain SETs one at a time and pipelined 16 deep, and a Lua script of
// three commands (the shape of a queue's script, but short) one at a time.
type rawRates struct {
	set, setPipelined, script float64 // per second
}

// measureRaw runs redis-benchmark against addr, with n requests of each
// kind and 10n pipelined.
func measureRaw(addr string, n int) (rawRates, error) {
	host, port, _ := strings.Cut(addr, ":")
	run := func(requests int, extra ...string) (float64, error) {
		args := append([]string{"-h", host, "-p", port, "-c", "16", "-n", strconv.Itoa(requests), "--csv"}, extra...)
		out, err := exec.Command("redis-benchmark", args...).Output()
		if err != nil {
			return 0, fmt.Errorf("redis-benchmark %v: %w", args, err)
		}
		// The CSV has a header line, then "test","rps",... for each test.
		rows, err := csv.NewReader(strings.NewReader(string(out))).ReadAll()
		if err != nil {
			return 0, fmt.Errorf("redis-benchmark %v: %w: %q", args, err, out)
		}
		for _, row := range rows {
			if len(row) >= 2 && row[0] != "test" {
				return strconv.ParseFloat(row[1], 64)
			}
		}
		return 0, fmt.Errorf("redis-benchmark %v printed no rate: %q", args, out)
	}
	var r rawRates
	var err error
	if r.set, err = run(n, "-t", "set"); err != nil {
		return r, err
	}
	if r.setPipelined, err = run(10*n, "-t", "set", "-P", "16"); err != nil {
		return r, err
	}
	r.script, err = run(n, "eval", "redis.call('SET', KEYS[1], ARGV[1]); redis.call('INCR', 'raw:n'); return redis.call('GET', KEYS[1])", "1", "raw:{k}", "v")
	return r, err
}

// serverCommands returns how many commands the server ran since it
// started, counted by INFO commandstats: those run by scripts and
// functions included, each counting once more as its EVALSHA or FCALL.
func serverCommands(ctx context.Context, client *redis.Client) (int64, error) {
	info, err := client.Info(ctx, "commandstats").Result()
	if err != nil {
		return 0, err
	}
	var total int64
	for line := range strings.SplitSeq(info, "\n") {
		_, stats, ok := strings.Cut(line, ":calls=")
		if !ok || !strings.HasPrefix(line, "cmdstat_") {
			continue
		}
		calls, _, _ := strings.Cut(stats, ",")
		n, err := strconv.ParseInt(calls, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("INFO commandstats: %q: %w", line, err)
		}
		total += n
	}
	return total, nil
}

// serverCPU returns the CPU time, user and system, the server has used
// since it started, in ns, from INFO cpu.
func serverCPU(ctx context.Context, client *redis.Client) (int64, error) {
	info, err := client.Info(ctx, "cpu").Result()
	if err != nil {
		return 0, err
	}
	var total float64
	for line := range strings.SplitSeq(info, "\n") {
		name, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || (name != "used_cpu_sys" && name != "used_cpu_user") {
			continue
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return 0, fmt.Errorf("INFO cpu: %q: %w", line, err)
		}
		total += f
	}
	return int64(total * 1e9), nil
}
