package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
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
// -max-requeue 2` until it serves after the scenario, and checks the
// metrics and the inspector it prints the addresses of: the work queues,
// shut down, with the keys given up on and their errors.
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

	metrics := get(t, urls[1])
	assert.Contains(t, metrics, `workqueue_adds_total{name="queue"}`)
	assert.Contains(t, get(t, urls[2]), `<section class="queue" data-queue="command">`)
	var view inspect.View
	require.NoError(t, json.Unmarshal([]byte(get(t, urls[2]+"?format=json")), &view))

	cancel()
	err := <-result
	var incomplete *incompleteError
	require.ErrorAs(t, err, &incomplete, "these flags give up")
	require.Len(t, view.Queues, 2)
	givenUp := map[string]inspect.FailingKey{} // by the timeline's name
	for i, name := range []string{requestQueueName, commandQueueName} {
		q := view.Queues[i]
		assert.Equal(t, name, q.Name)
		assert.True(t, q.ShuttingDown, "the controller has stopped")
		for _, f := range q.Failing {
			assert.NotEmpty(t, f.LastError, f.Key)
			if f.Retrying {
				continue // its retry was waiting when the controller stopped
			}
			assert.Equal(t, 3, f.Failures, "%s given up after 2 retries", f.Key)
			if name == commandQueueName {
				f.Key = "command " + f.Key // as commandName spells it
			}
			givenUp[f.Key] = f
		}
	}
	for key := range givenUp {
		assert.Contains(t, incomplete.givenUp, key, "only keys given up on are not retried")
	}
	for _, what := range incomplete.givenUp {
		if strings.HasPrefix(what, "command ") { // a command is never added again
			assert.Contains(t, givenUp, what, "a command given up on stays listed")
		}
	}
	require.NotEmpty(t, givenUp, "these flags give up on requests and commands")
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
