package redisqueue

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/go-workqueue/workqueue/inspect"
	"github.com/go-workqueue/workqueue/redis/redistest"
)

// TestSnapshot checks that a snapshot taken by one handle shows the whole
// queue: keys queued, held by other handles (longest first, marked when
// added meanwhile), delayed, with their failure counts and the adds of
// every handle; and that the inspector serves it.
func TestSnapshot(t *testing.T) {
	s := redistest.Start(t, redistest.Options{})
	client := s.Client()
	clk := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
	opts := Options[string]{Clock: clk, LeaseDuration: time.Hour, RateLimit: &RateLimit{Base: time.Second, Max: time.Minute}}
	worker := newTestQueue(t, client, opts)
	name := queueNameOf(worker)
	other := newHandle(t, client, name, opts)
	viewer := newHandle(t, client, name, opts)

	worker.Add("stuck")
	require.Equal(t, "stuck", getNow(t, worker))
	clk.Step(time.Minute)
	other.Add("busy")
	require.Equal(t, "busy", getNow(t, other))
	other.Add("busy") // marked
	worker.Add("a")
	other.Add("b")
	worker.AddRateLimited("retry") // waits 1s, one failure
	worker.AddAfter("later", time.Hour)

	snap, err := viewer.SnapshotContext(context.Background(), 10)
	require.NoError(t, err)
	start := time.Unix(1_000_000, 0)
	assert.Equal(t, start.Add(time.Minute), snap.Taken)
	assert.Equal(t, 2, snap.Depth)
	assert.Equal(t, []string{"a", "b"}, snap.Queued)
	assert.Equal(t, 2, snap.Processing)
	require.Len(t, snap.InFlight, 2)
	assert.Equal(t, "stuck", snap.InFlight[0].Item, "longest-running first")
	assert.Equal(t, start, snap.InFlight[0].Since)
	assert.False(t, snap.InFlight[0].Requeue)
	assert.Equal(t, "busy", snap.InFlight[1].Item)
	assert.True(t, snap.InFlight[1].Requeue)
	assert.Equal(t, 2, snap.Waiting)
	require.Len(t, snap.Delayed, 2)
	assert.Equal(t, "retry", snap.Delayed[0].Item)
	assert.Equal(t, start.Add(time.Minute+time.Second), snap.Delayed[0].ReadyAt)
	assert.Equal(t, "later", snap.Delayed[1].Item)
	assert.Equal(t, map[string]int{"retry": 1}, snap.Failures)
	assert.Equal(t, uint64(5), snap.Adds, "stuck, busy, busy marked, a, b")

	limited, err := viewer.SnapshotContext(context.Background(), 1)
	require.NoError(t, err)
	assert.Equal(t, []string{"a"}, limited.Queued)
	assert.Len(t, limited.InFlight, 1)
	assert.Equal(t, 2, limited.Depth)

	h := inspect.NewHandler()
	inspect.Register(h, "objects", viewer)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/?format=json", nil))
	require.Equal(t, http.StatusOK, rec.Code)
	var page map[string]any
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &page), rec.Body.String())
	assert.Contains(t, rec.Body.String(), `"stuck"`)

	worker.Done("stuck")
	other.Done("busy")
	for range 3 { // a, b, and busy again
		other.Done(getNow(t, other))
	}
}
