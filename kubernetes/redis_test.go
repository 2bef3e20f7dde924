package kubernetes

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/rest"
	ctrlworkqueue "k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	redisqueue "github.com/go-workqueue/workqueue/redis"
	"github.com/go-workqueue/workqueue/redis/redistest"
)

// countingReconciler counts what one manager reconciled before handing
// the request to the recorder both managers share.
type countingReconciler struct {
	*recorder
	n atomic.Int64
}

func (c *countingReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	c.n.Add(1)
	return c.recorder.Reconcile(ctx, req)
}

// TestTwoManagersShareARedisQueue runs two controller-runtime managers,
// each with its own Redis connection and its own informers, on one
// redisqueue queue, as two replicas of a controller would (both in this
// test's process, so that one recorder can see every reconcile). Both
// watch the same ConfigMaps, so every event is added twice; the shared
// queue must collapse them, hand each key to one worker of one manager at
// a time, and get every object and every update reconciled, with both
// managers doing part of the work.
func TestTwoManagersShareARedisQueue(t *testing.T) {
	const existing, updated = 500, 100
	config := requireServer(t)
	srv := redistest.Start(t, redistest.Options{})
	cs := clientset(t, config)
	ns := namespace(t, cs, "redis")
	names := createConfigMaps(t, cs, ns, "cm", "source", existing)

	rec := newRecorder()
	// Reads go to the API server itself, so that neither manager's cache
	// decides what the other's reconciles see.
	direct := rest.CopyConfig(config)
	direct.QPS = -1
	c, err := client.New(direct, client.Options{})
	require.NoError(t, err)
	rec.client = c
	queueName := unique("crq-redis")
	var managers [2]*countingReconciler
	start := time.Now()
	for i := range managers {
		managers[i] = &countingReconciler{recorder: rec}
		redisClient := srv.Client()
		// controller-runtime shuts the queue down from a goroutine of its
		// own and may return before the handle has let go of Redis; this
		// waits for it, after the manager has stopped and before the
		// client closes.
		var handle atomic.Pointer[redisqueue.Queue[reconcile.Request]]
		t.Cleanup(func() {
			if q := handle.Load(); q != nil {
				q.ShutDown()
			}
		})
		startManager(t, managerSetup{
			namespaces: []string{ns},
			workers:    2,
			reconciler: managers[i],
			newQueue: func(string, ctrlworkqueue.TypedRateLimiter[reconcile.Request]) ctrlworkqueue.TypedRateLimitingInterface[reconcile.Request] {
				q := redisqueue.New(redisClient, queueName, redisqueue.Options[reconcile.Request]{
					Codec: redisqueue.JSONCodec[reconcile.Request]{},
				})
				handle.Store(q)
				return q
			},
		}, rec)
	}
	require.Eventually(t, func() bool { return rec.converged(ns, names, "v1") }, 2*time.Minute, 10*time.Millisecond,
		"not every ConfigMap was reconciled")
	initial := time.Since(start)

	burst := time.Now()
	setValues(t, cs, ns, names[:updated], "v2")
	require.Eventually(t, func() bool { return rec.converged(ns, names[:updated], "v2") }, 2*time.Minute, 10*time.Millisecond,
		"not every update was reconciled")
	updates := time.Since(burst)

	total, overlaps := rec.counts()
	assert.Zero(t, overlaps, "a key was reconciled by two workers at once")
	for i, m := range managers {
		assert.Positive(t, m.n.Load(), "manager %d did no work", i)
	}
	// Each event reaches the queue twice, once from each manager's
	// informer; the second add collapses into the first unless the key
	// was being reconciled, when it is reconciled once more.
	assert.GreaterOrEqual(t, total, existing+updated)
	assert.LessOrEqual(t, total, 2*(existing+updated))
	t.Logf("two managers on one Redis queue: %d existing ConfigMaps reconciled in %.2f s, %d updates in %.2f s; "+
		"%d reconciles (%d by one manager, %d by the other)",
		existing, initial.Seconds(), updated, updates.Seconds(), total, managers[0].n.Load(), managers[1].n.Load())
}
