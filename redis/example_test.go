package redisqueue_test

import (
	"fmt"
	"os"
	"slices"

	"github.com/redis/go-redis/v9"

	"github.com/go-workqueue/workqueue"
	redisqueue "github.com/go-workqueue/workqueue/redis"
)

// Every process that makes a handle with the same name works the same
// queue; this one adds keys and works them.
func Example() {
	client := redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_ADDR")})
	defer client.Close()
	queue := redisqueue.New[string](client, "example", redisqueue.Options[string]{})
	defer queue.ShutDownWithDrain()

	queue.Add("default/web")
	queue.Add("default/db")
	queue.Add("default/web") // already queued: collapsed
	for queue.Len() > 0 {
		key, _ := queue.Get()
		fmt.Println("reconcile", key)
		queue.Done(key)
	}
	// Output:
	// reconcile default/web
	// reconcile default/db
}

// A queue split into 3 partitions, for a Redis Cluster of 3 primaries or
// more, where each partition lands on a shard of its own (with a
// redis.NewClusterClient; one redis-server here). Every handle of the queue
// must use the same number. Order holds within a partition only.
func Example_partitions() {
	client := redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_ADDR")})
	defer client.Close()
	queue := redisqueue.New[string](client, "example-partitioned", redisqueue.Options[string]{Partitions: 3})
	defer queue.ShutDownWithDrain()

	queue.AddBatch([]string{"default/web", "default/db", "kube-system/dns", "default/web"})
	fmt.Println("queued:", queue.Len())
	var reconciled []string
	for queue.Len() > 0 {
		key, _ := queue.Get()
		reconciled = append(reconciled, key)
		queue.Done(key)
	}
	slices.Sort(reconciled)
	fmt.Println("reconciled:", reconciled)
	// Output:
	// queued: 3
	// reconciled: [default/db default/web kube-system/dns]
}

// Priorities across processes, with the in-memory priority queue's rules:
// higher first, first in first out within a priority, and a re-add keeps
// the highest priority asked for. Remove takes a key back.
func Example_priorities() {
	client := redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_ADDR")})
	defer client.Close()
	queue := redisqueue.New[string](client, "example-priorities", redisqueue.Options[string]{})
	defer queue.ShutDownWithDrain()

	low, high := -100, 10
	queue.AddWithOpts(workqueue.AddOpts{Priority: &low}, "default/web", "default/db", "default/cache")
	queue.Add("kube-system/dns")                                        // priority 0
	queue.AddWithOpts(workqueue.AddOpts{Priority: &high}, "default/db") // raised
	fmt.Println("removed:", queue.Remove("default/cache"))
	for queue.Len() > 0 {
		key, priority, _ := queue.GetWithPriority()
		fmt.Println("reconcile", key, "at", priority)
		queue.Done(key)
	}
	// Output:
	// removed: true
	// reconcile default/db at 10
	// reconcile kube-system/dns at 0
	// reconcile default/web at -100
}

// Parking across processes: a worker parks a key until an event, and the
// Wake of any process queues it again. Here two handles stand for two
// processes: a worker, and a watcher that sees the event.
func Example_parking() {
	client := redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_ADDR")})
	defer client.Close()
	worker := redisqueue.New[string](client, "example-parking", redisqueue.Options[string]{})
	defer worker.ShutDownWithDrain()
	watcher := redisqueue.New[string](client, "example-parking", redisqueue.Options[string]{})
	defer watcher.ShutDownWithDrain()

	worker.Add("default/web")
	key, _ := worker.Get()
	fmt.Println("reconcile", key, "waits for its secret")
	worker.Park(key, "secret default/tls")
	worker.Done(key)
	fmt.Println("queued:", worker.Len())

	fmt.Println("woken:", watcher.Wake("secret default/tls"))
	key, _ = worker.Get()
	fmt.Println("reconcile", key)
	worker.Done(key)
	// Output:
	// reconcile default/web waits for its secret
	// queued: 0
	// woken: 1
	// reconcile default/web
}
