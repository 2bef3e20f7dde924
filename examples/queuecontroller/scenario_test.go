package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

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
	_, final, found := strings.Cut(out, "failures retried or given up\n\n")
	require.True(t, found, out)
	assert.Equal(t, wantFinal, final)
	for _, want := range []string{
		"team-b   Normal  SetParent  parent defaulted to root",
		"team-a   Normal  CloseQueue Open -> Closed",
		"dev      Normal  CloseQueue Open -> Closing",
		"parked  dev/OpenQueue until team-a opens: open dev: parent team-a is Closed",
		"root     Warning CloseQueue the root queue cannot be closed",
	} {
		assert.Contains(t, out, want)
	}
	assert.NotContains(t, out, "abort-job", "a Command for a Job is not consumed")
	checkTableAgreesWithGauges(t, out)
}

// statusRow matches a row of the status table: the Queue, its state,
// closed-by-parent and its PodGroups by phase.
var statusRow = regexp.MustCompile(`(?m)^ *(\S+) +(\S+) +(true|false) +(\d+) +(\d+) +(\d+) +(\d+) +(\d+)$`)

// gaugeLine matches a queue_pod_group_* gauge as printed below the table.
var gaugeLine = regexp.MustCompile(`(?m)^queue_pod_group_(\w+)_count\{queue_name="([^"]+)"\} (\d+)$`)

// checkTableAgreesWithGauges checks that the final status table and the
// gauges printed below it say the same: each Queue's PodGroups by phase,
// a gauge left out being 0, and no gauge of a Queue not in the table.
func checkTableAgreesWithGauges(t *testing.T, out string) {
	t.Helper()
	i := strings.LastIndex(out, "\nQUEUE ")
	require.GreaterOrEqual(t, i, 0, "no status table:\n%s", out)
	final := out[i:]
	phases := []string{"inqueue", "pending", "running", "unknown", "completed"}
	table := map[string]map[string]string{}
	for _, row := range statusRow.FindAllStringSubmatch(final, -1) {
		assert.NotEmpty(t, row[2], "%s has a STATE", row[1])
		counts := map[string]string{}
		for j, phase := range phases {
			counts[phase] = row[4+j]
		}
		table[row[1]] = counts
	}
	require.NotEmpty(t, table, final)
	gauges := map[string]map[string]string{}
	for _, g := range gaugeLine.FindAllStringSubmatch(final, -1) {
		require.Contains(t, table, g[2], "a gauge of a Queue not in the table: %s", g[0])
		if gauges[g[2]] == nil {
			gauges[g[2]] = map[string]string{}
		}
		gauges[g[2]][g[1]] = g[3]
	}
	for queue, counts := range table {
		for _, phase := range phases {
			got := gauges[queue][phase]
			if got == "" {
				got = "0"
			}
			assert.Equal(t, counts[phase], got, "%s: the table's %s count and the gauge queue_pod_group_%s_count\n%s", queue, phase, phase, final)
		}
	}
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
								assert.NotContains(t, line, " failed  ", "with no injected failures nothing fails: the refused open parks")
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
	checkWorkqueueSummary(t, out.String())
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

// outcome is how a run of the scenario can end.
type outcome int

const (
	completes outcome = 1 << iota // as scripted: nil error, the final status
	givesUp                       // went on after giving up on requests or commands
	stops                         // stopped: nothing left but a backoff past retryWaitLimit
	invalid                       // the options were refused
)

// scenarioBound is how long, on synctest's clock, any run may take. The
// slowest, -failure-rate 0.9 -max-requeue 10, goes through every step with
// backoffs of up to 2.56 s for each of its requests and takes 20 to 55 s.
const scenarioBound = 3 * time.Minute

// TestScenarioEndsOnAnyFlags plays the scenario with failure rates and retry
// limits that give requests up, or retry them for ever, as the command line
// would (with its retryWaitLimit), and checks that every run ends within
// scenarioBound with the outcome its flags allow: the scripted final status
// when nothing was given up, a "gave up" report otherwise, a "stopped"
// report when only an ever longer backoff was left.
func TestScenarioEndsOnAnyFlags(t *testing.T) {
	tests := []struct {
		failureRate   float64
		maxRequeueNum int
		want          outcome // the outcomes allowed
		oneWorker     bool    // slow (all those backoffs): run with 1 worker only
	}{
		{0, -1, completes, false},
		{0, 0, completes, false}, // the refused open of dev parks: not a failure
		{0, 2, completes, false},
		{0, 10, completes, false},
		{0.3, -1, completes, false},
		{0.3, 0, givesUp, false},
		{0.3, 2, completes | givesUp, false},
		{0.3, 10, completes, false},
		{0.9, -1, stops, false},
		{0.9, 0, givesUp, false},
		{0.9, 2, givesUp, false}, // a controller that gives up must still stop
		{0.9, 10, givesUp, true},
		{1, -1, invalid, false},
		{1, 0, invalid, false},
		{1, 2, invalid, false},
		{1, 10, invalid, false},
	}
	for _, tt := range tests {
		workerCounts := []int{1, 4}
		if tt.oneWorker {
			workerCounts = workerCounts[:1]
		}
		for _, workers := range workerCounts {
			name := fmt.Sprintf("failure-rate=%g/max-requeue=%d/workers=%d", tt.failureRate, tt.maxRequeueNum, workers)
			t.Run(name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					ctx, cancel := context.WithTimeout(t.Context(), scenarioBound)
					defer cancel()
					o := options{workers: workers, failureRate: tt.failureRate, seed: 1, maxRequeueNum: tt.maxRequeueNum, retryWaitLimit: retryWaitLimit}
					var out bytes.Buffer
					start := time.Now()
					err := run(ctx, &out, o)
					elapsed := time.Since(start)
					require.NotErrorIs(t, err, context.DeadlineExceeded, "still running after %v:\n%s", scenarioBound, out.String())
					assert.Less(t, elapsed, scenarioBound)

					got := outcomeOf(t, err, out.String())
					require.NotZero(t, got&tt.want, "outcome %v not allowed; error: %v\n%s", got, err, out.String())
					t.Logf("%v after %v on the fake clock: %v", got, elapsed, err)
				})
			})
		}
	}
}

