package crqueue_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

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

	"github.com/go-workqueue/workqueue"
	crqueue "github.com/go-workqueue/workqueue/controllerruntime"
)

// object is what the test's channel source carries: a request and the
// priority its handler enqueues it at, nil for the default.
type object struct {
	req      reconcile.Request
	priority *int
}

// enqueue is the test's event handler. Like controller-runtime's own
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

// harness runs one unmanaged controller on our queue.
type harness struct {
	events chan event.TypedGenericEvent[object]
	cancel context.CancelFunc
	done   chan error
	name   string
	queue  atomic.Pointer[crqueue.Queue[reconcile.Request]]
}

var controllerSeq atomic.Int64

// start runs a controller named name (made unique) with reconciler r,
// workers workers and the queue options opts; it stops it at the test's
// end.
func start(t *testing.T, r reconcile.TypedReconciler[reconcile.Request], workers int, limiter ctrlworkqueue.TypedRateLimiter[reconcile.Request], opts ...crqueue.Option[reconcile.Request]) *harness {
	t.Helper()
	h := &harness{events: make(chan event.TypedGenericEvent[object]), done: make(chan error, 1)}
	newQueue := crqueue.NewQueue(opts...)
	skip := true
	name := fmt.Sprintf("crq-%d", controllerSeq.Add(1))
	c, err := controller.NewTypedUnmanaged(name, controller.TypedOptions[reconcile.Request]{
		Reconciler:              r,
		MaxConcurrentReconciles: workers,
		RateLimiter:             limiter,
		SkipNameValidation:      &skip,
		NewQueue: func(name string, rl ctrlworkqueue.TypedRateLimiter[reconcile.Request]) ctrlworkqueue.TypedRateLimitingInterface[reconcile.Request] {
			q := newQueue(name, rl)
			h.queue.Store(q.(*crqueue.Queue[reconcile.Request]))
			return q
		},
	})
	require.NoError(t, err)
	require.NoError(t, c.Watch(source.TypedChannel(h.events, enqueue)))
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel, h.name = cancel, name
	go func() { h.done <- c.Start(ctx) }()
	t.Cleanup(func() { h.stop(t) })
	return h
}

// send hands the events to the source, one per request.
func (h *harness) send(t *testing.T, priority *int, reqs ...reconcile.Request) {
	t.Helper()
	for _, r := range reqs {
		select {
		case h.events <- event.TypedGenericEvent[object]{Object: object{req: r, priority: priority}}:
		case <-time.After(5 * time.Second):
			t.Fatal("the channel source took no event for 5s")
		}
	}
}

// waitLen waits until n items are ready in the queue.
func (h *harness) waitLen(t *testing.T, n int) {
	t.Helper()
	require.Eventually(t, func() bool {
		q := h.queue.Load()
		return q != nil && q.Len() == n
	}, 5*time.Second, time.Millisecond)
}

// stop cancels the controller and waits for Start to return; it is
// idempotent.
func (h *harness) stop(t *testing.T) time.Duration {
	t.Helper()
	began := time.Now()
	h.cancel()
	select {
	case err, ok := <-h.done:
		if ok {
			require.NoError(t, err)
			close(h.done)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the controller did not stop within 10s")
	}
	return time.Since(began)
}

// recorder is a reconciler that records the requests it reconciles, in
// order, optionally blocking on a gate first.
type recorder struct {
	mu    sync.Mutex
	order []reconcile.Request
	// gate, when not nil, is received from before each reconcile.
	gate chan struct{}
	// atGate, when not nil, gets a value (if it has room) as each
	// reconcile starts waiting on gate.
	atGate chan struct{}
	// result, when not nil, decides each reconcile's outcome.
	result func(r reconcile.Request, n int) (reconcile.Result, error)
	times  map[reconcile.Request][]time.Time
}

func (rc *recorder) Reconcile(_ context.Context, r reconcile.Request) (reconcile.Result, error) {
	if rc.gate != nil {
		select {
		case rc.atGate <- struct{}{}:
		default:
		}
		<-rc.gate
	}
	rc.mu.Lock()
	rc.order = append(rc.order, r)
	if rc.times == nil {
		rc.times = map[reconcile.Request][]time.Time{}
	}
	rc.times[r] = append(rc.times[r], time.Now())
	n := len(rc.times[r])
	rc.mu.Unlock()
	if rc.result != nil {
		return rc.result(r, n)
	}
	return reconcile.Result{}, nil
}

func (rc *recorder) snapshot() ([]reconcile.Request, map[reconcile.Request][]time.Time) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	times := make(map[reconcile.Request][]time.Time, len(rc.times))
	for k, v := range rc.times {
		times[k] = append([]time.Time(nil), v...)
	}
	return append([]reconcile.Request(nil), rc.order...), times
}

func (rc *recorder) count() int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return len(rc.order)
}

func fastLimiter() ctrlworkqueue.TypedRateLimiter[reconcile.Request] {
	return ctrlworkqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](5*time.Millisecond, time.Second)
}

