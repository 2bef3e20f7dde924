package main

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	redisqueue "github.com/go-workqueue/workqueue/redis"
)

// queue is one implementation as one process uses it: it adds keys, and
// runs workers that take each key, note it and mark it done.
type queue interface {
	add(ctx context.Context, key string) error
	// start starts n workers; each calls got with a key as soon as it has
	// it, before marking it done.
	start(n int, got func(key string))
	// stop stops the workers and waits for them.
	stop()
}

const (
	implOurs  = "go-workqueue"
	implAsynq = "asynq"
)

var impls = []string{implOurs, implAsynq}

func newQueue(impl string, client redis.UniversalClient, name string) queue {
	switch impl {
	case implOurs:
		return &ours{q: redisqueue.New[string](client, name, redisqueue.Options[string]{})}
	case implAsynq:
		return &asynqQueue{redis: client, client: asynq.NewClientFromRedisClient(client), name: name}
	}
	panic("unknown implementation " + impl)
}

// outstanding returns how many keys of the queue called name are still
// queued or being processed, read from Redis with the implementation's own
// key names, so that the parent sees the end of a drain without adding a
// command per key to what the workers send.
func outstanding(ctx context.Context, client redis.UniversalClient, impl, name string) (int64, error) {
	var a, b *redis.IntCmd
	_, err := client.Pipelined(ctx, func(p redis.Pipeliner) error {
		switch impl {
		case implOurs:
			// redis/scripts.go: the ready list, and the state of every
			// key queued or processing.
			a = p.LLen(ctx, "wq:{"+name+"}:ready")
			b = p.HLen(ctx, "wq:{"+name+"}:state")
		case implAsynq:
			// Dequeue moves a task from pending to active in one script;
			// Done removes it from active.
			a = p.LLen(ctx, "asynq:{"+name+"}:pending")
			b = p.LLen(ctx, "asynq:{"+name+"}:active")
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return a.Val() + b.Val(), nil
}

// ours is one handle shared by the process's workers, as a controller
// uses the in-memory queue: Get, process, Done.
type ours struct {
	q  *redisqueue.Queue[string]
	wg sync.WaitGroup
}

func (o *ours) add(ctx context.Context, key string) error {
	return o.q.AddContext(ctx, key)
}

func (o *ours) start(n int, got func(string)) {
	for range n {
		o.wg.Go(func() {
			for {
				key, shutdown := o.q.Get()
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
// client, so that its hook counts both.
type asynqQueue struct {
	redis  redis.UniversalClient
	client *asynq.Client
	name   string
	server *asynq.Server
}

func (a *asynqQueue) add(ctx context.Context, key string) error {
	_, err := a.client.EnqueueContext(ctx, asynq.NewTask("key", nil), asynq.TaskID(key), asynq.Queue(a.name))
	if errors.Is(err, asynq.ErrTaskIDConflict) {
		return nil
	}
	return err
}

func (a *asynqQueue) start(n int, got func(string)) {
	a.server = asynq.NewServerFromRedisClient(a.redis, asynq.Config{
		Concurrency: n,
		Queues:      map[string]int{a.name: 1},
		LogLevel:    asynq.FatalLevel,
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
