package crredis_test

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/go-workqueue/workqueue/redis/redistest"
)

// TestMain starts one redis-server for the examples, which find it in
// REDIS_ADDR as a program would (the tests start their own), and fails
// the run if any test leaves a goroutine behind.
func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "crredis-examples-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	server, err := redistest.Launch(dir, redistest.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "redistest:", err)
		return 1
	}
	os.Setenv("REDIS_ADDR", server.Addr)
	code := m.Run()
	server.Stop()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			return 1
		}
	}
	return code
}