func TestControllerReconcilesEveryEvent(t *testing.T) {
	for _, tc := range []struct {
		name    string
		workers int
		opts    []crqueue.Option[reconcile.Request]
	}{
		{"one worker", 1, nil},
		{"four workers", 4, nil},
		{"four workers, fairness", 4, []crqueue.Option[reconcile.Request]{crqueue.WithFairness(func(r reconcile.Request) string { return r.Namespace })}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc := &recorder{}
			h := start(t, rc, tc.workers, nil, tc.opts...)
			var want []reconcile.Request
			for i := range 200 {
				r := req(fmt.Sprintf("ns%d", i%7), fmt.Sprintf("obj%d", i))
				want = append(want, r)
				var p *int
				if i%3 == 0 {
					p = low()
				}
				h.send(t, p, r)
			}
			require.Eventually(t, func() bool { return rc.count() >= len(want) }, 5*time.Second, time.Millisecond)
			h.stop(t)
			order, _ := rc.snapshot()
			assert.ElementsMatch(t, want, order, "each event reconciled exactly once")
		})
	}
}

func TestControllerRetriesErrorsWithBackoff(t *testing.T) {
	const failures = 4
	rc := &recorder{result: func(_ reconcile.Request, n int) (reconcile.Result, error) {
		if n <= failures {
			return reconcile.Result{}, errors.New("transient")
		}
		return reconcile.Result{}, nil
	}}
	h := start(t, rc, 1, fastLimiter())
	r := req("ns", "flaky")
	h.send(t, nil, r)
	require.Eventually(t, func() bool { _, times := rc.snapshot(); return len(times[r]) == failures+1 }, 5*time.Second, time.Millisecond)
	h.stop(t)
	_, times := rc.snapshot()
	require.Len(t, times[r], failures+1, "retried until it succeeded, then not again")
	for i := 1; i < len(times[r]); i++ {
		// 5ms, 10ms, 20ms, 40ms: the limiter's per-item backoff.
		want := 5 * time.Millisecond << (i - 1)
		assert.GreaterOrEqual(t, times[r][i].Sub(times[r][i-1]), want, "retry %d waited its backoff", i)
	}
	assert.Zero(t, h.queue.Load().NumRequeues(r), "success forgets the failures")
}

func TestControllerHonoursRequeueAfter(t *testing.T) {
	const after = 40 * time.Millisecond
	rc := &recorder{result: func(_ reconcile.Request, n int) (reconcile.Result, error) {
		if n == 1 {
			return reconcile.Result{RequeueAfter: after}, nil
		}
		return reconcile.Result{}, nil
	}}
	h := start(t, rc, 2, nil)
	r := req("ns", "later")
	h.send(t, nil, r)
	require.Eventually(t, func() bool { _, times := rc.snapshot(); return len(times[r]) == 2 }, 5*time.Second, time.Millisecond)
	h.stop(t)
	_, times := rc.snapshot()
	require.Len(t, times[r], 2)
	assert.GreaterOrEqual(t, times[r][1].Sub(times[r][0]), after)
}

// gated starts a one-worker controller whose first reconcile (of "gate")
// blocks until release is called, so that the test can fill the queue.
func gated(t *testing.T, opts ...crqueue.Option[reconcile.Request]) (*harness, *recorder, func()) {
	t.Helper()
	rc := &recorder{gate: make(chan struct{}), atGate: make(chan struct{}, 1)}
	h := start(t, rc, 1, nil, opts...)
	h.send(t, nil, req("", "gate"))
	// Not waitLen(0): the source adds the item after send returns, so
	// the queue can be seen empty before the gate item is even in it.
	select {
	case <-rc.atGate:
	case <-time.After(5 * time.Second):
		t.Fatal("the worker did not reach the gate within 5s")
	}
	var once sync.Once
	release := func() { once.Do(func() { close(rc.gate) }) }
	t.Cleanup(release)
	return h, rc, release
}

func TestControllerHandsOutLowPriorityLast(t *testing.T) {
	h, rc, release := gated(t)
	var lows, highs []reconcile.Request
	for i := range 20 {
		lows = append(lows, req("ns", fmt.Sprintf("initial%d", i)))
		highs = append(highs, req("ns", fmt.Sprintf("change%d", i)))
	}
	// Interleaved, low first: an initial list racing with real changes.
	for i := range lows {
		h.send(t, low(), lows[i])
		h.send(t, nil, highs[i])
	}
	h.waitLen(t, 40)
	release()
	require.Eventually(t, func() bool { return rc.count() == 41 }, 5*time.Second, time.Millisecond)
	order, _ := rc.snapshot()
	assert.Equal(t, append(append([]reconcile.Request{req("", "gate")}, highs...), lows...), order,
		"every change before every initial-list event, FIFO within each")
}

