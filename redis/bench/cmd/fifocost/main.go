// Command fifocost drives one FIFO queue through the path whose server
// cost the Redis queue must keep: one worker adds -keys keys one at a
// time, then gets each and marks it done. Run it against a redis-server
// under callgrind, once with -keys 1000 and once with -keys 0, and the
// difference of the two runs' instructions over 1,000 is the server's
// cost per key, without its start and the library's loading:
//
//	redis/bench/cmd/fifocost/callgrind.sh 1000
//	redis/bench/cmd/fifocost/callgrind.sh 0
//
// callgrind.sh needs valgrind and redis-server, and prints the total
// instructions and those of the library's functions (fcallCommandGeneric,
// inclusive).
package main

import (
	"context"
	"flag"
	"fmt"
	"log"

	"github.com/redis/go-redis/v9"

	redisqueue "github.com/go-workqueue/workqueue/redis"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:6379", "the redis-server to use")
	keys := flag.Int("keys", 1000, "how many keys to add, get and mark done")
	name := flag.String("name", "fifocost", "the queue's name")
	flag.Parse()
	ctx := context.Background()
	client := redis.NewClient(&redis.Options{Addr: *addr})
	defer client.Close()
	q := redisqueue.New[string](client, *name, redisqueue.Options[string]{})
	defer q.ShutDownWithDrain()
	if _, err := q.LenContext(ctx); err != nil { // the look at the number of partitions
		log.Fatal(err)
	}
	for i := range *keys {
		if err := q.AddContext(ctx, fmt.Sprint(i)); err != nil {
			log.Fatal(err)
		}
	}
	for range *keys {
		item, err := q.GetContext(ctx)
		if err != nil {
			log.Fatal(err)
		}
		if err := q.DoneContext(ctx, item); err != nil {
			log.Fatal(err)
		}
	}
}
