package compat

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	clientgo "k8s.io/client-go/util/workqueue"

	"github.com/go-workqueue/workqueue"
)

// Our queues and limiters can be handed to code written for client-go's
// interfaces, and client-go's limiters and storage to our queues.
var (
	_ clientgo.TypedInterface[string]             = (*workqueue.Typed[string])(nil)
	_ clientgo.TypedInterface[string]             = workqueue.TypedInterface[string](nil)
	_ clientgo.TypedDelayingInterface[string]     = workqueue.TypedDelayingInterface[string](nil)
	_ clientgo.TypedRateLimitingInterface[string] = workqueue.TypedRateLimitingInterface[string](nil)

	_ clientgo.TypedRateLimiter[string] = workqueue.TypedRateLimiter[string](nil)
	_ clientgo.TypedRateLimiter[string] = (*workqueue.TypedItemExponentialFailureRateLimiter[string])(nil)
	_ clientgo.TypedRateLimiter[string] = (*workqueue.TypedItemFastSlowRateLimiter[string])(nil)
	_ clientgo.TypedRateLimiter[string] = (*workqueue.TypedBucketRateLimiter[string])(nil)
	_ clientgo.TypedRateLimiter[string] = (*workqueue.TypedMaxOfRateLimiter[string])(nil)
	_ clientgo.TypedRateLimiter[string] = workqueue.TypedWithMaxWaitRateLimiter[string]{}
	_ clientgo.Queue[string]            = workqueue.Queue[string](nil)

	_ workqueue.TypedRateLimiter[string] = clientgo.TypedRateLimiter[string](nil)
	_ workqueue.Queue[string]            = clientgo.Queue[string](nil)
	_ workqueue.TypedInterface[string]   = clientgo.TypedInterface[string](nil)

	// Our queue can sit under client-go's layers and client-go's under ours.
	_ = clientgo.TypedDelayingQueueConfig[string]{Queue: (*workqueue.Typed[string])(nil)}
	_ = workqueue.TypedDelayingQueueConfig[string]{Queue: (*clientgo.Typed[string])(nil)}
	_ = clientgo.TypedRateLimitingQueueConfig[string]{DelayingQueue: workqueue.TypedDelayingInterface[string](nil)}
	_ = workqueue.TypedRateLimitingQueueConfig[string]{DelayingQueue: clientgo.TypedDelayingInterface[string](nil)}
)

// TestMixedLayers runs our rate-limiting queue on client-go's limiter and
// client-go's rate-limiting queue on ours.
func TestMixedLayers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ours := workqueue.NewTypedRateLimitingQueue[string](clientgo.NewTypedItemExponentialFailureRateLimiter[string](time.Second, time.Minute))
		theirs := clientgo.NewTypedRateLimitingQueue[string](workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Second, time.Minute))
		for _, q := range []clientgo.TypedRateLimitingInterface[string]{ours, theirs} {
			q.AddRateLimited("a")
			q.AddRateLimited("a")
			require.Equal(t, 2, q.NumRequeues("a"))
			time.Sleep(time.Second)
			item, _ := q.Get()
			require.Equal(t, "a", item)
			q.Forget(item)
			q.Done(item)
			q.ShutDown()
		}
	})
}
