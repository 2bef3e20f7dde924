package main

import (
	"fmt"
	"io"
	"slices"
	"sync"
	"time"
)

type eventType string

const (
	eventNormal  eventType = "Normal"
	eventWarning eventType = "Warning"
)

// recordedEvent is an event the controller recorded on a queue, like a
// Kubernetes Event.
type recordedEvent struct {
	Object  string
	Type    eventType
	Reason  string
	Message string
}

// timeline prints what happens, as it happens: the scenario's steps, the
// controller's events and its retries. It also keeps the events and counts
// the retries for the summary. Safe for concurrent use.
type timeline struct {
	mu       sync.Mutex
	out      io.Writer
	start    time.Time
	events   []recordedEvent
	failures []string // "what: error" of each failed reconcile
	givenUp  []string // each request and command given up, in order
	parks    []string // each request parked, in order
}

func newTimeline(out io.Writer) *timeline {
	return &timeline{out: out, start: time.Now()}
}

func (t *timeline) printf(format string, args ...any) {
	fmt.Fprintf(t.out, "%8s  ", "+"+time.Since(t.start).Round(time.Millisecond).String())
	fmt.Fprintf(t.out, format, args...)
	fmt.Fprintln(t.out)
}

func (t *timeline) step(title string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	fmt.Fprintln(t.out)
	t.printf("== %s", title)
}

func (t *timeline) event(object string, typ eventType, reason, message string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.events = append(t.events, recordedEvent{object, typ, reason, message})
	t.printf("%-8s %-7s %-10s %s", object, typ, reason, message)
}

// failure records a failed reconcile; the work queue retries it unless the
// retry limit is reached.
func (t *timeline) failure(what string, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.failures = append(t.failures, what+": "+err.Error())
	t.printf("%-8s failed  %s: %v", "", what, err)
}

// parked records a request parked until parent opens, because of err.
func (t *timeline) parked(what, parent string, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.parks = append(t.parks, what)
	t.printf("%-8s parked  %s until %s opens: %v", "", what, parent, err)
}

// throttled records a write the API server throttled: the request or
// command is tried again after the time the server asked for.
func (t *timeline) throttled(what string, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.printf("%-8s delayed %s: %v", "", what, err)
}

// parkedOnce reports whether what has been parked.
func (t *timeline) parkedOnce(what string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Contains(t.parks, what)
}

// gaveUp records that the controller gave up on a request: its warning
// event is on the timeline already.
func (t *timeline) gaveUp(what string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.givenUp = append(t.givenUp, what)
}

// commandGivenUp records and shows that the controller dropped a command
// after its retries.
func (t *timeline) commandGivenUp(what string, retries int, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.givenUp = append(t.givenUp, what)
	t.printf("%-8s gave up %s after %d retries: %v", "", what, retries, err)
}

func (t *timeline) givenUpCount() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.givenUp)
}

// givenUpSince returns what was given up after the first n give-ups.
func (t *timeline) givenUpSince(n int) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.givenUp[min(n, len(t.givenUp)):])
}

// note shows a line of the scenario's own, about a step.
func (t *timeline) note(format string, args ...any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.printf("!! "+format, args...)
}

func (t *timeline) failureCount() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.failures)
}

// recorded returns the events so far.
func (t *timeline) recorded() []recordedEvent {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]recordedEvent(nil), t.events...)
}
