package redisqueue

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/go-workqueue/workqueue/redis/redistest"
)

// BenchmarkAddGetDone measures what one handle costs its own process per
// key, as redisbench's worker process runs it: 16 goroutines add the keys,
// then 16 workers Get and Done them. Besides the wall time per key it
// reports the process's CPU time per key (user and system, from
// getrusage: the redis-server's is not counted), so that a profile of the
// client (-cpuprofile, -memprofile) can be read per key.
func BenchmarkAddGetDone(b *testing.B) {
	s := redistest.Start(b, redistest.Options{})
	client := redis.NewClient(&redis.Options{Addr: s.Addr, PoolSize: 64})
	b.Cleanup(func() { client.Close() })
	const workers = 16
	q := New(client, fmt.Sprintf("bench-%d", queueSeq.Add(1)), Options[string]{})
	b.Cleanup(q.ShutDownWithDrain)
	ctx := context.Background()
	keys := make([]string, 0, 10000)
	for i := range cap(keys) {
		keys = append(keys, fmt.Sprintf("key-%08d", i))
	}
	b.ReportAllocs()
	b.ResetTimer()
	start, cpu, server, calls := time.Now(), cpuTime(), serverCPU(b, client), countFcalls(b, client)
	var total int
	for b.Loop() {
		var next atomic.Int64
		var wg sync.WaitGroup
		for range workers {
			wg.Go(func() {
				for i := next.Add(1) - 1; i < int64(len(keys)); i = next.Add(1) - 1 {
					if err := q.AddContext(ctx, keys[i]); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		var left atomic.Int64
		left.Store(int64(len(keys)))
		for range workers {
			wg.Go(func() {
				for left.Add(-1) >= 0 {
					item, shutdown := q.Get()
					if shutdown {
						b.Error("shut down")
						return
					}
					q.Done(item)
				}
			})
		}
		wg.Wait()
		total += len(keys)
	}
	b.ReportMetric(float64(total)/time.Since(start).Seconds(), "keys/s")
	b.ReportMetric(float64((cpuTime()-cpu).Nanoseconds())/float64(total), "cpu-ns/key")
	b.ReportMetric(float64((serverCPU(b, client)-server).Nanoseconds())/float64(total), "server-cpu-ns/key")
	b.ReportMetric(float64(countFcalls(b, client)-calls)/float64(total), "fcalls/key")
	if testing.Verbose() {
		b.Log(client.Info(ctx, "commandstats").Val())
	}
	b.ReportMetric(0, "ns/op")
}

// cpuTime returns the CPU time the process has used, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// serverCPU returns the CPU time the redis-server has used, user and
// system, from INFO cpu.
func serverCPU(b *testing.B, client *redis.Client) time.Duration {
	info, err := client.Info(context.Background(), "cpu").Result()
	if err != nil {
		b.Fatal(err)
	}
	var total float64
	for _, field := range []string{"used_cpu_sys", "used_cpu_user"} {
		v, err := strconv.ParseFloat(infoField(info, field), 64)
		if err != nil {
			b.Fatal(err)
		}
		total += v
	}
	return time.Duration(total * float64(time.Second))
}

// countFcalls returns how many FCALLs the server has run.
func countFcalls(b *testing.B, client *redis.Client) int64 {
	for line := range strings.SplitSeq(client.Info(context.Background(), "commandstats").Val(), "\n") {
		if rest, ok := strings.CutPrefix(line, "cmdstat_fcall:calls="); ok {
			n, _, _ := strings.Cut(rest, ",")
			v, err := strconv.ParseInt(n, 10, 64)
			if err != nil {
				b.Fatal(err)
			}
			return v
		}
	}
	return 0
}
