package main

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The status after team-a was closed while train-2 was still queued in dev.
const wantClosedTable = `QUEUE        STATE    CLOSED-BY-PARENT  INQUEUE  PENDING  RUNNING  UNKNOWN  COMPLETED
root         Open     false             0        0        0        0        0
  team-a     Closed   false             0        0        0        0        0
    dev      Closing  true              1        0        0        0        0
    prod     Closed   true              0        0        0        0        0
  team-b     Open     false             0        0        0        0        1
    sandbox  Open     false             0        0        0        1        0
`

// The status at the end: everything open again, sandbox gone.
const wantFinal = `QUEUE     STATE  CLOSED-BY-PARENT  INQUEUE  PENDING  RUNNING  UNKNOWN  COMPLETED
root      Open   false             0        0        0        0        0
  team-a  Open   false             0        0        0        0        0
    dev   Open   false             1        0        0        0        0
    prod  Open   false             0        0        1        0        0
  team-b  Open   false             0        0        0        0        1

queue_pod_group_completed_count{queue_name="team-b"} 1
queue_pod_group_inqueue_count{queue_name="dev"} 1
queue_pod_group_running_count{queue_name="prod"} 1
`

// checkScenarioOutput checks the parts of the output that do not depend on
// how the workers interleave or which writes failed.
func checkScenarioOutput(t *testing.T, out string) {
	t.Helper()
	assert.Contains(t, out, wantClosedTable)
	_, final, found := strings.Cut(out, "failed reconciles retried or given up\n\n")
	require.True(t, found, out)
	assert.Equal(t, wantFinal, final)
	for _, want := range []string{
		"team-b   Normal  SetParent  parent defaulted to root",
		"team-a   Normal  CloseQueue Open -> Closed",
		"dev      Normal  CloseQueue Open -> Closing",
		"failed  dev/OpenQueue: open dev: parent team-a is Closed",
		"root     Warning CloseQueue the root queue cannot be closed",
	} {
		assert.Contains(t, out, want)
	}
	assert.NotContains(t, out, "abort-job", "a Command for a Job is not consumed")
}

// TestScenarioEndsTheSameWay plays the scenario on synctest's clock with
// different worker counts and failures: however the work interleaves and
// whichever writes fail, the controller ends in the same state.
func TestScenarioEndsTheSameWay(t *testing.T) {
	for _, workers := range []int{1, 2, 8} {
		for _, failureRate := range []float64{0, 0.2, 0.5} {
			for seed := range uint64(3) {
				t.Run(fmt.Sprintf("workers=%d/failures=%g/seed=%d", workers, failureRate, seed), func(t *testing.T) {
					synctest.Test(t, func(t *testing.T) {
						var out bytes.Buffer
						o := options{workers: workers, failureRate: failureRate, seed: seed, maxRequeueNum: -1}
						require.NoError(t, run(t.Context(), &out, o))
						checkScenarioOutput(t, out.String())
						if failureRate == 0 {
							for line := range strings.Lines(out.String()) {
								if strings.Contains(line, " failed  ") {
									assert.Contains(t, line, "dev/OpenQueue: open dev: parent team-a is Closed", "with no injected failures only the refused open fails")
								}
							}
						}
					})
				})
			}
		}
	}
}

// TestScenarioOnRealTime plays the scenario as `go run
// ./examples/queuecontroller` does, with the default flags.
func TestScenarioOnRealTime(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), &out, options{workers: 2, failureRate: 0.2, seed: 1, maxRequeueNum: -1}))
	checkScenarioOutput(t, out.String())
}

func TestOptionsValidate(t *testing.T) {
	valid := options{workers: 2, failureRate: 0.2, maxRequeueNum: -1}
	tests := []struct {
		name    string
		change  func(*options)
		wantErr string
	}{
		{"defaults", func(*options) {}, ""},
		{"loopback", func(o *options) { o.serve = "127.0.0.1:0" }, ""},
		{"localhost", func(o *options) { o.serve = "localhost:9090" }, ""},
		{"ipv6 loopback", func(o *options) { o.serve = "[::1]:9090" }, ""},
		{"no workers", func(o *options) { o.workers = 0 }, "-workers 0: need at least 1"},
		{"failure rate 1", func(o *options) { o.failureRate = 1 }, "-failure-rate 1: need 0 <= rate < 1"},
		{"negative failure rate", func(o *options) { o.failureRate = -0.1 }, "-failure-rate -0.1: need 0 <= rate < 1"},
		{"max requeue -2", func(o *options) { o.maxRequeueNum = -2 }, "-max-requeue -2: need -1 (unlimited) or more"},
		{"all interfaces", func(o *options) { o.serve = ":9090" }, `-serve ":9090": need a loopback address such as 127.0.0.1:9090`},
		{"public address", func(o *options) { o.serve = "10.0.0.1:9090" }, `-serve "10.0.0.1:9090": need a loopback address such as 127.0.0.1:9090`},
		{"no port", func(o *options) { o.serve = "127.0.0.1" }, `-serve "127.0.0.1": address 127.0.0.1: missing port in address`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := valid
			tt.change(&o)
			err := o.validate()
			if tt.wantErr == "" {
				assert.NoError(t, err)
			} else {
				assert.EqualError(t, err, tt.wantErr)
			}
		})
	}
}