func TestControllerFairnessAcrossTenants(t *testing.T) {
	tenant := func(r reconcile.Request) string { return r.Namespace }
	for _, tc := range []struct {
		name  string
		opts  []crqueue.Option[reconcile.Request]
		worst int // the latest position of the light tenant's items
	}{
		{"fifo", nil, 52},
		{"fairness", []crqueue.Option[reconcile.Request]{crqueue.WithFairness(tenant)}, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, rc, release := gated(t, tc.opts...)
			for i := range 50 {
				h.send(t, nil, req("heavy", fmt.Sprintf("o%d", i)))
			}
			light := []reconcile.Request{req("light", "a"), req("light", "b")}
			h.send(t, nil, light...)
			h.waitLen(t, 52)
			release()
			require.Eventually(t, func() bool { return rc.count() == 53 }, 5*time.Second, time.Millisecond)
			order, _ := rc.snapshot()
			order = order[1:] // the gate
			latest := 0
			for i, r := range order {
				if r.Namespace == "light" {
					latest = i + 1
				}
			}
			assert.Equal(t, tc.worst, latest)
		})
	}
}

func TestControllerStopsOnCancel(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []crqueue.Option[reconcile.Request]
		// reconciled: how many of the 100 queued items are reconciled
		// after the cancel.
		reconciled func(n int) bool
	}{
		{"stop (controller-runtime's rule)", nil, func(n int) bool { return n == 0 }},
		{"drain (client-go's rule)", []crqueue.Option[reconcile.Request]{crqueue.WithDrainOnShutDown[reconcile.Request]()}, func(n int) bool { return n == 100 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, rc, release := gated(t, tc.opts...)
			for i := range 100 {
				h.send(t, nil, req("ns", fmt.Sprintf("o%d", i)))
			}
			h.waitLen(t, 100)
			// Cancel while the worker is held, then let it go: the
			// controller shuts the queue down before the worker asks for
			// the next item.
			h.cancel()
			require.Eventually(t, func() bool { return h.queue.Load().ShuttingDown() }, 5*time.Second, time.Millisecond)
			release()
			took := h.stop(t)
			n := rc.count() - 1
			assert.True(t, tc.reconciled(n), "reconciled %d queued items after the cancel", n)
			t.Logf("stopped in %v after %d reconciles", took, n)
		})
	}
}

func TestControllerMaxWait(t *testing.T) {
	const maxWait = 20 * time.Millisecond
	for _, tc := range []struct {
		name     string
		opts     []crqueue.Option[reconcile.Request]
		lowFirst bool
	}{
		{"no bound", nil, false},
		{"max wait", []crqueue.Option[reconcile.Request]{crqueue.WithMaxWait[reconcile.Request](maxWait)}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, rc, release := gated(t, tc.opts...)
			old := req("ns", "initial")
			h.send(t, low(), old)
			h.waitLen(t, 1)
			// Let the low-priority item be ready for longer than maxWait.
			time.Sleep(2 * maxWait)
			var highs []reconcile.Request
			for i := range 5 {
				highs = append(highs, req("ns", fmt.Sprintf("change%d", i)))
			}
			h.send(t, nil, highs...)
			h.waitLen(t, 6)
			release()
			require.Eventually(t, func() bool { return rc.count() == 7 }, 5*time.Second, time.Millisecond)
			order, _ := rc.snapshot()
			want := append([]reconcile.Request{req("", "gate")}, highs...)
			want = append(want, old)
			if tc.lowFirst {
				want = append([]reconcile.Request{req("", "gate"), old}, highs...)
			}
			assert.Equal(t, want, order)
		})
	}
}

// TestControllerGroupLimits runs a controller with four workers and a limit
// of one reconcile per namespace: a namespace with many requests never has
// two reconciled at once, and the other namespaces' requests are reconciled
// beside it rather than after it.
func TestControllerGroupLimits(t *testing.T) {
	var (
		mu       sync.Mutex
		inFlight = map[string]int{}
		most     = map[string]int{}
		order    []string
	)
	release := make(chan struct{})
	r := reconcile.Func(func(_ context.Context, r reconcile.Request) (reconcile.Result, error) {
		mu.Lock()
		inFlight[r.Namespace]++
		most[r.Namespace] = max(most[r.Namespace], inFlight[r.Namespace])
		order = append(order, r.Namespace)
		mu.Unlock()
		<-release
		mu.Lock()
		inFlight[r.Namespace]--
		mu.Unlock()
		return reconcile.Result{}, nil
	})
	h := start(t, r, 4, fastLimiter(), crqueue.WithGroupLimits(workqueue.GroupLimits[reconcile.Request]{
		Group:   func(r reconcile.Request) string { return r.Namespace },
		Default: 1,
	}))
	for i := range 20 {
		h.send(t, nil, req("hot", fmt.Sprintf("o%d", i)))
	}
	h.send(t, nil, req("a", "x"), req("b", "x"), req("c", "x"))
	// The hot namespace's first request and the three others run at once.
	require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(order) == 4 }, 5*time.Second, time.Millisecond)
	mu.Lock()
	assert.ElementsMatch(t, []string{"hot", "a", "b", "c"}, order, "the other namespaces pass the waiting hot ones")
	mu.Unlock()
	close(release)
	require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(order) == 23 }, 5*time.Second, time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, map[string]int{"hot": 1, "a": 1, "b": 1, "c": 1}, most)
}
