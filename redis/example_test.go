package redisqueue_test

import (
	"fmt"
	"os"

	"github.com/redis/go-redis/v9"

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