func (o outcome) String() string {
	return map[outcome]string{completes: "completes", givesUp: "gives up", stops: "stops", invalid: "invalid"}[o]
}

// outcomeOf tells how a run ended and checks that its output and error say
// so clearly.
func outcomeOf(t *testing.T, err error, out string) outcome {
	t.Helper()
	if err == nil {
		checkScenarioOutput(t, out)
		assert.NotContains(t, out, "gave up")
		assert.NotContains(t, out, "!! ")
		checkWorkqueueSummary(t, out)
		return completes
	}
	var incomplete *incompleteError
	if !errors.As(err, &incomplete) {
		assert.Empty(t, out, "a refused option plays nothing")
		assert.Contains(t, err.Error(), "-failure-rate 1: need 0 <= rate < 1")
		return invalid
	}
	assert.Contains(t, err.Error(), "the scenario did not play out as scripted: ")
	assert.Contains(t, out, "\nso the status below may not be the scripted one\n\nQUEUE ")
	checkWorkqueueSummary(t, out)
	checkTableAgreesWithGauges(t, out)
	for _, step := range incomplete.unreached {
		assert.Contains(t, out, "!! not reached: "+step.until+": "+step.why+"; going on")
		assert.Contains(t, out, "\nnot reached in "+step.step+": ")
		assert.Contains(t, err.Error(), step.step+"'s condition not reached")
	}
	if incomplete.stopped != nil {
		assert.Regexp(t, `nothing to do but wait \d+(\.\d+)?s to retry \S+, which failed \d+ times in a row; lower -failure-rate or set -max-requeue`, err.Error())
		assert.Contains(t, out, "!! stopped: the controller has nothing to do but wait ")
		assert.Contains(t, out, "\nstopped at step ")
		return stops
	}
	// Every give-up is on the timeline: a warning event for a request, a
	// line for a command; the report counts them.
	requests := strings.Count(out, " gave up after ")
	commands := strings.Count(out, " gave up command ")
	require.Len(t, incomplete.givenUp, requests+commands)
	report := regexp.MustCompile(`(?m)^gave up on (.*) after (-?\d+) retries each$`).FindStringSubmatch(out)
	require.NotNil(t, report, "no gave-up report:\n%s", out)
	assert.Equal(t, strconv.Itoa(incomplete.maxRequeue), report[2])
	for n, noun := range map[int]string{requests: "request", commands: "command"} {
		switch {
		case n == 1:
			assert.Contains(t, report[1], "1 "+noun+" (")
		case n > 1:
			assert.Contains(t, report[1], fmt.Sprintf("%d %ss (", n, noun))
		default:
			assert.NotContains(t, report[1], noun)
		}
	}
	assert.Contains(t, err.Error(), "gave up on ")
	return givesUp
}

