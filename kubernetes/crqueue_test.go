package kubernetes

import (
	"context"
	"errors"
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
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	ctrlworkqueue "k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	crqueue "github.com/go-workqueue/workqueue/controllerruntime"
)

// handout is one item the controller took from the queue.
type handout struct {
	req      reconcile.Request
	priority int
}

// watchedQueue is crqueue's queue with a record of what the controller
// took from it and how often each item was added: the order of hand-outs
// is what priorities and fairness decide, and nothing outside the queue
// sees it. It keeps controller-runtime's priority interface, so the
// handlers still mark initial-list events low.
type watchedQueue struct {
	*crqueue.Queue[reconcile.Request]

	mu       sync.Mutex
	handouts []handout
	adds     map[reconcile.Request]int
}

var _ priorityqueue.PriorityQueue[reconcile.Request] = (*watchedQueue)(nil)

func (q *watchedQueue) GetWithPriority() (reconcile.Request, int, bool) {
	req, priority, shutdown := q.Queue.GetWithPriority()
	if !shutdown {
		q.mu.Lock()
		q.handouts = append(q.handouts, handout{req, priority})
		q.mu.Unlock()
	}
	return req, priority, shutdown
}

func (q *watchedQueue) Get() (reconcile.Request, bool) {
	req, _, shutdown := q.GetWithPriority()
	return req, shutdown
}

func (q *watchedQueue) Add(req reconcile.Request) {
	q.countAdds(req)
	q.Queue.Add(req)
}

func (q *watchedQueue) AddWithOpts(o priorityqueue.AddOpts, reqs ...reconcile.Request) {
	q.countAdds(reqs...)
	q.Queue.AddWithOpts(o, reqs...)
}

func (q *watchedQueue) countAdds(reqs ...reconcile.Request) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, req := range reqs {
		q.adds[req]++
	}
}

func (q *watchedQueue) addsOf(req reconcile.Request) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.adds[req]
}

func (q *watchedQueue) handedOut() []handout {
	q.mu.Lock()
	defer q.mu.Unlock()
	return append([]handout(nil), q.handouts...)
}

// recorder reconciles ConfigMaps into memory: what it saw of each, how
// often, and when. behave, when set, decides the result of a reconcile
// after it has been recorded.
type recorder struct {
	client client.Client
	behave func(ctx context.Context, req reconcile.Request, n int) (reconcile.Result, error)

	mu       sync.Mutex
	observed map[types.NamespacedName]string
	times    map[types.NamespacedName][]time.Time
	total    int
	inFlight map[types.NamespacedName]bool
	overlaps int
}

func newRecorder() *recorder {
	return &recorder{
		observed: map[types.NamespacedName]string{},
		times:    map[types.NamespacedName][]time.Time{},
		inFlight: map[types.NamespacedName]bool{},
	}
}

func (r *recorder) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var cm corev1.ConfigMap
	err := r.client.Get(ctx, req.NamespacedName, &cm)
	value := ""
	if err == nil {
		value = cm.Data["value"]
	} else if client.IgnoreNotFound(err) != nil {
		return reconcile.Result{}, err
	}
	r.mu.Lock()
	if r.inFlight[req.NamespacedName] {
		// The queue must never hand one key to two workers at once.
		r.overlaps++
	}
	r.inFlight[req.NamespacedName] = true
	r.observed[req.NamespacedName] = value
	r.times[req.NamespacedName] = append(r.times[req.NamespacedName], time.Now())
	r.total++
	n := len(r.times[req.NamespacedName])
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		delete(r.inFlight, req.NamespacedName)
		r.mu.Unlock()
	}()
	if r.behave != nil {
		return r.behave(ctx, req, n)
	}
	return reconcile.Result{}, nil
}

// converged reports whether every named ConfigMap of ns was seen with want.
func (r *recorder) converged(ns string, names []string, want string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, name := range names {
		if r.observed[types.NamespacedName{Namespace: ns, Name: name}] != want {
			return false
		}
	}
	return true
}

func (r *recorder) reconciles(key types.NamespacedName) []time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]time.Time(nil), r.times[key]...)
}

func (r *recorder) counts() (total, overlaps int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.total, r.overlaps
}

