// Command worker is one process of the redis queue's multi-process tests:
// it adds keys to a shared queue and processes them with several
// goroutines, recording every add and every holding in a shared log (see
// package worklog) that the test checks once all processes are done. It
// uses only the client-go-shaped methods (Add, Get, Done), which retry
// while Redis is unreachable, as a controller would.
//
// It runs until SIGTERM, then waits for its adds to return, drains its
// holdings with ShutDownWithDrain and exits 0. With -hang-after N, its
// first worker goroutine stops for good holding its Nth key, after an H
// line, so that the test can kill the process with a key surely in flight.
//
// With -priorities, it adds each key at the priority worklog.Priority
// gives it (with Add or AddWithOpts), its workers take keys with
// GetWithPriority, and a key handed out at another priority gets a P line
// after its B line.
package main

import (
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/go-workqueue/workqueue"
	redisqueue "github.com/go-workqueue/workqueue/redis"
	"github.com/go-workqueue/workqueue/redis/internal/worklog"
)

func main() {
	addr := flag.String("redis", "", "Redis address; with -cluster, the cluster's node addresses separated by commas")
	cluster := flag.Bool("cluster", false, "Redis is a Redis Cluster")
	name := flag.String("queue", "mp", "queue name")
	logPath := flag.String("log", "", "shared log file")
	keys := flag.Int("keys", 1000, "keys k00000.. to add")
	adders := flag.Int("adders", 1, "goroutines adding every key of the shard once between them")
	shard := flag.Int("shard", 0, "add only the keys whose number modulo -shards is this")
	shards := flag.Int("shards", 1, "number of shards the keys are split into")
	workers := flag.Int("workers", 4, "goroutines processing keys")
	lease := flag.Duration("lease", time.Second, "LeaseDuration")
	work := flag.Duration("work", 2*time.Millisecond, "longest random work per key")
	readd := flag.Float64("readd", 0, "chance that a worker adds its key again while processing it")
	hangAfter := flag.Int("hang-after", 0, "the first worker stops for good holding its Nth key")
	addFirst := flag.Bool("add-first", false, "start processing once this process's adds returned")
	partitions := flag.Int("partitions", 0, "Options.Partitions")
	priorities := flag.Bool("priorities", false, "add at worklog.Priority's priorities and check them at each hand-out")
	flag.Parse()
	if *addr == "" || *logPath == "" {
		fmt.Fprintln(os.Stderr, "worker: -redis and -log are required")
		os.Exit(2)
	}

	// SIGTERM must not kill the process before the handler is in place:
	// the test sends it only after the D line, written later.
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)

	log, err := worklog.Open(*logPath)
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		os.Exit(1)
	}
	var client redis.UniversalClient = redis.NewClient(&redis.Options{Addr: *addr})
	if *cluster {
		client = redis.NewClusterClient(&redis.ClusterOptions{Addrs: strings.Split(*addr, ",")})
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	q := redisqueue.New[string](client, *name, redisqueue.Options[string]{
		LeaseDuration: *lease,
		Logger:        logger,
		Partitions:    *partitions,
	})

	add := func(key string) {
		seq := log.Next()
		log.Line('A', key, seq)
		if priority, plain := worklog.Priority(key); *priorities && !plain {
			q.AddWithOpts(workqueue.AddOpts{Priority: &priority}, key)
		} else {
			q.Add(key)
		}
		log.Line('a', key, seq)
	}

	var adding sync.WaitGroup
	for a := range *adders {
		adding.Go(func() {
			for i := a; i < *keys; i += *adders {
				if i%*shards == *shard {
					add(fmt.Sprintf("k%05d", i))
				}
			}
		})
	}
	go func() {
		adding.Wait()
		log.Line('D', "-", 0)
	}()

	var working sync.WaitGroup
	for w := range *workers {
		rng := rand.New(rand.NewPCG(uint64(os.Getpid()), uint64(w)))
		working.Go(func() {
			if *addFirst {
				adding.Wait()
			}
			for n := 1; ; n++ {
				var (
					key      string
					priority int
					shutdown bool
				)
				if *priorities {
					key, priority, shutdown = q.GetWithPriority()
				} else {
					key, shutdown = q.Get()
				}
				if shutdown {
					return
				}
				seq := log.Next()
				log.Line('B', key, seq)
				if want, _ := worklog.Priority(key); *priorities && priority != want {
					logger.Error("worker: handed out at the wrong priority", "key", key, "got", priority, "want", want)
					log.Line('P', key, seq)
				}
				if w == 0 && n == *hangAfter {
					log.Line('H', key, seq)
					select {} // until SIGKILL
				}
				if *work > 0 {
					time.Sleep(time.Duration(rng.Int64N(int64(*work))))
				}
				if rng.Float64() < *readd {
					add(key)
				}
				log.Line('E', key, seq)
				q.Done(key)
			}
		})
	}

	<-term
	adding.Wait()
	q.ShutDownWithDrain()
	working.Wait()
	if err := client.Close(); err != nil {
		logger.Error("worker: closing the client", "err", err)
	}
	if err := log.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		os.Exit(1)
	}
}
