package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/go-workqueue/workqueue/redis/redistest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestTwoWorkersOneQueue runs the program as the README does, against a
// real redis-server: two "work" processes, then an "add" process, and
// checks that every key added is reconciled once, by one of the workers,
// and that both exit cleanly on SIGTERM. It needs a redis-server on PATH
// and fails without one.
func TestTwoWorkersOneQueue(t *testing.T) {
	server := redistest.Start(t, redistest.Options{})
	bin := build(t)

	var workers []*exec.Cmd
	var logs []*lineWriter
	var pids []string
	for range 2 {
		log := newLineWriter()
		cmd := exec.Command(bin, "-redis", server.Addr, "work")
		cmd.Stderr = log
		require.NoError(t, cmd.Start())
		workers = append(workers, cmd)
		logs = append(logs, log)
		pids = append(pids, strconv.Itoa(cmd.Process.Pid))
	}
	t.Cleanup(func() {
		for _, w := range workers {
			_ = w.Process.Kill()
			_ = w.Wait()
		}
	})

	var keys []string
	for i := range 12 {
		keys = append(keys, "key-"+strconv.Itoa(i))
	}
	out, err := exec.Command(bin, append([]string{"-redis", server.Addr, "add"}, keys...)...).CombinedOutput()
	require.NoError(t, err, "add: %s", out)
	assert.Empty(t, string(out), "add's output")

	// reconciled reads the workers' lines: how often each key was
	// reconciled, and the lines that are not a reconcile's.
	reconciled := func() (times map[string]int, other []string) {
		times = map[string]int{}
		for i, log := range logs {
			pid := pids[i]
			for _, line := range log.Lines() {
				// 2006/01/02 15:04:05 process PID reconciled KEY
				f := strings.Fields(line)
				if len(f) != 6 || f[2] != "process" || f[3] != pid || f[4] != "reconciled" {
					other = append(other, line)
					continue
				}
				times[f[5]]++
			}
		}
		return times, other
	}
	deadline := time.After(60 * time.Second)
	for {
		times, other := reconciled()
		require.Empty(t, other, "the workers' lines that are not a reconcile's")
		if len(times) == len(keys) {
			break
		}
		select {
		case <-logs[0].written:
		case <-logs[1].written:
		case <-deadline:
			t.Fatalf("after 60s, reconciled %d of %d keys: %v", len(times), len(keys), times)
		}
	}

	running := workers
	workers = nil // waited for below: nothing for the cleanup to kill
	for _, w := range running {
		require.NoError(t, w.Process.Signal(syscall.SIGTERM))
	}
	exited := make(chan error, len(running))
	for _, w := range running {
		go func() { exited <- w.Wait() }()
	}
	for range running {
		select {
		case err := <-exited:
			assert.NoError(t, err, "a worker's exit after SIGTERM")
		case <-time.After(30 * time.Second):
			for _, w := range running {
				_ = w.Process.Kill()
			}
			t.Fatal("a worker did not exit within 30s of SIGTERM")
		}
	}

	times, other := reconciled()
	assert.Empty(t, other, "the workers' lines that are not a reconcile's")
	for _, k := range keys {
		assert.Equal(t, 1, times[k], "times %s was reconciled", k)
	}
}

// TestReadmeShowsThisProgram checks that redis/README.md's first Go block
// is this program, byte for byte, so that the guide cannot drift from the
// code this test runs.
func TestReadmeShowsThisProgram(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	require.NoError(t, err)
	main, err := os.ReadFile("main.go")
	require.NoError(t, err)
	_, after, ok := strings.Cut(string(readme), "\n```go\n")
	require.True(t, ok, "redis/README.md has no ```go block")
	block, _, ok := strings.Cut(after, "\n```\n")
	require.True(t, ok, "redis/README.md's first ```go block does not end")
	assert.Equal(t, string(main), block+"\n", "redis/README.md's first Go block differs from examples/quickstart/main.go: copy main.go into it")
}

// build compiles the program into the test's temporary directory.
func build(t *testing.T) string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	require.NoError(t, err)
	bin := filepath.Join(t.TempDir(), "quickstart")
	out, err := exec.Command(goTool, "build", "-o", bin, ".").CombinedOutput()
	require.NoError(t, err, "%s", out)
	return bin
}

// lineWriter collects what a process writes, by line, and signals each
// write on written.
type lineWriter struct {
	written chan struct{} // capacity 1: a write since the last receive

	mu      sync.Mutex
	partial []byte
	lines   []string
}

func newLineWriter() *lineWriter {
	return &lineWriter{written: make(chan struct{}, 1)}
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	w.partial = append(w.partial, p...)
	for {
		i := bytes.IndexByte(w.partial, '\n')
		if i < 0 {
			break
		}
		w.lines = append(w.lines, string(w.partial[:i]))
		w.partial = w.partial[i+1:]
	}
	w.mu.Unlock()
	select {
	case w.written <- struct{}{}:
	default:
	}
	return len(p), nil
}

// Lines returns the complete lines written so far.
func (w *lineWriter) Lines() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.lines)
}
