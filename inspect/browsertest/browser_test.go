package browsertest

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/go-workqueue/workqueue"
	"github.com/go-workqueue/workqueue/inspect"
	"github.com/go-workqueue/workqueue/reconcile"
)

var updateScreenshot = flag.Bool("update-screenshot", false, "write the inspector page as the browser shows it to docs/inspector.png")

// screenshotPath is docs/inspector.png at the root of the repository, from
// this module's directory.
var screenshotPath = filepath.Join("..", "..", "docs", "inspector.png")

const (
	// testTimeout bounds the whole test, the browser's life included.
	testTimeout = 2 * time.Minute
	// stepTimeout bounds each step: the browser's start, each page load
	// and query, each wait for the queue.
	stepTimeout = 20 * time.Second
)

// The keys of the scene. scriptKey and its error are markup: the page must
// show them as text.
const (
	stuckKey   = "default/stuck"
	retryKey   = "default/db"
	retryError = "dial tcp 10.0.0.7:5432: connection refused"
	scriptKey  = "<script>alert(1)</script>"
	// pendingKey waits for a node: its reconcile parks it until
	// "node-added".
	pendingKey = "default/pending"
	markupErr  = `bad spec: <img src=x onerror=alert(2)>`
)

// zones are the groups of the nodes queue, one node of each in flight.
var zones = map[string]string{"node-1": "zone-a", "node-2": "zone-a", "node-3": "zone-b", "node-4": "zone-b"}

var t0 = time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)

// TestInspectorInChromium serves the inspector over real queues and a
// Runner and reads it in headless Chromium: a key stuck in its reconcile
// for 90 minutes on a fake clock, a key whose reconcile fails and is
// retried, and a key and an error made of markup, which must show as
// text and run nothing; beside it a queue of nodes with one node of each
// zone in flight at a time, whose groups show. Then the queues change, and
// a reload shows it.
func TestInspectorInChromium(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	s := startScene(t, ctx)
	browser, closeBrowser := startBrowser(t, ctx)
	defer closeBrowser()
	dialogs := watchDialogs(browser)
	defer func() {
		assert.Empty(t, dialogs.stop(), "the page opened a dialog: a key or an error ran as script")
	}()
	url := s.server.URL + "/debug/queues"
	step(t, browser, "load the page", chromedp.Navigate(url))

	inFlight := text(t, browser, `section[data-queue="pods"] table.in-flight`)
	assert.Contains(t, inFlight, stuckKey+"\t1h30m0s", "the stuck key with its age")
	failing := text(t, browser, `section[data-queue="pods"] table.failing`)
	assert.Contains(t, failing, retryKey+"\t1\t"+retryError+"\t0s ago\tretrying", "the retrying key with its error")
	assert.Contains(t, failing, scriptKey+"\t1\t"+markupErr, "markup shown as text")
	recent := text(t, browser, `section[data-queue="pods"] table.recent`)
	assert.Contains(t, recent, retryKey+"\t1\t"+retryError+"\t0s ago\tretrying", "the failures, latest first")
	assert.Contains(t, text(t, browser, `section[data-queue="pods"] table.delayed`), scriptKey+"\t1s\t1")
	assert.Contains(t, text(t, browser, `section[data-queue="pods"] table.parked`), pendingKey+"\tnode-added\t0s\t0", "the parked key with its event")
	counts := text(t, browser, `section[data-queue="pods"] table.counts`)
	assert.Contains(t, counts, "0\t1\t2\t1\t4\t0.00074\t2\t2\t0",
		"none queued, 1 processing, 2 waiting, 1 parked, 4 adds in the 90 min since Register, 2 failures in the last minute and since, none given up")
	assert.Contains(t, text(t, browser, `section[data-queue="nodes"] ol.queued`), "node-3",
		"node-1 in flight, node-2 waiting for zone-a's slot")
	assert.Equal(t, []string{"counts", "groups", "in-flight"}, tables(t, browser, "nodes"), "the groups after the counts")
	groups := text(t, browser, `section[data-queue="nodes"] table.groups`)
	assert.Contains(t, groups, "zone-a\t1\t1\t1\t1\nzone-b\t1\t0\t1\t0", "zone-a at its limit first, then by name")
	assert.Contains(t, text(t, browser, `section[data-queue="nodes"] h3`), "Groups, those waiting for a slot first (1 queued key waits for a slot)")

	keys := run(t, browser, "read the key cells", chromedp.Evaluate[[]string](
		`[...document.querySelectorAll('.key')].map(e => e.textContent)`))
	assert.Contains(t, keys, scriptKey, "the key is one text node, unchanged")
	elements := run(t, browser, "count script and img elements", chromedp.Evaluate[int](
		`document.querySelectorAll('script, img').length`))
	assert.Zero(t, elements, "no markup from a key or an error became an element")

	if *updateScreenshot {
		png := run(t, browser, "take the screenshot", chromedp.FullScreenshot(100))
		require.NoError(t, os.WriteFile(screenshotPath, png, 0o644))
		t.Logf("wrote %s", screenshotPath)
	}

	s.change(t)
	step(t, browser, "reload the page", chromedp.Reload())
	assert.Equal(t, []string{"counts", "failing", "recent", "delayed"}, tables(t, browser, "pods"), "nothing in flight any more")
	failing = text(t, browser, `section[data-queue="pods"] table.failing`)
	assert.NotContains(t, failing, retryKey, "the retried key succeeded")
	recent = text(t, browser, `section[data-queue="pods"] table.recent`)
	assert.Contains(t, recent, retryKey+"\t1\t"+retryError+"\t1s ago\tsucceeded since", "the retried key's failure still shows")
	assert.Contains(t, failing, scriptKey+"\t2\t"+markupErr+"\t0s ago\tretrying")
	assert.Contains(t, text(t, browser, `section[data-queue="pods"] table.delayed`), scriptKey+"\t2s\t2")
	counts = text(t, browser, `section[data-queue="pods"] table.counts`)
	assert.Contains(t, counts, "0\t0\t1\t0\t7\t3.0\t3\t3\t0", "2 retries and the woken key added in the second since the first view; a third failure")
	assert.Contains(t, text(t, browser, `section[data-queue="nodes"] ol.queued`), "node-2\nnode-3\nnode-4", "node-1 done frees zone-a's slot")
	groups = text(t, browser, `section[data-queue="nodes"] table.groups`)
	assert.Contains(t, groups, "zone-b\t1\t0\t2\t1\nzone-a\t1\t0\t1\t0", "zone-b has two nodes for its one free slot: one waits, so zone-b comes first")
	waiting := run(t, browser, "list the groups marked waiting", chromedp.Evaluate[[]string](
		`[...document.querySelectorAll('section[data-queue="nodes"] tr.waitingForSlot td:first-child')].map(e => e.textContent)`))
	assert.Equal(t, []string{"zone-b"}, waiting)
}

