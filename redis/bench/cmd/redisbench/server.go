package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// redisServer is a redis-server started for the run, without persistence,
// so that both queues are measured against the same server and settings.
// redistest.Start does the same for tests but needs a testing.TB.
type redisServer struct {
	addr string
	dir  string
	cmd  *exec.Cmd
}

func startRedis() (*redisServer, error) {
	path, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, fmt.Errorf("redis-server is not on PATH: %w", err)
	}
	dir, err := os.MkdirTemp("", "redisbench-")
	if err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	s := &redisServer{addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), dir: dir}
	s.cmd = exec.Command(path, "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--dir", dir, "--save", "", "--appendonly", "no", "--daemonize", "no",
		"--logfile", filepath.Join(dir, "redis.log"))
	if err := s.cmd.Start(); err != nil {
		return nil, err
	}
	client := redis.NewClient(&redis.Options{Addr: s.addr})
	defer client.Close()
	for deadline := time.Now().Add(10 * time.Second); ; {
		if err := client.Ping(context.Background()).Err(); err == nil {
			return s, nil
		} else if time.Now().After(deadline) {
			s.stop()
			return nil, fmt.Errorf("redis-server did not answer in 10s: %w", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (s *redisServer) stop() {
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
	_ = os.RemoveAll(s.dir)
}

func (s *redisServer) version() string {
	client := redis.NewClient(&redis.Options{Addr: s.addr})
	defer client.Close()
	info, err := client.InfoMap(context.Background(), "server").Result()
	if err != nil {
		return "?"
	}
	return info["Server"]["redis_version"]
}
