package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/go-workqueue/workqueue/inspect"
)

// lockedBuffer is a bytes.Buffer that run writes to while a test reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestServe runs `queuecontroller -serve 127.0.0.1:0 -failure-rate 0.9
// -max-requeue 2` past its scenario and checks the metrics and the
// inspector it prints the addresses of: the work queues still running on
// the trickle of generated events, their adds growing from one scrape to
// the next, the request queue's group-limit gauges, the keys given up on
// listed as given up, with their errors, and the failures that were retried
// listed as recent failures.
func TestServe(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var out lockedBuffer
	result := make(chan error, 1)
	go func() {
		result <- run(ctx, &out, options{workers: 2, failureRate: 0.9, seed: 1, maxRequeueNum: 2, serve: "127.0.0.1:0", retryWaitLimit: retryWaitLimit})
	}()
	require.Eventually(t, func() bool { return strings.Contains(out.String(), "until interrupted") }, 20*time.Second, 10*time.Millisecond, "no scenario end:\n%s", &out)
	urls := regexp.MustCompile(`(?m)^serving metrics on (http://\S+/metrics)\ninspecting the work queues on (http://\S+/debug/queues)$`).FindStringSubmatch(out.String())
	require.NotNil(t, urls, out.String())

	adds := func() float64 {
		m := regexp.MustCompile(`(?m)^workqueue_adds_total\{name="request"\} (\S+)$`).FindStringSubmatch(get(t, urls[1]))
		require.NotNil(t, m, "no adds of the request queue on /metrics")
		v, err := strconv.ParseFloat(m[1], 64)
		require.NoError(t, err)
		return v
	}
	first := adds()
	metrics := get(t, urls[1])
	assert.Regexp(t, `(?m)^workqueue_items_waiting_for_slot\{name="request"\} \d+$`, metrics, "the request queue's group limit")
	assert.Regexp(t, `(?m)^workqueue_groups_at_limit\{name="request"\} \d+$`, metrics)
	assert.NotContains(t, metrics, `workqueue_items_waiting_for_slot{name="command"}`, "the command queue has no group limit")
	require.Eventually(t, func() bool { return adds() > first }, 20*time.Second, 50*time.Millisecond,
		"the request queue took no add after the scenario: nothing live to watch")
	assert.Contains(t, get(t, urls[2]), `<section class="queue" data-queue="command">`)
	var view inspect.View
	require.NoError(t, json.Unmarshal([]byte(get(t, urls[2]+"?format=json")), &view))

	cancel()
	err := <-result
	var incomplete *incompleteError
	require.ErrorAs(t, err, &incomplete, "these flags give up")
	require.Len(t, view.Queues, 2)
	givenUp := map[string]inspect.FailedKey{} // by the timeline's name
	recent := 0
	for i, name := range []string{requestQueueName, commandQueueName} {
		q := view.Queues[i]
		assert.Equal(t, name, q.Name)
		assert.False(t, q.ShuttingDown, "the controller still runs while it serves")
		assert.LessOrEqual(t, uint64(len(q.Recent)), q.Failures)
		recent += len(q.Recent)
		for _, f := range q.Failing {
			assert.NotEmpty(t, f.LastError, f.Key)
			if f.State != inspect.GivenUp {
				assert.Equal(t, inspect.Retrying, f.State, f.Key)
				continue
			}
			assert.Equal(t, 3, f.Failures, "%s given up after 2 retries", f.Key)
			if name == commandQueueName {
				f.Key = "command " + f.Key // as commandName spells it
			}
			givenUp[f.Key] = f
		}
	}
	// The give-ups the run reports cover the whole run, so they include
	// every one the page showed; the page, taken earlier, can miss later
	// ones, so only the scenario's commands, all done by then, are
	// checked the other way.
	for key := range givenUp {
		assert.Contains(t, incomplete.givenUp, key, "only keys given up on are not retried")
	}
	for _, what := range incomplete.givenUp {
		if strings.HasPrefix(what, "command ") && !strings.Contains(what, "-prod-") { // a command is never added again
			assert.Contains(t, givenUp, what, "a command of the scenario given up on stays listed")
		}
	}
	require.NotEmpty(t, givenUp, "these flags give up on requests and commands")
	assert.NotZero(t, recent, "the failures show as recent failures")
}

func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s: %s", url, body)
	return string(body)
}