// managerSetup is what a test varies in the manager it runs.
type managerSetup struct {
	namespaces  []string
	workers     int
	fairness    bool
	metricsAddr string // "" serves no metrics
	// newQueue, if set, makes the controller's queue instead of crqueue;
	// running.queue then stays nil.
	newQueue func(name string, rl ctrlworkqueue.TypedRateLimiter[reconcile.Request]) ctrlworkqueue.TypedRateLimitingInterface[reconcile.Request]
	// reconciler, if set, is called instead of the recorder, which must
	// then have its client already.
	reconciler reconcile.Reconciler
}

// running is a started manager and what the tests read from it.
type running struct {
	name     string
	queue    func() *watchedQueue
	requests *requestCounter
	started  time.Time
}

// startManager runs a manager with one controller for the labelled
// ConfigMaps of setup.namespaces on crqueue's queue, reconciled by rec,
// and stops it when the test ends, failing the test if it does not stop
// cleanly.
func startManager(t *testing.T, setup managerSetup, rec *recorder) *running {
	t.Helper()
	r := &running{name: unique("crq"), requests: &requestCounter{}}
	labelled, err := labels.NewRequirement(testLabel, selection.Exists, nil)
	require.NoError(t, err)
	namespaces := map[string]cache.Config{}
	for _, ns := range setup.namespaces {
		namespaces[ns] = cache.Config{}
	}
	metricsAddr := setup.metricsAddr
	if metricsAddr == "" {
		metricsAddr = "0"
	}
	mgr, err := manager.New(r.requests.wrap(requireServer(t)), manager.Options{
		Cache: cache.Options{
			DefaultNamespaces:    namespaces,
			DefaultLabelSelector: labels.NewSelector().Add(*labelled),
		},
		Metrics: metricsserver.Options{BindAddress: metricsAddr},
	})
	require.NoError(t, err)
	var reconciler reconcile.Reconciler = rec
	if setup.reconciler != nil {
		reconciler = setup.reconciler
	} else {
		rec.client = mgr.GetClient()
	}

	var (
		mu    sync.Mutex
		queue *watchedQueue
	)
	r.queue = func() *watchedQueue {
		mu.Lock()
		defer mu.Unlock()
		return queue
	}
	var opts []crqueue.Option[reconcile.Request]
	if setup.fairness {
		opts = append(opts, crqueue.WithFairness(func(req reconcile.Request) string { return req.Namespace }))
	}
	newQueue := crqueue.NewQueue(opts...)
	makeQueue := func(name string, rl ctrlworkqueue.TypedRateLimiter[reconcile.Request]) ctrlworkqueue.TypedRateLimitingInterface[reconcile.Request] {
		q := &watchedQueue{
			Queue: newQueue(name, rl).(*crqueue.Queue[reconcile.Request]),
			adds:  map[reconcile.Request]int{},
		}
		mu.Lock()
		queue = q
		mu.Unlock()
		return q
	}
	if setup.newQueue != nil {
		makeQueue = setup.newQueue
	}
	skipNameValidation := true
	err = builder.ControllerManagedBy(mgr).
		Named(r.name).
		For(&corev1.ConfigMap{}).
		WithOptions(controller.Options{
			MaxConcurrentReconciles: setup.workers,
			SkipNameValidation:      &skipNameValidation,
			NewQueue:                makeQueue,
		}).
		Complete(reconciler)
	require.NoError(t, err)

	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan error, 1)
	r.started = time.Now()
	go func() { stopped <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-stopped:
			assert.NoError(t, err, "the manager stopped with an error")
		case <-time.After(30 * time.Second):
			t.Error("the manager did not stop within 30s of its context's end")
		}
	})
	if setup.newQueue == nil {
		require.Eventually(t, func() bool { return r.queue() != nil }, time.Minute, 10*time.Millisecond,
			"the controller made no queue within a minute")
	}
	return r
}

// gate holds a reconcile until the test opens it.
type gate struct {
	entered, open chan struct{}
	once          sync.Once
}

func newGate() *gate { return &gate{entered: make(chan struct{}), open: make(chan struct{})} }

// hold is called from the reconcile to be held; only the first call
// waits.
func (g *gate) hold(ctx context.Context) {
	first := false
	g.once.Do(func() { first = true })
	if !first {
		return
	}
	close(g.entered)
	select {
	case <-g.open:
	case <-ctx.Done():
	}
}

