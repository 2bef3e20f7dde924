// Command quickstart shares one queue between processes through Redis:
// "add" queues keys, "work" reconciles them with 4 workers until SIGINT
// or SIGTERM. Every process run with the same -redis shares the queue.
package main

import (
	"context"
	"flag"
	"log"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/go-workqueue/workqueue/reconcile"
	redisqueue "github.com/go-workqueue/workqueue/redis"
)

func reconcileKey(ctx context.Context, key string) (reconcile.Result, error) {
	time.Sleep(time.Second) // the work; an error would retry the key with backoff
	log.Printf("process %d reconciled %s", os.Getpid(), key)
	return reconcile.Result{}, nil
}

func main() {
	addr := flag.String("redis", "localhost:6379", "address of Redis 7.0 or later, or Valkey")
	flag.Parse()
	client := redis.NewClient(&redis.Options{Addr: *addr})
	defer client.Close()
	queue := redisqueue.New[string](client, "quickstart", redisqueue.Options[string]{})

	switch flag.Arg(0) {
	case "add":
		for _, key := range flag.Args()[1:] {
			if err := queue.AddContext(context.Background(), key); err != nil {
				log.Fatal(err) // Redis's error: AddContext does not retry
			}
		}
		queue.ShutDown() // this handle only: the keys stay queued in Redis
	case "work":
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		reconcile.NewRunner(queue, reconcileKey).Run(ctx, 4) // until ctx ends
	default:
		log.Fatal("usage: quickstart [-redis host:port] add KEY... | work")
	}
}
