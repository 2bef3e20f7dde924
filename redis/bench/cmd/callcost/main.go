// Command callcost runs fifocost binaries (../fifocost, built from two
// commits to compare) one after the other, -reps times, against one
// running redis-server, and prints for each the server's microseconds
// per call of each function (FCALL) or script (EVALSHA), from SLOWLOG at
// a threshold of 0, the INFO commandstats usec_per_call of FCALL and
// EVALSHA, and the commands the server ran per key. -shas names a file
// of "SHA NAME" lines that names the scripts of a build before Functions.
//
//	go run ./cmd/callcost -addr 127.0.0.1:6379 -keys 3000 /tmp/fifocost-old /tmp/fifocost-new
//
// It runs FLUSHALL and CONFIG SET on the server: give it one of its own.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

func main() {
	addrFlag := flag.String("addr", "127.0.0.1:6379", "the redis-server")
	keysFlag := flag.Int("keys", 3000, "keys per fifocost run")
	repsFlag := flag.Int("reps", 3, "runs of each binary, interleaved")
	shaFile := flag.String("shas", "", `a file of "SHA NAME" lines naming scripts`)
	flag.Parse()
	addr, keys, reps := *addrFlag, strconv.Itoa(*keysFlag), *repsFlag
	bins := flag.Args()
	shas := map[string]string{}
	if *shaFile != "" {
		f, err := os.Open(*shaFile)
		if err != nil {
			log.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			sha, name, _ := strings.Cut(sc.Text(), " ")
			shas[sha] = name
		}
		f.Close()
	}
	ctx := context.Background()
	c := redis.NewClient(&redis.Options{Addr: addr})
	c.ConfigSet(ctx, "slowlog-log-slower-than", "0")
	c.ConfigSet(ctx, "slowlog-max-len", "1000000")
	type agg struct{ n, us int64 }
	total := map[string]map[string]*agg{}
	cmdTotal := map[string]map[string]*agg{}
	for rep := range reps {
		for _, bin := range bins {
			c.FlushAll(ctx)
			c.ConfigResetStat(ctx)
			c.SlowLogReset(ctx)
			out, err := exec.Command(bin, "-addr", addr, "-keys", keys, "-name", fmt.Sprintf("fc%d", rep)).CombinedOutput()
			if err != nil {
				log.Fatalf("%s: %v\n%s", bin, err, out)
			}
			logs, err := c.SlowLogGet(ctx, -1).Result()
			if err != nil {
				log.Fatal(err)
			}
			if total[bin] == nil {
				total[bin], cmdTotal[bin] = map[string]*agg{}, map[string]*agg{}
			}
			for _, l := range logs {
				if len(l.Args) < 2 {
					continue
				}
				var name string
				switch strings.ToLower(l.Args[0]) {
				case "evalsha":
					name = shas[l.Args[1]]
					if name == "" {
						name = "evalsha " + l.Args[1]
					}
				case "fcall":
					name = l.Args[1]
				default:
					continue
				}
				a := total[bin][name]
				if a == nil {
					a = &agg{}
					total[bin][name] = a
				}
				a.n++
				a.us += l.Duration.Microseconds()
			}
			stats := c.Info(ctx, "commandstats").Val()
			for line := range strings.SplitSeq(stats, "\n") {
				rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_")
				if !ok {
					continue
				}
				cmd, rest, _ := strings.Cut(rest, ":")
				fields := map[string]string{}
				for kv := range strings.SplitSeq(rest, ",") {
					k, v, _ := strings.Cut(kv, "=")
					fields[k] = v
				}
				n, _ := strconv.ParseInt(fields["calls"], 10, 64)
				us, _ := strconv.ParseInt(fields["usec"], 10, 64)
				a := cmdTotal[bin][cmd]
				if a == nil {
					a = &agg{}
					cmdTotal[bin][cmd] = a
				}
				a.n += n
				a.us += us
			}
		}
	}
	for _, bin := range bins {
		fmt.Printf("== %s (%d reps of %s keys)\n", bin, reps, keys)
		var names []string
		for n := range total[bin] {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			a := total[bin][n]
			fmt.Printf("  slowlog %-14s calls=%d usec_per_call=%.2f\n", n, a.n/int64(reps), float64(a.us)/float64(a.n))
		}
		var cmds []string
		var all int64
		for n := range cmdTotal[bin] {
			cmds = append(cmds, n)
		}
		sort.Strings(cmds)
		for _, n := range cmds {
			a := cmdTotal[bin][n]
			switch n {
			case "evalsha", "eval", "fcall", "function|load", "script|load":
				fmt.Printf("  commandstats %-14s calls=%d usec_per_call=%.2f\n", n, a.n/int64(reps), float64(a.us)/float64(a.n))
			case "info", "config|resetstat", "config|set", "slowlog|reset", "slowlog|get", "flushall", "client|setinfo", "hello", "blpop", "ping":
			default:
				all += a.n
			}
		}
		fmt.Printf("  commands run by the scripts/functions per key: %.2f\n", float64(all)/float64(reps)/mustAtoi(keys))
	}
}

func mustAtoi(s string) float64 {
	n, _ := strconv.Atoi(s)
	return float64(n)
}
