package crredis_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"
	ctrlworkqueue "k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	crredis "github.com/go-workqueue/workqueue/controllerruntime/redis"
	redisqueue "github.com/go-workqueue/workqueue/redis"
	"github.com/go-workqueue/workqueue/redis/redistest"
)

// object is what a test's channel source carries: a request and the
// priority its handler enqueues it at, nil for the default.
type object struct {
	req      reconcile.Request
	priority *int
}

// enqueue is the tests' event handler. Like controller-runtime's own
// handlers, it sets a priority only when the queue is a priority queue,
// and uses handler.LowPriority for initial-list events.
var enqueue = handler.TypedFuncs[object, reconcile.Request]{
	GenericFunc: func(_ context.Context, e event.TypedGenericEvent[object], q ctrlworkqueue.TypedRateLimitingInterface[reconcile.Request]) {
		if pq, ok := q.(priorityqueue.PriorityQueue[reconcile.Request]); ok {
			pq.AddWithOpts(priorityqueue.AddOpts{Priority: e.Object.priority}, e.Object.req)
			return
		}
		q.Add(e.Object.req)
	},
}

func low() *int { p := handler.LowPriority; return &p }

func req(ns, name string) reconcile.Request {
	return reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}}
}

// replica is one unmanaged controller on a handle of the Redis queue of
// its name, with a Redis client of its own, as one replica of a
// controller in its own process would have.
type replica struct {
	events chan event.TypedGenericEvent[object]
	cancel context.CancelFunc
	done   chan error
	queue  atomic.Pointer[crredis.Queue[reconcile.Request]]
}

// startReplica runs a controller called name with reconciler r and
// workers workers on client; it stops it at the test's end.
func startReplica(t *testing.T, client redis.UniversalClient, name string, r reconcile.TypedReconciler[reconcile.Request], workers int) *replica {
	t.Helper()
	rp := &replica{events: make(chan event.TypedGenericEvent[object]), done: make(chan error, 1)}
	newQueue := crredis.NewQueue(client, redisqueue.Options[reconcile.Request]{})
	skip := true
	c, err := controller.NewTypedUnmanaged(name, controller.TypedOptions[reconcile.Request]{
		Reconciler:              r,
		MaxConcurrentReconciles: workers,
		SkipNameValidation:      &skip,
		NewQueue: func(name string, rl ctrlworkqueue.TypedRateLimiter[reconcile.Request]) ctrlworkqueue.TypedRateLimitingInterface[reconcile.Request] {
			q := newQueue(name, rl)
			rp.queue.Store(q.(*crredis.Queue[reconcile.Request]))
			return q
		},
	})
	require.NoError(t, err)
	require.NoError(t, c.Watch(source.TypedChannel(rp.events, enqueue)))
	ctx, cancel := context.WithCancel(context.Background())
	rp.cancel = cancel
	go func() { rp.done <- c.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-rp.done:
			require.NoError(t, err)
		case <-time.After(10 * time.Second):
			t.Error("the controller did not stop within 10s")
		}
		// controller-runtime shuts the queue down from a goroutine of its
		// own; this waits for the handle to let go of Redis before the
		// client closes.
		if q := rp.queue.Load(); q != nil {
			q.ShutDown()
		}
	})
	return rp
}

// send hands the events to the replica's source, one per request.
func (rp *replica) send(t *testing.T, priority *int, reqs ...reconcile.Request) {
	t.Helper()
	for _, r := range reqs {
		select {
		case rp.events <- event.TypedGenericEvent[object]{Object: object{req: r, priority: priority}}:
		case <-time.After(5 * time.Second):
			t.Fatal("the channel source took no event for 5s")
		}
	}
}

// recorder is a reconciler both replicas share, as a test's view of the
// whole fleet: it records the requests reconciled, in the order their
// reconciles began, after each worker's first reconcile has waited for
// open to close.
type recorder struct {
	open    chan struct{}
	entered chan reconcile.Request

	mu      sync.Mutex
	order   []reconcile.Request
	running map[reconcile.Request]bool
	overlap int
}

func newRecorder() *recorder {
	return &recorder{open: make(chan struct{}), entered: make(chan reconcile.Request, 1024), running: map[reconcile.Request]bool{}}
}

func (rc *recorder) Reconcile(_ context.Context, r reconcile.Request) (reconcile.Result, error) {
	rc.mu.Lock()
	if rc.running[r] {
		rc.overlap++
	}
	rc.running[r] = true
	rc.mu.Unlock()
	rc.entered <- r
	<-rc.open
	rc.mu.Lock()
	rc.order = append(rc.order, r)
	delete(rc.running, r)
	rc.mu.Unlock()
	return reconcile.Result{}, nil
}

func (rc *recorder) snapshot() (order []reconcile.Request, overlap int) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return slices.Clone(rc.order), rc.overlap
}

var controllerSeq atomic.Int64

// TestTwoReplicasHandOutInitialListLast runs two replicas of a controller,
// each with one worker, its own Redis client and its own event source, on
// one Redis queue. While both workers are busy, one replica's source sees
// the initial list (handler.LowPriority) and the other's live changes,
// interleaved, and both see some of each other's objects: the queue must
// hold each object once and hand every live change out before the first
// initial-list object, across both replicas.
func TestTwoReplicasHandOutInitialListLast(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	name := fmt.Sprintf("crredis-%d", controllerSeq.Add(1))
	rc := newRecorder()
	a := startReplica(t, srv.Client(), name, rc, 1)
	b := startReplica(t, srv.Client(), name, rc, 1)

	// One blocker for each worker, so that what follows waits in Redis.
	a.send(t, nil, req("", "blocker-a"))
	b.send(t, nil, req("", "blocker-b"))
	for range 2 {
		select {
		case <-rc.entered:
		case <-time.After(5 * time.Second):
			t.Fatal("a worker took no blocker within 5s")
		}
	}

	const n = 20
	var listed, changed []reconcile.Request
	for i := range n {
		listed = append(listed, req("ns", fmt.Sprintf("listed%d", i)))
		changed = append(changed, req("ns", fmt.Sprintf("changed%d", i)))
	}
	for i := range n {
		a.send(t, low(), listed[i])
		b.send(t, nil, changed[i])
		if i%4 == 0 {
			// Each replica's informer lists the objects too: added again,
			// at the same priority, they stay queued once.
			b.send(t, low(), listed[i])
			a.send(t, nil, changed[i])
		}
	}
	require.Eventually(t, func() bool {
		q := a.queue.Load()
		return q != nil && q.Len() == 2*n
	}, 5*time.Second, time.Millisecond, "the events did not reach the queue")
	close(rc.open)
	require.Eventually(t, func() bool { order, _ := rc.snapshot(); return len(order) == 2*n+2 }, 10*time.Second, time.Millisecond,
		"not every object was reconciled")
	order, overlap := rc.snapshot()
	assert.Zero(t, overlap, "an object was reconciled by two workers at once")
	var got []reconcile.Request
	for _, r := range order {
		if r.Namespace == "ns" {
			got = append(got, r)
		}
	}
	assert.ElementsMatch(t, append(slices.Clone(changed), listed...), got, "each object reconciled once")
	// The queue hands every change out before the first listed object,
	// but the worker that got the last change may record it after the
	// other has recorded a listed object: with two workers, at least all
	// changes but one come before the first listed object.
	first := slices.IndexFunc(got, func(r reconcile.Request) bool { return slices.Contains(listed, r) })
	assert.GreaterOrEqual(t, first, n-1, "changes before the first listed object: %v", got)
}
