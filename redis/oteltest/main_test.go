// Package oteltest tests a Runner over Redis queue handles that trace
// with the OpenTelemetry SDK, in a module of its own so that the module
// of the Redis queue does not require OpenTelemetry. It has only tests.
package oteltest

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/go-workqueue/workqueue/redis/redistest"
)

// redisAddr is the address of the redis-server TestMain starts, which
// every test shares, each on queues of its own.
var redisAddr string

// TestMain starts one redis-server for the tests, failing the run if it
// does not start, and fails the run if any test leaves a goroutine
// behind: a handle's listener or lease keeper, or a client's.
func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "redisqueue-oteltest-")
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
	redisAddr = server.Addr
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