func (g *gate) waitEntered(t *testing.T) {
	t.Helper()
	select {
	case <-g.entered:
	case <-time.After(time.Minute):
		t.Fatal("the held reconcile did not start within a minute")
	}
}

// TestInitialListBehindLiveChanges starts a manager on thousands of
// existing ConfigMaps, holds its only worker on the first of them, makes
// live changes meanwhile, and checks that every live change is handed out
// at priority 0 before the rest of the initial list, which comes at
// controller-runtime's low priority, and that every object is reconciled
// exactly once.
func TestInitialListBehindLiveChanges(t *testing.T) {
	const existing, live = 2000, 100
	config := requireServer(t)
	cs := clientset(t, config)
	preNS, liveNS := namespace(t, cs, "pre"), namespace(t, cs, "live")
	start := time.Now()
	pre := createConfigMaps(t, cs, preNS, "cm", "source", existing)
	t.Logf("created %d ConfigMaps in %.1f s", existing, time.Since(start).Seconds())

	rec := newRecorder()
	g := newGate()
	rec.behave = func(ctx context.Context, _ reconcile.Request, _ int) (reconcile.Result, error) {
		g.hold(ctx)
		return reconcile.Result{}, nil
	}
	m := startManager(t, managerSetup{namespaces: []string{preNS, liveNS}, workers: 1}, rec)
	// Workers start after the caches have synced, so the whole initial
	// list is queued by now.
	g.waitEntered(t)
	synced := time.Since(m.started)
	q := m.queue()
	require.Equal(t, existing-1, q.Len(), "the initial list is not all queued when the first worker starts")

	liveNames := createConfigMaps(t, cs, liveNS, "cm", "source", live)
	require.Eventually(t, func() bool { return q.Len() == existing-1+live }, time.Minute, 10*time.Millisecond,
		"the live ConfigMaps did not reach the queue")
	close(g.open)
	require.Eventually(t, func() bool {
		return rec.converged(preNS, pre, "v1") && rec.converged(liveNS, liveNames, "v1")
	}, 2*time.Minute, 10*time.Millisecond, "not every ConfigMap was reconciled")
	converged := time.Since(m.started)

	handouts := q.handedOut()
	require.Len(t, handouts, existing+live, "each object reconciled exactly once")
	assert.Equal(t, preNS, handouts[0].req.Namespace)
	assert.Equal(t, handler.LowPriority, handouts[0].priority)
	for i, h := range handouts[1 : 1+live] {
		assert.Equal(t, liveNS, h.req.Namespace, "hand-out %d: a live change comes before the rest of the initial list", i+1)
		assert.Equal(t, 0, h.priority, "hand-out %d", i+1)
	}
	lowPriority := 0
	for i, h := range handouts[1+live:] {
		assert.Equal(t, preNS, h.req.Namespace, "hand-out %d", i+1+live)
		assert.Equal(t, handler.LowPriority, h.priority, "hand-out %d", i+1+live)
		lowPriority++
	}
	total, overlaps := rec.counts()
	assert.Equal(t, existing+live, total)
	assert.Zero(t, overlaps)
	t.Logf("%d existing ConfigMaps handed out at priority %d, %d live changes at 0 ahead of them; "+
		"%d reconciles; caches synced %.2f s after start, all reconciled %.2f s after start; %d API requests",
		lowPriority+1, handler.LowPriority, live, total, synced.Seconds(), converged.Seconds(), m.requests.all.Load())
}

