package redisqueue

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestBackoff(t *testing.T) {
	tests := []struct {
		attempt int
		want    time.Duration
	}{
		{0, 10 * time.Millisecond},
		{1, 20 * time.Millisecond},
		{6, 640 * time.Millisecond},
		{7, time.Second},
		{1000, time.Second},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, backoff(tt.attempt), "backoff(%d)", tt.attempt)
	}
}

// TestSleepBackoffUsesTheHandlesClock is the regression test for
// sleepBackoff waiting on a real timer where every other wait of a handle
// uses its clock: with a fake clock, the wait ends when the clock passes
// it, and only then.
func TestSleepBackoffUsesTheHandlesClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
		q := &Queue[string]{clock: clk}
		returned := make(chan bool, 1)
		go func() { returned <- q.sleepBackoff(1, nil) }()
		synctest.Wait()
		// An hour of the bubble's time: a real timer would have fired.
		time.Sleep(time.Hour)
		clk.Step(19 * time.Millisecond)
		synctest.Wait()
		select {
		case <-returned:
			t.Fatal("sleepBackoff returned before the handle's clock passed 20ms")
		default:
		}
		clk.Step(time.Millisecond)
		synctest.Wait()
		select {
		case ok := <-returned:
			assert.True(t, ok, "sleepBackoff without stop returned false")
		default:
			t.Fatal("sleepBackoff still waits after the handle's clock passed 20ms")
		}

		stop := make(chan struct{})
		go func() { returned <- q.sleepBackoff(0, stop) }()
		synctest.Wait()
		close(stop)
		assert.False(t, <-returned, "sleepBackoff after stop closed")
	})
}

// TestIsOutage checks which errors the retrying methods wait out. The
// UNBLOCKED case is a bug TestClusterFailover found with WaitReplicas 1:
// a node that turns replica ends a WAIT blocked on it with UNBLOCKED, and
// AddWithOpts gave up on its add ("items dropped") and returned, so the
// key was lost, instead of retrying on the new primary.
func TestIsOutage(t *testing.T) {
	var _ redis.Error = replyError("")
	tests := []struct {
		err  error
		want bool
	}{
		{replyError("UNBLOCKED force unblock from blocking operation, instance state changed (master -> replica?)"), true},
		{replyError("READONLY You can't write against a read only replica."), true},
		{replyError("CLUSTERDOWN The cluster is down"), true},
		{fmt.Errorf("%w: 0 of 1 replicas in 1s", ErrNotReplicated), true},
		{replyError("ERR Error running script"), false},
		{redis.ErrClosed, false},
		{context.Canceled, false},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, isOutage(tt.err), "isOutage(%v)", tt.err)
	}
}

// replyError is an error reply of Redis, as go-redis returns one.
type replyError string

func (e replyError) Error() string { return string(e) }

// RedisError marks replyError as a Redis reply (redis.Error).
func (replyError) RedisError() {}
