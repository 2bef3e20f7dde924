package main

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/go-workqueue/workqueue"
	redisqueue "github.com/go-workqueue/workqueue/redis"
)

// queue is one implementation as one process uses it: it adds keys, and
// runs workers that take each key, note it and mark it done.
type queue interface {
	// add adds key at level 0 (the highest), 1 or 2 (the lowest); the
	// implementations without priorities ignore level.
	add(ctx context.Context, key string, level int) error
	// start starts n workers; each calls got with a key as soon as it has
	// it, before marking it done.
	start(n int, got func(key string))
	// stop stops the workers and waits for them.
	stop()
}

const (
	implOurs  = "go-workqueue"
	implAsynq = "asynq"
	// The -priorities mode's: ours with AddWithOpts at three priorities
	// and GetWithPriority, and asynq with one queue per level, served by
	// weight or strictly.
	implOursPrio      = "go-workqueue priorities"
	implAsynqWeighted = "asynq weighted"
	implAsynqStrict   = "asynq strict"
)

// impls are the implementations the default mode compares; prioImpls those
// of -priorities, the first (ours, FIFO) the reference of the ratios.
var (
	impls     = []string{implOurs, implAsynq}
	prioImpls = []string{implOurs, implOursPrio, implAsynqWeighted, implAsynqStrict}
)

// priorities are our queue's priorities for the levels 0, 1 and 2: those
// of a controller's live changes (10 for urgent ones, 0) and of its
// initial list (handler.LowPriority, -100).
var priorities = [3]int{10, 0, -100}

// asynqLevels are the suffixes of asynq's queue names for the levels 0, 1
// and 2, and weights their weights when served by weight.
var (
	asynqLevels  = [3]string{"critical", "default", "low"}
	asynqWeights = [3]int{6, 3, 1}
)

func newQueue(impl string, client redis.UniversalClient, name string) queue {
	switch impl {
	case implOurs, implOursPrio:
		return &ours{q: redisqueue.New[string](client, name, redisqueue.Options[string]{}), priorities: impl == implOursPrio}
	case implAsynq:
		return &asynqQueue{redis: client, client: asynq.NewClientFromRedisClient(client), name: name}
	case implAsynqWeighted, implAsynqStrict:
		return &asynqQueue{redis: client, client: asynq.NewClientFromRedisClient(client), name: name, levels: true, strict: impl == implAsynqStrict}
	}
	panic("unknown implementation " + impl)
}

// asynqQueueNames returns the asynq queues of the queue called name: one,
// or one per level.
func asynqQueueNames(impl, name string) []string {
	if impl == implAsynq {
		return []string{name}
	}
	var names []string
	for _, l := range asynqLevels {
		names = append(names, name+"-"+l)
	}
	return names
}

// outstanding returns how many keys of the queue called name are still
// queued or being processed, read from Redis with the implementation's own
// key names, so that the parent sees the end of a drain without adding a
// command per key to what the workers send.
func outstanding(ctx context.Context, client redis.UniversalClient, impl, name string) (int64, error) {
	var counts []*redis.IntCmd
	_, err := client.Pipelined(ctx, func(p redis.Pipeliner) error {
		switch impl {
		case implOurs, implOursPrio:
			// redis/lua/prelude.lua: STATE holds every key queued, in
			// the list or the sorted set of priorities, or processing.
			counts = append(counts, p.HLen(ctx, "wq:{"+name+"}:state"))
		default:
			// Dequeue moves a task from pending to active in one script;
			// Done removes it from active.
			for _, q := range asynqQueueNames(impl, name) {
				counts = append(counts, p.LLen(ctx, "asynq:{"+q+"}:pending"), p.LLen(ctx, "asynq:{"+q+"}:active"))
			}
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	var n int64
	for _, c := range counts {
		n += c.Val()
	}
	return n, nil
}

// ours is one handle shared by the process's workers, as a controller
// uses the in-memory queue: Get, process, Done. With priorities, it adds
// with AddWithOpts and takes with GetWithPriority, as controller-runtime's
// priority queue is used.
type ours struct {
	q          *redisqueue.Queue[string]
	priorities bool
	wg         sync.WaitGroup
}

func (o *ours) add(ctx context.Context, key string, level int) error {
	if o.priorities {
		return o.q.AddWithOptsContext(ctx, workqueue.AddOpts{Priority: &priorities[level]}, key)
	}
	return o.q.AddContext(ctx, key)
}

func (o *ours) start(n int, got func(string)) {
	for range n {
		o.wg.Go(func() {
			for {
				var key string
				var shutdown bool
				if o.priorities {
					key, _, shutdown = o.q.GetWithPriority()
				} else {
					key, shutdown = o.q.Get()
				}
				if shutdown {
					return
				}
				got(key)
				o.q.Done(key)
			}
		})
	}
}

func (o *ours) stop() {
	o.q.ShutDownWithDrain()
	o.wg.Wait()
}

// asynqQueue is asynq's nearest equivalent: a task whose ID is the key,
// so that a key already queued is not queued twice, processed by one
// server of n concurrency per process that deletes it when done (no
// retention). The client and the server share the process's go-redis
// client, so that its hook counts both. With levels, a key goes to the
// asynq queue of its level, and the server serves the three queues by
// their weights, or strictly in order.
type asynqQueue struct {
	redis          redis.UniversalClient
	client         *asynq.Client
	name           string
	levels, strict bool
	server         *asynq.Server
}

func (a *asynqQueue) add(ctx context.Context, key string, level int) error {
	queue := a.name
	if a.levels {
		queue = a.name + "-" + asynqLevels[level]
	}
	_, err := a.client.EnqueueContext(ctx, asynq.NewTask("key", nil), asynq.TaskID(key), asynq.Queue(queue))
	if errors.Is(err, asynq.ErrTaskIDConflict) {
		return nil
	}
	return err
}

func (a *asynqQueue) start(n int, got func(string)) {
	queues := map[string]int{a.name: 1}
	if a.levels {
		queues = map[string]int{}
		for i, l := range asynqLevels {
			queues[a.name+"-"+l] = asynqWeights[i]
		}
	}
	a.server = asynq.NewServerFromRedisClient(a.redis, asynq.Config{
		Concurrency:    n,
		Queues:         queues,
		StrictPriority: a.strict,
		LogLevel:       asynq.FatalLevel,
	})
	err := a.server.Start(asynq.HandlerFunc(func(ctx context.Context, _ *asynq.Task) error {
		id, _ := asynq.GetTaskID(ctx)
		got(id)
		return nil
	}))
	if err != nil {
		panic(fmt.Sprintf("asynq server: %v", err))
	}
}

func (a *asynqQueue) stop() {
	if a.server != nil {
		a.server.Shutdown()
	}
}