// TestUpdateDuringReconcileIsRequeued changes a ConfigMap while its
// reconcile runs: the queue must not hand the key to the other worker
// meanwhile, and must hand it out again after Done, so that the change is
// seen.
func TestUpdateDuringReconcileIsRequeued(t *testing.T) {
	config := requireServer(t)
	cs := clientset(t, config)
	ns := namespace(t, cs, "update")
	_, err := cs.CoreV1().ConfigMaps(ns).Create(context.Background(), configMap(ns, "target", "source", "v1"), metav1.CreateOptions{})
	require.NoError(t, err)

	rec := newRecorder()
	g := newGate()
	rec.behave = func(ctx context.Context, _ reconcile.Request, _ int) (reconcile.Result, error) {
		g.hold(ctx)
		return reconcile.Result{}, nil
	}
	m := startManager(t, managerSetup{namespaces: []string{ns}, workers: 2}, rec)
	g.waitEntered(t)
	key := types.NamespacedName{Namespace: ns, Name: "target"}
	req := reconcile.Request{NamespacedName: key}
	q := m.queue()
	addsBefore := q.addsOf(req)

	cm, err := cs.CoreV1().ConfigMaps(ns).Get(context.Background(), "target", metav1.GetOptions{})
	require.NoError(t, err)
	cm.Data["value"] = "v2"
	_, err = cs.CoreV1().ConfigMaps(ns).Update(context.Background(), cm, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return q.addsOf(req) > addsBefore }, time.Minute, 10*time.Millisecond,
		"the update did not reach the queue")
	// Queued while being processed: neither ready nor handed to the
	// idle second worker.
	assert.Zero(t, q.Len())
	assert.Len(t, rec.reconciles(key), 1)
	close(g.open)

	require.Eventually(t, func() bool { return rec.converged(ns, []string{"target"}, "v2") }, time.Minute, 10*time.Millisecond,
		"the update made during the reconcile was never reconciled")
	assert.Len(t, rec.reconciles(key), 2)
	_, overlaps := rec.counts()
	assert.Zero(t, overlaps)
}

// TestRetriesRequeueAfterAndMetrics checks a failing reconcile's backoff
// and a RequeueAfter against the clock, then reads the queue's series
// from the manager's /metrics as Prometheus would.
func TestRetriesRequeueAfterAndMetrics(t *testing.T) {
	const failures = 4
	const requeueAfter = 200 * time.Millisecond
	config := requireServer(t)
	cs := clientset(t, config)
	ns := namespace(t, cs, "retry")
	for _, name := range []string{"flaky", "periodic", "plain"} {
		_, err := cs.CoreV1().ConfigMaps(ns).Create(context.Background(), configMap(ns, name, "source", "v1"), metav1.CreateOptions{})
		require.NoError(t, err)
	}
	rec := newRecorder()
	rec.behave = func(_ context.Context, req reconcile.Request, n int) (reconcile.Result, error) {
		switch {
		case req.Name == "flaky" && n <= failures:
			return reconcile.Result{}, errors.New("injected failure")
		case req.Name == "periodic" && n <= 2:
			return reconcile.Result{RequeueAfter: requeueAfter}, nil
		}
		return reconcile.Result{}, nil
	}
	addr := freeAddr(t)
	m := startManager(t, managerSetup{namespaces: []string{ns}, workers: 2, metricsAddr: addr}, rec)

	flaky := types.NamespacedName{Namespace: ns, Name: "flaky"}
	periodic := types.NamespacedName{Namespace: ns, Name: "periodic"}
	require.Eventually(t, func() bool {
		return len(rec.reconciles(flaky)) == failures+1 && len(rec.reconciles(periodic)) == 3
	}, time.Minute, 10*time.Millisecond, "the failing and the periodic ConfigMaps were not reconciled again")

	// controller-runtime's default limiter doubles from 5ms per failure;
	// the next attempt cannot start before the delay has passed since the
	// failed one started.
	times := rec.reconciles(flaky)
	for i := 1; i < len(times); i++ {
		want := 5 * time.Millisecond << (i - 1)
		assert.GreaterOrEqual(t, times[i].Sub(times[i-1]), want, "retry %d came before its backoff", i)
	}
	times = rec.reconciles(periodic)
	for i := 1; i < len(times); i++ {
		assert.GreaterOrEqual(t, times[i].Sub(times[i-1]), requeueAfter, "requeue %d came before RequeueAfter", i)
	}
	assert.Len(t, rec.reconciles(types.NamespacedName{Namespace: ns, Name: "plain"}), 1)

	labels := fmt.Sprintf(`controller=%q,name=%q`, m.name, m.name)
	want := map[string]float64{
		`workqueue_adds_total{` + labels + `}`:                  3 + failures + 2,
		`workqueue_retries_total{` + labels + `}`:               failures + 2, // the backoffs and the RequeueAfters
		`workqueue_work_duration_seconds_count{` + labels + `}`: 3 + failures + 2,
		// Created before the manager, the three came in the initial list,
		// and their retries and requeues keep its low priority.
		`workqueue_depth{` + labels + `,priority="-100"}`:                                     0,
		`workqueue_unfinished_work_seconds{` + labels + `}`:                                   0,
		"controller_runtime_reconcile_errors_total{controller=" + strconv.Quote(m.name) + "}": failures,
	}
	// The recorder sees a reconcile before the controller's Done and
	// counts: poll until they have caught up.
	var (
		mu    sync.Mutex
		wrong []string
	)
	if !assert.Eventually(t, func() bool {
		body := scrape(addr)
		var w []string
		for series, value := range want {
			if got, ok := sample(body, series); !ok || got != value {
				w = append(w, fmt.Sprintf("%s: want %g, have %q", series, value, grep(body, series[:strings.IndexByte(series, '{')])))
			}
		}
		mu.Lock()
		wrong = w
		mu.Unlock()
		return len(w) == 0
	}, 30*time.Second, 50*time.Millisecond) {
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("the manager's /metrics does not show the queue's work:\n%s", strings.Join(wrong, "\n"))
	}
}

