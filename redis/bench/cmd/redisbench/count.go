package main

import (
	"context"
	"net"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// counter is a go-redis hook that counts what one client sends: a round
// trip per command processed alone and per pipeline, and each command by
// name. Counting on the client rather than with INFO commandstats keeps
// the figures of each process apart, and leaves out the commands the
// parent sends to watch the queue.
type counter struct {
	mu         sync.Mutex
	roundTrips int64
	commands   map[string]int64
}

func newCounter() *counter {
	return &counter{commands: make(map[string]int64)}
}

// snapshot is what a counter has seen up to one moment.
type snapshot struct {
	RoundTrips int64            `json:"roundTrips"`
	Commands   map[string]int64 `json:"commands"`
}

func (c *counter) snapshot() snapshot {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := snapshot{RoundTrips: c.roundTrips, Commands: make(map[string]int64, len(c.commands))}
	for k, v := range c.commands {
		s.Commands[k] = v
	}
	return s
}

// sub returns what was counted between earlier and s.
func (s snapshot) sub(earlier snapshot) snapshot {
	d := snapshot{RoundTrips: s.RoundTrips - earlier.RoundTrips, Commands: make(map[string]int64)}
	for k, v := range s.Commands {
		if n := v - earlier.Commands[k]; n != 0 {
			d.Commands[k] = n
		}
	}
	return d
}

func (c *counter) count(cmds []redis.Cmder) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.roundTrips++
	for _, cmd := range cmds {
		c.commands[strings.ToLower(cmd.Name())]++
	}
}

func (c *counter) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		return next(ctx, network, addr)
	}
}

func (c *counter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.count([]redis.Cmder{cmd})
		return next(ctx, cmd)
	}
}

func (c *counter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.count(cmds)
		return next(ctx, cmds)
	}
}
