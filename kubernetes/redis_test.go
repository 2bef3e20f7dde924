package kubernetes

import (
	"context"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	ctrlworkqueue "k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/go-workqueue/workqueue"
	crredis "github.com/go-workqueue/workqueue/controllerruntime/redis"
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

// sharedRecorder returns a recorder for several managers, whose reads go
// to the API server itself, so that no manager's cache decides what the
// others' reconciles see.
func sharedRecorder(t *testing.T, config *rest.Config) *recorder {
	t.Helper()
	direct := rest.CopyConfig(config)
	direct.QPS = -1
	c, err := client.New(direct, client.Options{})
	require.NoError(t, err)
	rec := newRecorder()
	rec.client = c
	return rec
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

	rec := sharedRecorder(t, config)
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

// heldReconciler is one manager's reconciler: the shared recorder, whose
// first reconcile in this manager waits for the gate.
type heldReconciler struct {
	*recorder
	gate *gate
}

func (h *heldReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	res, err := h.recorder.Reconcile(ctx, req)
	h.gate.hold(ctx)
	return res, err
}

// startHeldManagers starts two managers, one worker each, on the crredis
// queue called queueName of srv, watching namespaces and reconciling
// through rec, as two replicas of a controller; it returns once each
// worker is held on its first reconcile, with their gates and the first
// manager's queue.
func startHeldManagers(t *testing.T, srv *redistest.Server, rec *recorder, queueName string,
	opts redisqueue.Options[reconcile.Request], namespaces ...string) ([2]*gate, *crredis.Queue[reconcile.Request]) {
	t.Helper()
	var gates [2]*gate
	var handles [2]atomic.Pointer[crredis.Queue[reconcile.Request]]
	for i := range gates {
		gates[i] = newGate()
		redisClient := srv.Client()
		handle := &handles[i]
		t.Cleanup(func() {
			if q := handle.Load(); q != nil {
				q.ShutDown()
			}
		})
		startManager(t, managerSetup{
			namespaces: namespaces,
			workers:    1,
			reconciler: &heldReconciler{recorder: rec, gate: gates[i]},
			newQueue: func(string, ctrlworkqueue.TypedRateLimiter[reconcile.Request]) ctrlworkqueue.TypedRateLimitingInterface[reconcile.Request] {
				q := crredis.New(redisClient, queueName, opts)
				handle.Store(q)
				return q
			},
		}, rec)
	}
	for _, g := range gates {
		g.waitEntered(t)
	}
	return gates, handles[0].Load()
}

// TestTwoManagersInitialListBehindLiveChanges runs two managers, one
// worker each, on one crredis queue, as two replicas of a controller:
// both list the same existing ConfigMaps, which controller-runtime adds at
// handler.LowPriority, and while both workers are held on the first of
// them, live ConfigMaps are created, which both managers' informers add
// at priority 0. Across both managers every live change must be handed
// out before the rest of the initial list, each object queued once.
func TestTwoManagersInitialListBehindLiveChanges(t *testing.T) {
	const existing, live = 300, 50
	config := requireServer(t)
	srv := redistest.Start(t, redistest.Options{})
	cs := clientset(t, config)
	preNS, liveNS := namespace(t, cs, "pre"), namespace(t, cs, "live")
	pre := createConfigMaps(t, cs, preNS, "cm", "source", existing)

	rec := sharedRecorder(t, config)
	queueName := unique("crredis")
	gates, q := startHeldManagers(t, srv, rec, queueName, redisqueue.Options[reconcile.Request]{}, preNS, liveNS)
	// Both managers' caches have synced, so both initial lists are in.
	require.Eventually(t, func() bool { return q.Len() == existing-2 }, time.Minute, 10*time.Millisecond,
		"the initial lists did not reach the queue")
	liveNames := createConfigMaps(t, cs, liveNS, "cm", "source", live)
	require.Eventually(t, func() bool { return q.Len() == existing-2+live }, time.Minute, 10*time.Millisecond,
		"the live ConfigMaps did not reach the queue, once each")
	for _, g := range gates {
		close(g.open)
	}
	require.Eventually(t, func() bool {
		return rec.converged(preNS, pre, "v1") && rec.converged(liveNS, liveNames, "v1")
	}, 2*time.Minute, 10*time.Millisecond, "not every ConfigMap was reconciled")

	// The objects in the order of their first reconcile, but for the two
	// held ones.
	type first struct {
		ns string
		at time.Time
	}
	var order []first
	for _, name := range pre {
		if at := rec.reconciles(types.NamespacedName{Namespace: preNS, Name: name}); len(at) > 0 {
			order = append(order, first{preNS, at[0]})
		}
	}
	for _, name := range liveNames {
		at := rec.reconciles(types.NamespacedName{Namespace: liveNS, Name: name})
		require.Len(t, at, 1, "live ConfigMap %s reconciled once", name)
		order = append(order, first{liveNS, at[0]})
	}
	slices.SortFunc(order, func(a, b first) int { return a.at.Compare(b.at) })
	order = order[2:]
	// The queue hands every live change out before the rest of the initial
	// list; the worker that got the last of them may record it after the
	// other has begun on the initial list, so at least live-1 come first.
	firstListed := slices.IndexFunc(order, func(f first) bool { return f.ns == preNS })
	assert.GreaterOrEqual(t, firstListed, live-1, "live changes reconciled before the rest of the initial list")
	total, overlaps := rec.counts()
	assert.Zero(t, overlaps, "a key was reconciled by two workers at once")
	// Each held object may be added again by the other manager's
	// informer while it is held, and so reconciled twice.
	assert.LessOrEqual(t, total, existing+live+2)
	t.Logf("two managers on one crredis queue: %d live changes of %d handed out before the rest of the %d listed objects; %d reconciles",
		firstListed, live, existing, total)
}

// TestTwoManagersTakeTurnsByNamespace runs two managers, one worker each,
// on one crredis queue with Fairness by namespace: while both workers are
// held, a busy namespace gets many new ConfigMaps and a quiet one a few,
// and once the workers go on, across both managers, the quiet namespace's
// changes are reconciled in turn with the busy one's, not behind them all.
func TestTwoManagersTakeTurnsByNamespace(t *testing.T) {
	const held, busyCount, quietCount = 2, 100, 5
	config := requireServer(t)
	srv := redistest.Start(t, redistest.Options{})
	cs := clientset(t, config)
	heldNS, busyNS, quietNS := namespace(t, cs, "held"), namespace(t, cs, "busy"), namespace(t, cs, "quiet")
	createConfigMaps(t, cs, heldNS, "cm", "source", held)

	rec := sharedRecorder(t, config)
	queueName := unique("crredis-fair")
	opts := redisqueue.Options[reconcile.Request]{Fairness: []func(reconcile.Request) string{func(r reconcile.Request) string { return r.Namespace }}}
	gates, q := startHeldManagers(t, srv, rec, queueName, opts, heldNS, busyNS, quietNS)
	busy := createConfigMaps(t, cs, busyNS, "cm", "source", busyCount)
	require.Eventually(t, func() bool { return q.Len() == busyCount }, time.Minute, 10*time.Millisecond,
		"the busy namespace's ConfigMaps did not reach the queue, once each")
	quiet := createConfigMaps(t, cs, quietNS, "cm", "source", quietCount)
	require.Eventually(t, func() bool { return q.Len() == busyCount+quietCount }, time.Minute, 10*time.Millisecond,
		"the quiet namespace's ConfigMaps did not reach the queue, once each")
	for _, g := range gates {
		close(g.open)
	}
	require.Eventually(t, func() bool {
		return rec.converged(busyNS, busy, "v1") && rec.converged(quietNS, quiet, "v1")
	}, 2*time.Minute, 10*time.Millisecond, "not every ConfigMap was reconciled")

	type first struct {
		ns string
		at time.Time
	}
	var order []first
	for ns, names := range map[string][]string{busyNS: busy, quietNS: quiet} {
		for _, name := range names {
			at := rec.reconciles(types.NamespacedName{Namespace: ns, Name: name})
			require.NotEmpty(t, at, "ConfigMap %s/%s reconciled", ns, name)
			order = append(order, first{ns, at[0]})
		}
	}
	slices.SortFunc(order, func(a, b first) int { return a.at.Compare(b.at) })
	// The namespaces take turns, one change each: the quiet one's last
	// change is handed out 2*quietCount-th, and the two workers may
	// record theirs out of that order by one each.
	lastQuiet := 0
	for i, f := range order {
		if f.ns == quietNS {
			lastQuiet = i
		}
	}
	assert.Less(t, lastQuiet, 2*quietCount+2, "the quiet namespace's changes reconciled in turn with the busy one's")
	_, overlaps := rec.counts()
	assert.Zero(t, overlaps, "a key was reconciled by two workers at once")
	t.Logf("two managers on one fair crredis queue: the last of %d quiet changes was reconciled %d-th of %d",
		quietCount, lastQuiet+1, len(order))
}

// concurrencyRecorder hands each reconcile to the shared recorder and
// counts, per namespace, how many run at once across every manager.
type concurrencyRecorder struct {
	*recorder
	mu      sync.Mutex
	running map[string]int
	most    map[string]int
}

func (c *concurrencyRecorder) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	c.mu.Lock()
	c.running[req.Namespace]++
	c.most[req.Namespace] = max(c.most[req.Namespace], c.running[req.Namespace])
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.running[req.Namespace]--
		c.mu.Unlock()
	}()
	return c.recorder.Reconcile(ctx, req)
}

