package main

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestRun runs the demo as `go run ./examples/metrics` does and checks the
// figures that do not depend on timing.
func TestRun(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, run(&out, "127.0.0.1:0", false))
	for _, want := range []string{
		`workqueue_adds_total{name="demo"} 24`, // 20 keys and 4 retries
		`workqueue_retries_total{name="demo"} 5`,
		`workqueue_delayed_items{name="demo"} 1`,
		`workqueue_depth{name="demo"} 0`,
		`workqueue_work_duration_seconds_count{name="demo"} 24`,
	} {
		assert.Contains(t, out.String(), want+"\n")
	}
	for family, meaning := range seriesMeaning {
		assert.Contains(t, out.String(), "# "+meaning+"\n"+family, "the line above %s", family)
	}
}
