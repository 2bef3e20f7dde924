package main

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// workqueueSummary is what one work queue did during the scenario, from its
// workqueue_* metrics and the controller's count of its own Add calls.
type workqueueSummary struct {
	label    string           // the work queue's name
	addCalls uint64           // the controller's Add calls
	wakes    uint64           // the parked items the controller woke
	figures  workqueueFigures // the queue's metrics once it has stopped
	dropped  int              // adds after a delay still waiting at the stop
}

// adds returns how many adds reached the queue: the controller's Add
// calls, the parked items it woke and the adds after a delay (retries and
// requeues) that fell due.
func (s workqueueSummary) adds() int64 {
	return int64(s.addCalls) + int64(s.wakes) + int64(s.figures.retries) - int64(s.dropped)
}

// merged returns how many of those adds found their item queued already,
// so that the queue held it once: the others each queued an item, one of
// the queue's workqueue_adds_total.
func (s workqueueSummary) merged() int64 { return s.adds() - int64(s.figures.adds) }

// meanWait returns the mean time from an item's add to its Get.
func (s workqueueSummary) meanWait() time.Duration {
	if s.figures.gets == 0 {
		return 0
	}
	return (s.figures.waited / time.Duration(s.figures.gets)).Round(time.Microsecond)
}

// String spells the summary out: "request: 42 adds (8 retries): 35 queued
// their item, 7 found it queued already; 35 processed, mean wait 137µs". A
// retry is an add after a delay: a failure's backoff or a throttled write's
// retry-after.
func (s workqueueSummary) String() string {
	line := fmt.Sprintf("%s: %d adds (%s): %d queued their item, %d found it queued already; %d processed, mean wait %v",
		s.label, s.adds(), retries(int64(s.figures.retries)-int64(s.dropped)), s.figures.adds, s.merged(), s.figures.dones, s.meanWait())
	if s.dropped > 0 {
		line += fmt.Sprintf("; %s dropped at the stop", retries(int64(s.dropped)))
	}
	return line
}

func retries(n int64) string {
	if n == 1 {
		return "1 retry"
	}
	return fmt.Sprintf("%d retries", n)
}

// printWorkqueueSummary prints a line for each work queue.
func printWorkqueueSummary(out io.Writer, queues []workqueueSummary) {
	for _, q := range queues {
		fmt.Fprintf(out, "work queue %v\n", q)
	}
}

// incompleteError tells why the scenario did not play out as scripted.
type incompleteError struct {
	givenUp    []string // requests and commands given up, in order
	maxRequeue int
	unreached  []unreachedStep
	stopped    error // why the scenario stopped early, or nil
}

// newIncompleteError returns nil when the scenario played out as scripted:
// to its end, every condition reached and nothing given up.
func newIncompleteError(result scenarioResult, givenUp []string, maxRequeue int) *incompleteError {
	if result.stopped == nil && len(result.unreached) == 0 && len(givenUp) == 0 {
		return nil
	}
	return &incompleteError{givenUp: givenUp, maxRequeue: maxRequeue, unreached: result.unreached, stopped: result.stopped}
}

func (e *incompleteError) Error() string {
	var parts []string
	if e.stopped != nil {
		parts = append(parts, e.stopped.Error())
	}
	if len(e.givenUp) > 0 {
		parts = append(parts, e.gaveUp(false))
	}
	for _, step := range e.unreached {
		parts = append(parts, step.step+"'s condition not reached")
	}
	return "the scenario did not play out as scripted: " + strings.Join(parts, "; ")
}

func (e *incompleteError) Unwrap() error { return e.stopped }

// gaveUp says what was given up: "gave up on 3 requests and 1 command after
// 2 retries each", with names if detailed: "gave up on 3 requests
// (dev/SyncQueue 2x, prod/SyncQueue) and 1 command (admin/open-dev) after 2
// retries each".
func (e *incompleteError) gaveUp(detailed bool) string {
	var requests, commands []string
	for _, what := range e.givenUp {
		if cmd, ok := strings.CutPrefix(what, "command "); ok {
			commands = append(commands, cmd)
		} else {
			requests = append(requests, what)
		}
	}
	var parts []string
	for _, kind := range []struct {
		noun  string
		names []string
	}{{"request", requests}, {"command", commands}} {
		if len(kind.names) == 0 {
			continue
		}
		part := fmt.Sprintf("%d %s", len(kind.names), kind.noun)
		if len(kind.names) > 1 {
			part += "s"
		}
		if detailed {
			part += " (" + countedNames(kind.names) + ")"
		}
		parts = append(parts, part)
	}
	return fmt.Sprintf("gave up on %s after %d retries each", strings.Join(parts, " and "), e.maxRequeue)
}

// countedNames lists the distinct names in order of first appearance, with
// a count for those that appear more than once: "a 2x, b".
func countedNames(names []string) string {
	var distinct []string
	counts := make(map[string]int)
	for _, name := range names {
		if counts[name] == 0 {
			distinct = append(distinct, name)
		}
		counts[name]++
	}
	for i, name := range distinct {
		if counts[name] > 1 {
			distinct[i] = fmt.Sprintf("%s %dx", name, counts[name])
		}
	}
	return strings.Join(distinct, ", ")
}

// report prints, below the summary, what kept the scenario from playing out
// as scripted.
func (e *incompleteError) report(out io.Writer) {
	if len(e.givenUp) > 0 {
		fmt.Fprintln(out, e.gaveUp(true))
	}
	for _, step := range e.unreached {
		fmt.Fprintf(out, "not reached in %s: %s, as %s\n", step.step, step.until, step.why)
	}
	if e.stopped != nil {
		fmt.Fprintln(out, e.stopped)
	}
	fmt.Fprintln(out, "so the status below may not be the scripted one")
}
