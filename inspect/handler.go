package inspect

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"sync"

	"k8s.io/utils/clock"

	"github.com/go-workqueue/workqueue"
)

// DefaultLimit is how many keys each list of the page shows, and how many
// failing keys and recent failures each queue's [Failures] keeps, unless
// [WithLimit] says otherwise.
const DefaultLimit = 20

// maxRefresh bounds the refresh query parameter, in seconds.
const maxRefresh = 3600

// Handler is an http.Handler that serves what the queues registered with it
// hold. A GET serves an HTML page; with the query parameter format=json it
// serves the same [View] as JSON. On the page, refresh=N (1 to 3600) has
// the browser reload it every N seconds; absent or 0, it does not reload.
// Other methods than GET and HEAD get 405 Method Not Allowed, and a format
// or refresh it does not know gets 400 Bad Request.
//
// Register queues with [Register]. A Handler is safe for concurrent use,
// including Register while it serves. The zero value is a Handler with no
// queues and the default options; [NewHandler] makes one with options.
type Handler struct {
	limit int                // 0 means DefaultLimit
	clock clock.PassiveClock // nil means the real clock

	mu     sync.RWMutex
	queues []registered // in the order registered
	names  map[string]bool
}

// registered is a queue registered with a Handler, whatever its item type.
type registered interface {
	view(limit int) QueueView
}

// Option configures a [Handler] made by [NewHandler].
type Option func(*Handler)

// WithLimit sets how many keys each list of the page shows, and how many
// failing keys and recent failures each queue's [Failures] keeps: n for
// each. It panics with an
// "inspect:" message if n is less than 1.
func WithLimit(n int) Option {
	if n < 1 {
		panic(fmt.Sprintf("inspect: WithLimit(%d): need at least 1", n))
	}
	return func(h *Handler) { h.limit = n }
}

// WithClock sets the clock that times failures and the page, for tests; nil
// or unset means the real clock. The times of a queue's items come from the
// queue's own clock, in its snapshots.
func WithClock(c clock.PassiveClock) Option {
	return func(h *Handler) { h.clock = c }
}

// NewHandler returns a Handler with no queues, configured by opts. It
// panics with an "inspect:" message if an option is nil.
func NewHandler(opts ...Option) *Handler {
	h := &Handler{}
	for i, opt := range opts {
		if opt == nil {
			panic(fmt.Sprintf("inspect: NewHandler got a nil option at position %d", i))
		}
		opt(h)
	}
	return h
}

func (h *Handler) limitOrDefault() int {
	if h.limit == 0 {
		return DefaultLimit
	}
	return h.limit
}

func (h *Handler) clockOrReal() clock.PassiveClock {
	if h.clock == nil {
		return clock.RealClock{}
	}
	return h.clock
}

// Snapshotter is what [Register] needs of a queue: its Snapshot method,
// which every queue of the workqueue package has.
type Snapshotter[T comparable] interface {
	Snapshot(n int) workqueue.Snapshot[T]
}

// Every queue of the workqueue package can be registered.
var (
	_ Snapshotter[string] = (*workqueue.Typed[string])(nil)
	_ Snapshotter[string] = (*workqueue.TypedDelayingQueue[string])(nil)
	_ Snapshotter[string] = (*workqueue.TypedRateLimitingQueue[string])(nil)
	_ Snapshotter[string] = (*workqueue.TypedPriorityQueue[string])(nil)
)

// KeyOption configures how [Register] shows a queue's keys.
type KeyOption[T comparable] func(*keyOptions[T])

type keyOptions[T comparable] struct {
	format func(T) string
}

// FormatKeys has the page show each key as format returns it, instead of
// as fmt.Sprint does. format is called while a page is served, for the
// keys it lists, and must be safe for concurrent use. The page escapes
// what it returns. FormatKeys panics with an "inspect:" message if format
// is nil.
func FormatKeys[T comparable](format func(T) string) KeyOption[T] {
	if format == nil {
		panic("inspect: FormatKeys needs a function, got nil")
	}
	return func(o *keyOptions[T]) { o.format = format }
}