// tables returns the classes of the tables of the queue named name, in
// page order.
func tables(t *testing.T, browser context.Context, name string) []string {
	t.Helper()
	return run(t, browser, "list the tables of "+name, chromedp.Evaluate[[]string](
		`[...document.querySelectorAll('section[data-queue="`+name+`"] table')].map(e => e.className)`))
}

// scene is the queues, Runner and server the browser reads.
type scene struct {
	clock  *clocktesting.FakeClock
	pods   *workqueue.TypedRateLimitingQueue[string]
	nodes  *workqueue.Typed[string]
	server *httptest.Server

	events       *eventLog
	release      chan struct{} // ends the stuck reconcile
	retryFixed   atomic.Bool
	nodeAdded    atomic.Bool
	stopRunner   context.CancelFunc
	runnerExited chan struct{}
}

// startScene starts the queues, the Runner and the server, and waits until
// the stuck key has been in flight for 90 minutes and both failing keys
// have failed once.
func startScene(t *testing.T, ctx context.Context) *scene {
	s := &scene{
		clock:        clocktesting.NewFakeClock(t0),
		events:       newEventLog(),
		release:      make(chan struct{}),
		runnerExited: make(chan struct{}),
	}
	limiter := workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Second, time.Minute)
	s.pods = workqueue.NewTypedRateLimitingQueueWithConfig(limiter,
		workqueue.TypedRateLimitingQueueConfig[string]{Clock: s.clock})
	s.nodes = workqueue.NewTypedWithConfig(workqueue.TypedQueueConfig[string]{
		Clock:       s.clock,
		GroupLimits: &workqueue.GroupLimits[string]{Group: func(node string) string { return zones[node] }, Default: 1},
	})
	h := inspect.NewHandler(inspect.WithClock(s.clock))
	failures := inspect.Register(h, "pods", s.pods)
	inspect.Register(h, "nodes", s.nodes)

	runner := reconcile.NewRunner(s.pods, s.reconcile,
		reconcile.WithErrorObserver(failures), reconcile.WithErrorObserver(s.events),
		reconcile.WithLogger(slog.New(slog.DiscardHandler)))
	runCtx, stopRunner := context.WithCancel(ctx)
	s.stopRunner = stopRunner
	go func() {
		defer close(s.runnerExited)
		runner.Run(runCtx, 2)
	}()
	t.Cleanup(s.stop)

	s.pods.Add(stuckKey)
	s.events.waitFor(t, "started "+stuckKey)
	s.clock.Step(90 * time.Minute)
	s.pods.Add(retryKey)
	s.pods.Add(scriptKey)
	s.pods.Add(pendingKey)
	s.events.waitFor(t, "error "+retryKey+" 1")
	s.events.waitFor(t, "error "+scriptKey+" 1")
	s.settle(t, 0, 1, 2, 1)
	for _, node := range []string{"node-1", "node-2", "node-3"} {
		s.nodes.Add(node)
	}
	if node, _ := s.nodes.Get(); node != "node-1" {
		t.Fatalf("the nodes queue handed out %q first, want node-1", node)
	}

	mux := http.NewServeMux()
	mux.Handle("/debug/queues", h)
	s.server = httptest.NewServer(mux) // a free port on the loopback address
	return s
}

