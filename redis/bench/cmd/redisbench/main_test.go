package main

import (
	"bytes"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// TestMain makes the test binary a worker process when the benchmark
// re-executes it, as the command does with itself, and otherwise fails the
// run if any test leaves a goroutine behind.
func TestMain(m *testing.M) {
	if c := os.Getenv(childEnv); c != "" {
		os.Exit(childMain(c))
	}
	goleak.VerifyTestMain(m)
}

// TestRun runs every measurement of each mode once on a few keys, so that
// the command cannot rot unnoticed.
func TestRun(t *testing.T) {
	tests := []struct {
		name  string
		impls []string
		want  []string
	}{
		{name: "default", impls: impls, want: []string{"| 2 × 2 |", "| go-workqueue |", "| asynq |"}},
		{name: "priorities", impls: prioImpls, want: []string{"| 2 × 2 |", "priorities ÷ asynq strict", "round trips per Add"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			cfg := config{
				reps: 1, keys: 200, workers: []int{2}, procs: []int{2},
				idle: 200 * time.Millisecond, settle: 100 * time.Millisecond, samples: 3, asynqSamples: 1,
				rawRequests: 2000,
				impls:       tt.impls, command: "go run ./cmd/redisbench", out: &out, progress: os.Stderr,
			}
			require.NoError(t, run(cfg))
			t.Log("\n" + out.String())
			for _, want := range tt.want {
				assert.Contains(t, out.String(), want)
			}
		})
	}
}