// Register adds queue to h under name, to be shown after the queues
// registered before it, and returns the queue's [Failures]: give it to the
// queue's Runner with [reconcile.WithErrorObserver] to show its failures.
// Register takes the queue's first snapshot, from which on the queue
// records when it hands out each item.
//
// Register is safe for concurrent use. It panics with an "inspect:" message
// if h or queue is nil, name is empty or already registered with h, or an
// option is nil.
func Register[T comparable](h *Handler, name string, queue Snapshotter[T], opts ...KeyOption[T]) *Failures {
	if h == nil {
		panic("inspect: Register needs a Handler, got nil")
	}
	if name == "" {
		panic("inspect: Register needs a queue name, got an empty one")
	}
	if v := reflect.ValueOf(queue); queue == nil || v.Kind() == reflect.Pointer && v.IsNil() {
		panic(fmt.Sprintf("inspect: Register(%q) needs a queue, got nil", name))
	}
	o := keyOptions[T]{format: func(item T) string { return fmt.Sprint(item) }}
	for i, opt := range opts {
		if opt == nil {
			panic(fmt.Sprintf("inspect: Register(%q) got a nil option at position %d", name, i))
		}
		opt(&o)
	}
	var shuttingDown func() bool
	if sd, ok := queue.(interface{ ShuttingDown() bool }); ok {
		shuttingDown = sd.ShuttingDown
	}
	failures := newFailures(h.limitOrDefault(), h.clockOrReal(), func(item any) string {
		if key, ok := item.(T); ok {
			return o.format(key)
		}
		return fmt.Sprint(item)
	}, shuttingDown)
	q := &queueEntry[T]{name: name, queue: queue, format: o.format, failures: failures, now: h.clockOrReal().Now}

	h.mu.Lock()
	defer h.mu.Unlock()
	if h.names[name] {
		panic(fmt.Sprintf("inspect: Register(%q): a queue of that name is registered already", name))
	}
	first := queue.Snapshot(0)
	q.baseTaken, q.baseAdds = first.Taken, first.Adds
	if h.names == nil {
		h.names = make(map[string]bool)
	}
	h.names[name] = true
	h.queues = append(h.queues, q)
	return failures
}

// ServeHTTP serves the page, or the JSON view with format=json; see
// [Handler]. It takes a snapshot of each registered queue, one after the
// other, and holds no lock of its own while it does.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "inspect: the queue inspector is read-only: use GET or HEAD", http.StatusMethodNotAllowed)
		return
	}
	query := r.URL.Query()
	format := query.Get("format")
	if format != "" && format != "html" && format != "json" {
		http.Error(w, fmt.Sprintf("inspect: format=%q: want html or json", format), http.StatusBadRequest)
		return
	}
	refresh := 0
	if s := query.Get("refresh"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 || n > maxRefresh {
			http.Error(w, fmt.Sprintf("inspect: refresh=%q: want seconds from 0 (off) to %d", s, maxRefresh), http.StatusBadRequest)
			return
		}
		refresh = n
	}

	view := h.View()
	var body bytes.Buffer
	header := w.Header()
	header.Set("Cache-Control", "no-store")
	header.Set("X-Content-Type-Options", "nosniff")
	if format == "json" {
		encoder := json.NewEncoder(&body) // escapes <, > and & in keys and errors
		encoder.SetIndent("", "  ")
		if err := encoder.Encode(view); err != nil {
			http.Error(w, "inspect: "+err.Error(), http.StatusInternalServerError)
			return
		}
		header.Set("Content-Type", "application/json")
	} else {
		if err := page.Execute(&body, pageData{View: view, Refresh: refresh, Refreshes: refreshChoices}); err != nil {
			http.Error(w, "inspect: "+err.Error(), http.StatusInternalServerError)
			return
		}
		header.Set("Content-Type", "text/html; charset=utf-8")
		// The page runs no script: should escaping ever fail, a key still
		// could not run one.
		header.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'")
	}
	header.Set("Content-Length", strconv.Itoa(body.Len()))
	w.Write(body.Bytes())
}

// View returns what the handler serves: a snapshot of each registered
// queue, in the order registered, with its failures. It is safe for
// concurrent use.
func (h *Handler) View() View {
	h.mu.RLock()
	queues := slices.Clone(h.queues)
	h.mu.RUnlock()
	v := View{Time: h.clockOrReal().Now(), Limit: h.limitOrDefault(), Queues: make([]QueueView, 0, len(queues))}
	for _, q := range queues {
		v.Queues = append(v.Queues, q.view(v.Limit))
	}
	return v
}
