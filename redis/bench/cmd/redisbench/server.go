package main

import (
	"context"
	"os"

	"github.com/redis/go-redis/v9"

	"github.com/go-workqueue/workqueue/redis/redistest"
)

// startRedis starts a redis-server for the run, without persistence, so
// that both queues are measured against the same server and settings.
func startRedis() (*redisServer, error) {
	dir, err := os.MkdirTemp("", "redisbench-")
	if err != nil {
		return nil, err
	}
	server, err := redistest.Launch(dir, redistest.Options{})
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	return &redisServer{server}, nil
}

// redisServer is the run's server.
type redisServer struct{ *redistest.Server }

func (s *redisServer) stop() {
	s.Stop()
	_ = os.RemoveAll(s.Dir)
}

func (s *redisServer) version() string {
	client := redis.NewClient(&redis.Options{Addr: s.Addr})
	defer client.Close()
	info, err := client.InfoMap(context.Background(), "server").Result()
	if err != nil {
		return "?"
	}
	return info["Server"]["redis_version"]
}