// scrape reads a /metrics page; an error comes back as the body, for the
// failure message, and matches no series.
func scrape(addr string) string {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err.Error()
	}
	return string(b)
}

// sample returns the value of one series in a Prometheus text exposition.
func sample(body, series string) (float64, bool) {
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`).FindStringSubmatch(body)
	if m == nil {
		return 0, false
	}
	v, err := strconv.ParseFloat(m[1], 64)
	return v, err == nil
}

func grep(body string, prefixes ...string) string {
	var lines []string
	for line := range strings.SplitSeq(body, "\n") {
		for _, p := range prefixes {
			if strings.HasPrefix(line, p) {
				lines = append(lines, line)
			}
		}
	}
	return strings.Join(lines, "\n")
}

// TestFairnessByNamespace floods one namespace, then changes a few objects
// of another: with fairness by namespace the few are handed out among the
// first, taking turns with the flood; without it, as in
// controller-runtime's own queue, they wait behind the whole flood.
func TestFairnessByNamespace(t *testing.T) {
	const flood, quiet = 1000, 10
	for _, tc := range []struct {
		name     string
		fairness bool
		// the range of hand-out positions, after the held one, that the
		// quiet namespace's items must fall in
		first, last int
	}{
		{name: "by namespace", fairness: true, first: 1, last: 2 * quiet},
		{name: "first in first out", fairness: false, first: flood + 1, last: flood + quiet},
	} {
		t.Run(tc.name, func(t *testing.T) {
			config := requireServer(t)
			cs := clientset(t, config)
			floodNS, quietNS := namespace(t, cs, "flood"), namespace(t, cs, "quiet")
			rec := newRecorder()
			g := newGate()
			rec.behave = func(ctx context.Context, _ reconcile.Request, _ int) (reconcile.Result, error) {
				g.hold(ctx)
				return reconcile.Result{}, nil
			}
			m := startManager(t, managerSetup{namespaces: []string{floodNS, quietNS}, workers: 1, fairness: tc.fairness}, rec)
			_, err := cs.CoreV1().ConfigMaps(floodNS).Create(context.Background(), configMap(floodNS, "held", "source", "v1"), metav1.CreateOptions{})
			require.NoError(t, err)
			g.waitEntered(t)
			q := m.queue()

			floodNames := createConfigMaps(t, cs, floodNS, "cm", "source", flood)
			require.Eventually(t, func() bool { return q.Len() == flood }, time.Minute, 10*time.Millisecond)
			quietNames := createConfigMaps(t, cs, quietNS, "cm", "source", quiet)
			require.Eventually(t, func() bool { return q.Len() == flood+quiet }, time.Minute, 10*time.Millisecond)
			close(g.open)
			require.Eventually(t, func() bool {
				return rec.converged(floodNS, floodNames, "v1") && rec.converged(quietNS, quietNames, "v1")
			}, 2*time.Minute, 10*time.Millisecond)

			var positions []int
			for i, h := range q.handedOut() {
				if h.req.Namespace == quietNS {
					positions = append(positions, i)
				}
			}
			require.Len(t, positions, quiet)
			assert.GreaterOrEqual(t, positions[0], tc.first)
			assert.LessOrEqual(t, positions[quiet-1], tc.last)
			t.Logf("the %d quiet items were hand-outs %d to %d of %d", quiet, positions[0], positions[quiet-1], flood+quiet+1)
		})
	}
}
