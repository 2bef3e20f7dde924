package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
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

// TestServe runs `queuecontroller -serve 127.0.0.1:0`, the README's
// command, on a trickle cycle of 6 s instead of a minute, and checks the
// metrics and the inspector it prints the addresses of: the work queues
// still running on the trickle, their adds growing from one scrape to the
// next, the request queue's group-limit gauges; the inspector showing,
// within a few cycles, a Queue's request waiting for its slot, requests in
// flight, delayed and parked, and the Groups table; and the run ending
// cleanly once interrupted, its table agreeing with its gauges.
func TestServe(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var out lockedBuffer
	result := make(chan error, 1)
	const cycle = 6 * time.Second
	go func() {
		result <- run(ctx, &out, options{workers: 2, failureRate: 0.2, seed: 1, maxRequeueNum: -1, serve: "127.0.0.1:0",
			retryWaitLimit: retryWaitLimit, trickleCycle: cycle})
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
	page := get(t, urls[2])
	assert.Contains(t, page, `<section class="queue" data-queue="command">`)

	// What the README promises the page shows at some point of every
	// cycle, polled as a reader reloading the page would see it.
	seen := map[string]bool{}
	want := []string{"a request waiting for its Queue's slot", "requests in flight", "requests delayed", "a request parked", "the Groups table", "the Groups table on the HTML page"}
	assert.EventuallyWithT(t, func(c *assert.CollectT) {
		body, err := fetch(urls[2] + "?format=json")
		require.NoError(c, err)
		var view inspect.View
		require.NoError(c, json.Unmarshal([]byte(body), &view))
		require.Len(c, view.Queues, 2)
		q := view.Queues[0]
		require.Equal(c, requestQueueName, q.Name)
		assert.False(c, q.ShuttingDown, "the controller still runs while it serves")
		for i, now := range []bool{q.WaitingForSlot > 0, len(q.InFlight) > 0, len(q.Delayed) > 0, len(q.ParkedKeys) > 0, len(q.Groups) > 0} {
			seen[want[i]] = seen[want[i]] || now
		}
		if len(q.Groups) > 0 {
			page, err := fetch(urls[2])
			require.NoError(c, err)
			seen[want[5]] = seen[want[5]] || strings.Contains(page, "<h3>Groups, those waiting for a slot first")
		}
		for _, what := range want {
			assert.True(c, seen[what], "the inspector has not shown %s yet", what)
		}
	}, 6*cycle, 100*time.Millisecond, "polled for six cycles")

	cancel()
	require.NoError(t, <-result, "an interrupted -serve run with unlimited retries ends cleanly:\n%s", &out)
	final := out.String()
	assert.NotContains(t, final, "did not play out")
	assert.NotContains(t, final, "gave up")
	checkTableAgreesWithGauges(t, final)
}

// fetch returns the body of a GET of url, which must answer 200 OK.
func fetch(url string) (string, error) {
	resp, err := http.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("%s: %s: %s", url, resp.Status, body)
	}
	return string(body), err
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