// TestTwoManagersShareAGroupLimit runs two managers, three workers each,
// on one crredis queue with GroupLimits of 2 by namespace, as two replicas
// of a controller would: across both managers, at most two reconciles of
// a namespace run at once, and every ConfigMap is reconciled.
func TestTwoManagersShareAGroupLimit(t *testing.T) {
	const perNamespace, limit = 60, 2
	config := requireServer(t)
	srv := redistest.Start(t, redistest.Options{})
	cs := clientset(t, config)
	namespaces := []string{namespace(t, cs, "group-a"), namespace(t, cs, "group-b")}
	names := map[string][]string{}
	for _, ns := range namespaces {
		names[ns] = createConfigMaps(t, cs, ns, "cm", "source", perNamespace)
	}

	rec := &concurrencyRecorder{recorder: sharedRecorder(t, config), running: map[string]int{}, most: map[string]int{}}
	queueName := unique("crredis-groups")
	opts := redisqueue.Options[reconcile.Request]{GroupLimits: &workqueue.GroupLimits[reconcile.Request]{
		Group:   func(r reconcile.Request) string { return r.Namespace },
		Default: limit,
	}}
	for range 2 {
		redisClient := srv.Client()
		var handle atomic.Pointer[crredis.Queue[reconcile.Request]]
		t.Cleanup(func() {
			if q := handle.Load(); q != nil {
				q.ShutDown()
			}
		})
		startManager(t, managerSetup{
			namespaces: namespaces,
			workers:    3,
			reconciler: rec,
			newQueue: func(string, ctrlworkqueue.TypedRateLimiter[reconcile.Request]) ctrlworkqueue.TypedRateLimitingInterface[reconcile.Request] {
				q := crredis.New(redisClient, queueName, opts)
				handle.Store(q)
				return q
			},
		}, rec.recorder)
	}
	require.Eventually(t, func() bool {
		return rec.converged(namespaces[0], names[namespaces[0]], "v1") && rec.converged(namespaces[1], names[namespaces[1]], "v1")
	}, 2*time.Minute, 10*time.Millisecond, "not every ConfigMap was reconciled")
	rec.mu.Lock()
	most := maps.Clone(rec.most)
	rec.mu.Unlock()
	for _, ns := range namespaces {
		assert.LessOrEqual(t, most[ns], limit, "reconciles of namespace %s at once, across both managers", ns)
	}
	_, overlaps := rec.counts()
	assert.Zero(t, overlaps, "a key was reconciled by two workers at once")
	t.Logf("two managers, six workers, on one crredis queue with a group limit of %d by namespace: at most %v reconciles of a namespace at once",
		limit, most)
}
