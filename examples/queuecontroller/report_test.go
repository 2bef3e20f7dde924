package main

import (
	"bytes"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestWorkqueueSummaryCounts drives the request queue by hand and checks
// the summary's figures against what happened: three adds of one request
// collapse into one item, a retry falls due and enters the queue, another
// is still waiting for its backoff when the queue stops.
func TestWorkqueueSummaryCounts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newTestController(t, NewStore(), 0)
		for range 3 {
			c.enqueue(syncReq("a"))
		}
		item, _ := c.queue.Get()
		time.Sleep(time.Millisecond)
		c.queue.AddRateLimited(item) // falls due after 5 ms
		c.queue.Done(item)
		time.Sleep(time.Second)
		item, _ = c.queue.Get()
		c.queue.AddRateLimited(item) // the second failure: 10 ms
		c.queue.Done(item)

		before, err := c.metrics.workqueueFigures()
		require.NoError(t, err)
		c.queue.ShutDown()
		after, err := c.metrics.workqueueFigures()
		require.NoError(t, err)
		s := workqueueSummary{label: requestQueueName, addCalls: c.requestAddCalls.Load(), figures: after[requestQueueName], dropped: before[requestQueueName].delayed}

		assert.Equal(t, 1, s.dropped, "the second retry was waiting")
		assert.EqualValues(t, 4, s.adds(), "three Add calls and the retry that fell due")
		assert.EqualValues(t, 2, s.merged(), "two of the three Add calls found the item queued")
		assert.Equal(t, "request: 4 adds (1 retry): 2 queued their item, 2 found it queued already; 2 processed, mean wait 497.5ms; 1 retry dropped at the stop", s.String(),
			"waits: none for the first Get; the retry, added at 1 ms + 5 ms, got at 1001 ms")
	})
}

func TestGaveUpReport(t *testing.T) {
	e := &incompleteError{
		givenUp:    []string{"dev/SyncQueue", "command admin/open-dev", "prod/SyncQueue", "dev/SyncQueue"},
		maxRequeue: 2,
		unreached:  []unreachedStep{{step: "step 6", until: "dev's open parked", why: "command admin/open-dev was given up"}},
	}
	assert.Equal(t, "gave up on 3 requests (dev/SyncQueue 2x, prod/SyncQueue) and 1 command (admin/open-dev) after 2 retries each", e.gaveUp(true))
	assert.EqualError(t, e, "the scenario did not play out as scripted: gave up on 3 requests and 1 command after 2 retries each; step 6's condition not reached")
}

// TestPrintStatusNamesAnUnsetState checks that a Queue whose status was
// never written shows <none> as its state, not a blank that shifts the
// columns.
func TestPrintStatusNamesAnUnsetState(t *testing.T) {
	store := NewStore()
	require.NoError(t, store.Queues.create(Queue{Name: "root"}))
	var out bytes.Buffer
	printStatus(&out, store)
	assert.Equal(t, "QUEUE  STATE   CLOSED-BY-PARENT  INQUEUE  PENDING  RUNNING  UNKNOWN  COMPLETED\n"+
		"root   <none>  false             0        0        0        0        0\n", out.String())
}
