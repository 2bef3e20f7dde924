package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"time"
)

// settleTimeout bounds how long a step waits for the controller. It is a
// last resort: a step ends long before it when the controller settles, when
// a give-up makes its condition unreachable or when the controller has
// nothing left but a long backoff.
const settleTimeout = time.Minute

// retryWaitLimit is how long a backoff the command's scenario waits out when
// the controller has nothing else to do: with unlimited retries and a high
// failure rate the backoff doubles up to the rate limiter's 1000 s, and the
// scenario would look hung.
const retryWaitLimit = 5 * time.Second

// quietChecks is how many checks in a row, 5 ms apart, with nothing
// happening make the controller settled (or only waiting for retries).
const quietChecks = 3

// scenarioResult is how the scenario went.
type scenarioResult struct {
	// unreached are the steps whose condition could not be reached; the
	// scenario went on after each.
	unreached []unreachedStep
	// stopped is why the scenario stopped before its end; nil if it
	// played to the end.
	stopped error
}

// unreachedStep is a step whose condition could not be reached.
type unreachedStep struct {
	step  string // "step 6"
	until string // what it waited for
	why   string // why it could not be reached
}

// playScenario runs the steps, waiting after each until the controller
// settles or the step's condition holds. A step whose condition cannot be
// reached any more (what it waits for was given up, or the controller
// settled without it) is noted and the scenario goes on. The scenario stops
// when ctx is done or the controller has nothing to do but wait longer than
// retryWaitLimit (if positive) for a retry.
func playScenario(ctx context.Context, out io.Writer, store *Store, ctrl *controller, tl *timeline, retryWaitLimit time.Duration) scenarioResult {
	var result scenarioResult
	for i, step := range scenario {
		tl.step(step.title)
		givenUpBefore := tl.givenUpCount()
		err := step.do(store)
		var unreached string
		if err == nil {
			unreached, err = awaitStep(ctx, step, store, ctrl, tl, givenUpBefore, retryWaitLimit)
		}
		if err != nil {
			tl.note("stopped: %v", err)
			result.stopped = fmt.Errorf("stopped at step %d of %d (%s): %w", i+1, len(scenario), step.title, err)
			return result
		}
		if unreached != "" {
			tl.note("not reached: %s: %s; going on", step.until, unreached)
			result.unreached = append(result.unreached, unreachedStep{step: fmt.Sprintf("step %d", i+1), until: step.until, why: unreached})
		}
		if step.show {
			fmt.Fprintln(out)
			printStatus(out, store)
		}
	}
	return result
}

// awaitStep waits until the step's condition holds or, for a step without
// one, until the controller settles. It returns why the condition cannot be
// reached any more: a request or command it waits on was given up, or the
// controller settled without reaching it. It fails when ctx is done, when
// the controller has nothing to do but wait longer than retryWaitLimit (if
// positive) for a retry, or when it has not settled within settleTimeout.
func awaitStep(ctx context.Context, step scenarioStep, store *Store, ctrl *controller, tl *timeline, givenUpBefore int, retryWaitLimit time.Duration) (unreached string, err error) {
	watch := progress{store: store, ctrl: ctrl}
	deadline := time.Now().Add(settleTimeout)
	stalled := 0 // checks in a row that found only a long backoff left
	for {
		if err := context.Cause(ctx); err != nil {
			return "", err
		}
		if step.wait != nil {
			if step.wait(tl) {
				return "", nil
			}
			for _, what := range tl.givenUpSince(givenUpBefore) {
				if slices.Contains(step.waitsOn, what) {
					return what + " was given up", nil
				}
			}
		}
		state, activity, err := watch.check()
		if err != nil {
			return "", err
		}
		switch state {
		case settled:
			if step.wait == nil || step.wait(tl) {
				return "", nil
			}
			return "the controller settled without it", nil
		case waitingForRetry:
			// Every retry the queues hold is one the tracker knows falls
			// due later, the first of them too late.
			waiting, first := ctrl.waitingRetries(time.Now())
			if retryWaitLimit > 0 && waiting == activity.delayed && first.in > retryWaitLimit {
				stalled++
			} else {
				stalled = 0
			}
			if stalled >= quietChecks {
				return "", fmt.Errorf("the controller has nothing to do but wait %v to retry %s, which failed %d times in a row; lower -failure-rate or set -max-requeue",
					first.in.Round(time.Millisecond), first.what, first.failures)
			}
		default:
			stalled = 0
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("controller did not settle within %v", settleTimeout)
		}
		select {
		case <-ctx.Done():
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// controllerState is what the controller is doing, as progress sees it.
type controllerState int

const (
	working         controllerState = iota
	waitingForRetry                 // nothing queued or being processed, but retries wait for their backoff
	settled                         // nothing queued, waiting or being processed
)

// progress follows the controller over checks 5 ms apart. The controller is
// settled once it has had nothing to do on quietChecks checks in a row, with
// nothing written to the store and nothing handed out by its work queues in
// between; it only waits for retries when the same holds but for items
// waiting for their backoff.
type progress struct {
	store *Store
	ctrl  *controller
	last  snapshot
	idle  int // checks in a row with nothing queued, waiting or being processed
	quiet int // checks in a row with nothing queued or being processed
}

type snapshot struct {
	revision int64
	gets     uint64
}

func (p *progress) check() (controllerState, workqueueActivity, error) {
	activity, err := p.ctrl.activity()
	if err != nil {
		return working, activity, err
	}
	now := snapshot{p.store.Revision(), activity.gets}
	unchanged := now == p.last
	p.last = now
	p.idle = calmChecks(p.idle, !activity.busy(), unchanged)
	p.quiet = calmChecks(p.quiet, activity.queued == 0 && activity.inFlight == 0, unchanged)
	switch {
	case p.idle >= quietChecks:
		return settled, activity, nil
	case p.quiet >= quietChecks && activity.delayed > 0:
		return waitingForRetry, activity, nil
	}
	return working, activity, nil
}

// calmChecks counts calm checks in a row, n so far: a check that is not calm
// starts again from 0, and a calm one after a change from 1.
func calmChecks(n int, calm, unchanged bool) int {
	switch {
	case !calm:
		return 0
	case n > 0 && unchanged:
		return n + 1
	}
	return 1
}