func (s *scene) reconcile(_ context.Context, key string) (reconcile.Result, error) {
	switch key {
	case stuckKey:
		s.events.add("started " + key)
		<-s.release
	case retryKey:
		if !s.retryFixed.Load() {
			return reconcile.Result{}, errors.New(retryError)
		}
	case scriptKey:
		return reconcile.Result{}, errors.New(markupErr)
	case pendingKey:
		if !s.nodeAdded.Load() {
			return reconcile.WaitFor("node-added"), nil
		}
		s.events.add("success " + key)
	}
	return reconcile.Result{}, nil
}

// change ends the stuck reconcile, fixes the retried key, adds the node the
// parked key waits for and lets a second pass by, so that both failing
// keys are retried, one succeeds and the other fails again, and the parked
// key, woken, succeeds once its backoff has passed. It waits until all of
// that has happened.
func (s *scene) change(t *testing.T) {
	s.retryFixed.Store(true)
	close(s.release)
	s.events.waitFor(t, "success "+stuckKey)
	s.nodeAdded.Store(true)
	s.pods.Wake("node-added")
	s.clock.Step(time.Second)
	s.events.waitFor(t, "success "+retryKey)
	s.events.waitFor(t, "error "+scriptKey+" 2")
	s.events.waitFor(t, "success "+pendingKey)
	s.settle(t, 0, 0, 1, 0)
	s.nodes.Done("node-1")
	s.nodes.Add("node-4")
}

// settle waits until the pods queue holds as many keys queued, in flight,
// waiting and parked as given: the Runner tells its observers of a
// reconcile's end before it marks the key done, so the queue settles a
// moment later.
func (s *scene) settle(t *testing.T, depth, processing, waiting, parked int) {
	t.Helper()
	deadline := time.Now().Add(stepTimeout)
	for {
		snap := s.pods.Snapshot(0)
		if snap.Depth == depth && snap.Processing == processing && snap.Waiting == waiting && snap.Parked == parked {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for %d queued, %d in flight, %d waiting and %d parked; got %d, %d, %d and %d",
				stepTimeout, depth, processing, waiting, parked, snap.Depth, snap.Processing, snap.Waiting, snap.Parked)
		}
		time.Sleep(time.Millisecond)
	}
}

func (s *scene) stop() {
	select {
	case <-s.release:
	default:
		close(s.release)
	}
	s.stopRunner()
	<-s.runnerExited
	s.nodes.ShutDown()
	if s.server != nil {
		s.server.Close()
	}
}

// eventLog is an ErrorObserver that also notes reconciles that start, so
// that the test can wait for what the Runner did.
type eventLog struct {
	mu      sync.Mutex
	events  []string
	changed chan struct{} // a value when events grew since the last wait
}

func newEventLog() *eventLog { return &eventLog{changed: make(chan struct{}, 1)} }

