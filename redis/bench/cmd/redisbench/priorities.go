package main

import (
	"fmt"
	"runtime"
	"slices"
	"strings"
	"time"
)

// printPriorityTables prints the tables of -priorities: for each shape,
// each implementation's median keys/s, round trips and server commands
// per key, and the medians of the ratios of runs of the same repetition.
func printPriorityTables(cfg config, redisVersion string, shapes []shape, res results) {
	w := cfg.out
	k := float64(cfg.keys)
	var loads []float64
	for _, sh := range shapes {
		for _, impl := range cfg.impls {
			for _, t := range res.runs[sh][impl] {
				loads = append(loads, t.load)
			}
		}
	}
	slices.Sort(loads)
	loadRange := "-"
	if len(loads) > 0 {
		loadRange = fmt.Sprintf("%.1f to %.1f, median %.1f", loads[0], loads[len(loads)-1], median(loads))
	}
	fmt.Fprintf(w, "Measured with `%s` (in redis/bench) on %s, %s, GOMAXPROCS %d, redis-server %s on loopback; medians of %d runs of %d keys each, a third at each level; 1-minute load average at the runs' ends %s. A ratio is the median of the ratios of the two runs of each repetition, with the smallest and largest.\n\n",
		strings.TrimSpace(cfg.command), time.Now().UTC().Format("2006-01-02"), runtime.Version(), runtime.GOMAXPROCS(0), redisVersion, cfg.reps, cfg.keys, loadRange)

	total := func(t throughput) float64 { return k / (t.add + t.drain).Seconds() }
	// ratio formats the median over repetitions of f(a's run) / f(b's
	// run), and the smallest and largest of those ratios.
	ratio := func(sh shape, a, b string, f func(throughput) float64) string {
		ra, rb := res.runs[sh][a], res.runs[sh][b]
		var v []float64
		for i := range min(len(ra), len(rb)) {
			v = append(v, f(ra[i])/f(rb[i]))
		}
		if len(v) == 0 {
			return "-"
		}
		return fmt.Sprintf("%.2f (%.2f-%.2f)", median(v), slices.Min(v), slices.Max(v))
	}
	fmt.Fprintln(w, "| processes × workers | keys/s: FIFO | priorities | asynq weighted | asynq strict | priorities ÷ FIFO (range) | priorities ÷ asynq weighted | priorities ÷ asynq strict |")
	fmt.Fprintln(w, "|---|--:|--:|--:|--:|--:|--:|--:|")
	for _, sh := range shapes {
		fmt.Fprintf(w, "| %d × %d | %.0f | %.0f | %.0f | %.0f | %s | %s | %s |\n", sh.procs, sh.workers,
			medianOf(res.runs[sh][implOurs], total), medianOf(res.runs[sh][implOursPrio], total),
			medianOf(res.runs[sh][implAsynqWeighted], total), medianOf(res.runs[sh][implAsynqStrict], total),
			ratio(sh, implOursPrio, implOurs, total), ratio(sh, implOursPrio, implAsynqWeighted, total),
			ratio(sh, implOursPrio, implAsynqStrict, total))
	}

	// each formats f's median for every implementation, in cfg.impls'
	// order, separated by " / ".
	each := func(sh shape, format string, f func(throughput) float64) string {
		parts := make([]string, len(cfg.impls))
		for i, impl := range cfg.impls {
			parts[i] = fmt.Sprintf(format, medianOf(res.runs[sh][impl], f))
		}
		return strings.Join(parts, " / ")
	}
	fmt.Fprintf(w, "\nPer key, FIFO / priorities / asynq weighted / asynq strict: round trips counted by a go-redis hook in every worker process, and commands the server ran (INFO commandstats: the scripts' own commands, plus one per EVALSHA or FCALL):\n\n")
	fmt.Fprintln(w, "| processes × workers | round trips per Add | per Get+Done | server commands |")
	fmt.Fprintln(w, "|---|--:|--:|--:|")
	for _, sh := range shapes {
		fmt.Fprintf(w, "| %d × %d | %s | %s | %s |\n", sh.procs, sh.workers,
			each(sh, "%.2f", func(t throughput) float64 { return perKey(t.addCounts.RoundTrips, cfg.keys) }),
			each(sh, "%.2f", func(t throughput) float64 { return perKey(t.getCounts.RoundTrips, cfg.keys) }),
			each(sh, "%.1f", func(t throughput) float64 { return float64(t.serverCommands) / k }))
	}
}