// summaryLines matches the work queue summary and the line after it.
var summaryLines = regexp.MustCompile(`(?m)^work queue request: (\d+) adds \((\d+) retr(?:y|ies)\): (\d+) queued their item, (\d+) found it queued already; (\d+) processed, mean wait (\S+?)(?:; (\d+) retr(?:y|ies) dropped at the stop)?\n` +
	`work queue command: (\d+) adds \((\d+) retr(?:y|ies)\): (\d+) queued their item, (\d+) found it queued already; (\d+) processed, mean wait (\S+?)(?:; (\d+) retr(?:y|ies) dropped at the stop)?\n` +
	`(\d+) events, (\d+) failures retried or given up\n`)

// checkWorkqueueSummary checks that the output has the work queue summary,
// above the count of events, and that its figures agree with each other
// and with the timeline.
func checkWorkqueueSummary(t *testing.T, out string) {
	t.Helper()
	m := summaryLines.FindStringSubmatch(out)
	require.NotNil(t, m, "no work queue summary:\n%s", out)
	n := func(i int) int {
		if m[i] == "" {
			return 0
		}
		v, err := strconv.Atoi(m[i])
		require.NoError(t, err)
		return v
	}
	retries := 0
	for _, q := range []struct {
		name  string
		first int // index of adds; retries, queued, merged, processed, mean wait and dropped follow
	}{{"requests", 1}, {"commands", 8}} {
		adds, retried, queued, merged, processed := n(q.first), n(q.first+1), n(q.first+2), n(q.first+3), n(q.first+4)
		assert.Equal(t, adds, queued+merged, "%s: each add queued its item or found it queued", q.name)
		assert.LessOrEqual(t, retried, adds, q.name)
		assert.Equal(t, queued, processed, "%s: the queue drains when the controller stops, so every item that entered it was processed", q.name)
		_, err := time.ParseDuration(m[q.first+5])
		assert.NoError(t, err, q.name)
		retries += retried + n(q.first+6)
	}
	assert.Positive(t, n(5), "requests processed")
	assert.GreaterOrEqual(t, n(12), strings.Count(out, " consumed: "), "every consumed command was processed")
	givenUp := strings.Count(out, " gave up after ") + strings.Count(out, " gave up command ")
	assert.Equal(t, n(16), retries+givenUp, "each failed reconcile was retried or given up")
}

// TestIssue18GiveUpEndsAtOnce plays, on the real clock, what `go run
// ./examples/queuecontroller -failure-rate 0.9 -max-requeue 2` does. It
// used to wait a minute for a condition that a give-up had made impossible.
func TestIssue18GiveUpEndsAtOnce(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	var out bytes.Buffer
	start := time.Now()
	err := run(ctx, &out, options{workers: 2, failureRate: 0.9, seed: 1, maxRequeueNum: 2, retryWaitLimit: retryWaitLimit})
	elapsed := time.Since(start)
	require.NotErrorIs(t, err, context.DeadlineExceeded, out.String())
	assert.Less(t, elapsed, 10*time.Second)
	assert.Equal(t, givesUp, outcomeOf(t, err, out.String()))
}