func (l *eventLog) add(event string) {
	l.mu.Lock()
	l.events = append(l.events, event)
	l.mu.Unlock()
	select {
	case l.changed <- struct{}{}:
	default:
	}
}

func (l *eventLog) ObserveError(item any, _ error, failures int, _ bool) {
	l.add("error " + item.(string) + " " + strconv.Itoa(failures))
}

func (l *eventLog) ObserveSuccess(item any) { l.add("success " + item.(string)) }

// waitFor waits until event has happened, for at most stepTimeout.
func (l *eventLog) waitFor(t *testing.T, event string) {
	t.Helper()
	deadline := time.After(stepTimeout)
	for {
		l.mu.Lock()
		seen := slices.Contains(l.events, event)
		events := slices.Clone(l.events)
		l.mu.Unlock()
		if seen {
			return
		}
		select {
		case <-l.changed:
		case <-deadline:
			t.Fatalf("waited %v for %q; the Runner did: %q", stepTimeout, event, events)
		}
	}
}

// startBrowser starts one headless Chromium for the test and returns the
// context of its tab and a function that closes the browser and waits for
// its process and goroutines. The test fails if Chromium is missing or does
// not start.
func startBrowser(t *testing.T, ctx context.Context) (browser context.Context, closeBrowser func()) {
	t.Helper()
	const install = "install the Debian package chromium, e.g. apt-get install -y chromium"
	path := ""
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			path = p
			break
		}
	}
	if path == "" {
		t.Fatal("Chromium not found on PATH as chromium or chromium-browser: " + install)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.WindowSize(1100, 800),
		chromedp.CombinedOutput(io.Discard),
	)
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox) // Chromium will not run its sandbox as root
	}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	browser, cancelBrowser := chromedp.NewContext(allocCtx)
	closeBrowser = func() {
		closeCtx, cancel := context.WithTimeout(browser, stepTimeout)
		defer cancel()
		chromedp.Cancel(closeCtx) // a graceful close, bounded
		cancelBrowser()           // waits for the tab's goroutines
		cancelAlloc()             // waits for the process and its directory
	}
	// The first Run starts the browser, which then lives as long as
	// browser: it must not have a deadline of its own, so the start is
	// bounded from here.
	started := make(chan error, 1)
	go func() { started <- chromedp.Do(browser) }()
	var err error
	select {
	case err = <-started:
	case <-time.After(stepTimeout):
		cancelBrowser()
		<-started
		err = fmt.Errorf("no answer within %v", stepTimeout)
	}
	if err != nil {
		closeBrowser()
		t.Fatalf("Chromium at %s did not start: %v; %s", path, err, install)
	}
	return browser, closeBrowser
}

// dialogWatch records the JavaScript dialogs the page opens, dismissing
// each so that the page goes on.
type dialogWatch struct {
	cancel   context.CancelFunc
	done     chan struct{}
	messages []string
}

func watchDialogs(browser context.Context) *dialogWatch {
	ctx, cancel := context.WithCancel(browser)
	w := &dialogWatch{cancel: cancel, done: make(chan struct{})}
	dialogs := chromedp.Events(ctx, page.JavascriptDialogOpening)
	go func() {
		defer close(w.done)
		for ev, err := range dialogs {
			if err != nil {
				return
			}
			w.messages = append(w.messages, ev.Message)
			dismissCtx, cancel := context.WithTimeout(ctx, stepTimeout)
			chromedp.Call(dismissCtx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: false})
			cancel()
		}
	}()
	return w
}

// stop ends the watch and returns the messages of the dialogs seen.
func (w *dialogWatch) stop() []string {
	w.cancel()
	<-w.done
	return w.messages
}

// run runs an action on the browser's tab within stepTimeout.
func run[T any](t *testing.T, browser context.Context, what string, action chromedp.Action[T]) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(browser, stepTimeout)
	defer cancel()
	v, err := chromedp.Run(ctx, action)
	require.NoError(t, err, what)
	return v
}

func step(t *testing.T, browser context.Context, what string, action chromedp.Action[chromedp.Void]) {
	t.Helper()
	run(t, browser, what, action)
}

// text returns the text the browser shows for the element selector finds:
// table cells separated by tabs, rows and list items by newlines.
func text(t *testing.T, browser context.Context, selector string) string {
	t.Helper()
	return strings.TrimSpace(run(t, browser, "read "+selector, chromedp.Text(chromedp.CSS(selector))))
}
