// Package redistest starts real redis-server processes for tests, each on
// a free loopback port with its own data directory, and stops them when
// the test ends. A test that cannot start one fails: it does not skip.
package redistest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Server is a redis-server process started by Start. Its methods are not
// safe for concurrent use.
type Server struct {
	// Addr is the server's host:port on loopback.
	Addr string
	// Dir is the server's data directory, kept across Restart.
	Dir string

	t    testing.TB // nil for a Server from Launch
	args []string
	cmd  *exec.Cmd
	exit chan struct{}
}

// Options configures Start.
type Options struct {
	// AppendFsync turns on the append-only file with this fsync policy:
	// "always", "everysec" or "no". Empty leaves persistence off.
	AppendFsync string
	// Args are more redis-server arguments, such as "--cluster-enabled",
	// "yes".
	Args []string
}

// Start starts a redis-server on a free loopback port, waits until it
// answers, and stops it with a SIGKILL when t ends. It fails t if
// redis-server is not on PATH or does not start.
func Start(t testing.TB, opts Options) *Server {
	t.Helper()
	s, err := Launch(t.TempDir(), opts)
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	s.t = t
	t.Cleanup(s.Stop)
	return s
}

// Launch starts a redis-server on a free loopback port with its data in
// dir, for callers without a testing.TB (a TestMain, an example program),
// and waits until it answers. The caller must call Stop.
func Launch(dir string, opts Options) (*Server, error) {
	path, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, fmt.Errorf("redis-server is not on PATH (Debian: apt-get install -y redis-server; .ci/run installs it): %w", err)
	}
	s := &Server{Dir: dir}
	var lastErr error
	for range 5 {
		port, err := freePort()
		if err != nil {
			return nil, fmt.Errorf("no free port: %w", err)
		}
		s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		s.args = []string{
			path, "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
			"--dir", s.Dir, "--save", "", "--daemonize", "no",
			"--logfile", filepath.Join(s.Dir, "redis.log"),
			"--enable-debug-command", "local",
		}
		if opts.AppendFsync != "" {
			s.args = append(s.args, "--appendonly", "yes", "--appendfsync", opts.AppendFsync)
		} else {
			s.args = append(s.args, "--appendonly", "no")
		}
		s.args = append(s.args, opts.Args...)
		// Another process may take the port between freePort and the
		// server's bind: try another.
		if lastErr = s.start(); lastErr == nil {
			return s, nil
		}
	}
	return nil, fmt.Errorf("redis-server did not start: %w", lastErr)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func (s *Server) start() error {
	cmd := exec.Command(s.args[0], s.args[1:]...)
	setDeathSignal(cmd)
	if err := cmd.Start(); err != nil {
		return err
	}
	s.cmd = cmd
	s.exit = make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(s.exit)
	}()
	client := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1})
	defer client.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		info, err := client.Info(ctx, "server").Result()
		if err == nil {
			// Another test's server may have taken the port first, and
			// this one then failed to bind.
			if pid := infoField(info, "process_id"); pid != strconv.Itoa(cmd.Process.Pid) {
				cancel()
				s.Stop()
				return fmt.Errorf("another redis-server (process %s) answers on %s", pid, s.Addr)
			}
			// INFO is answered while the append-only file loads; PING
			// only once it is loaded.
			err = client.Ping(ctx).Err()
		}
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-s.exit:
			return fmt.Errorf("redis-server exited at start: %s", s.logTail())
		default:
		}
		if time.Now().After(deadline) {
			s.Stop()
			return fmt.Errorf("redis-server did not answer in 10s: %v: %s", err, s.logTail())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// infoField returns the value of field in the reply of INFO.
func infoField(info, field string) string {
	for line := range strings.SplitSeq(info, "\n") {
		if value, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			return value
		}
	}
	return ""
}

func (s *Server) logTail() string {
	b, _ := os.ReadFile(filepath.Join(s.Dir, "redis.log"))
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.Join(lines[max(0, len(lines)-5):], "\n")
}

// Stop stops the server with SIGKILL and waits for it to exit. It does
// nothing if the server is stopped.
func (s *Server) Stop() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.exit
	s.cmd = nil
}

// Kill stops the server with SIGKILL, as a crash would, and waits for it
// to exit.
func (s *Server) Kill() {
	s.Stop()
}

// Restart starts the server again on the same port and data directory,
// after Kill, and waits until it answers (it loads its append-only file
// first, if it has one). It fails the test if the server does not start;
// on a Server from Launch it panics.
func (s *Server) Restart() {
	s.Stop()
	if err := s.start(); err != nil {
		if s.t == nil {
			panic("redistest: restart: " + err.Error())
		}
		s.t.Helper()
		s.t.Fatalf("redistest: restart: %v", err)
	}
}

// Client returns a client of the server, closed when the test ends. On a
// Server from Launch the caller closes it.
func (s *Server) Client() *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: s.Addr})
	if s.t != nil {
		s.t.Cleanup(func() { _ = c.Close() })
	}
	return c
}

// ErrNotRunning is returned by Pid when the server is stopped.
var ErrNotRunning = errors.New("redistest: server not running")

// Pid returns the server's process id.
func (s *Server) Pid() (int, error) {
	if s.cmd == nil {
		return 0, ErrNotRunning
	}
	return s.cmd.Process.Pid, nil
}
