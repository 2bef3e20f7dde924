package inspect

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"k8s.io/utils/clock"

	"github.com/go-workqueue/workqueue"
)

// maxErrorText bounds the error text kept for a failing key, in bytes.
const maxErrorText = 1024

// Failures is a registered queue's table of failing keys: the keys with the
// most failed reconciles in a row, each with its last error, when it
// failed and whether it is retried. It is the [workqueue.ErrorObserver] to
// give the queue's Runner, with [workqueue.WithErrorObserver]; a loop
// written by hand can call its methods itself.
//
// The table holds at most the handler's limit of keys (see [WithLimit]).
// When it is full, a key that fails replaces the key with the fewest
// failures, the one that failed longest ago among equals, unless that key
// has more failures than the new one. A key leaves the table when a
// reconcile of it succeeds; a key given up on stays until then, or until
// it is replaced.
//
// Failures is safe for concurrent use. Make one with [Register]; the zero
// value is not usable, and its methods panic on it.
type Failures struct {
	limit  int
	clock  clock.PassiveClock
	format func(item any) string // the registration's, for any item

	mu      sync.Mutex
	entries map[any]*failure
	// size is len(entries), read without mu so that a success with
	// nothing in the table, the common case, costs no lock.
	size atomic.Int64
}

var _ workqueue.ErrorObserver = (*Failures)(nil)

type failure struct {
	failures  int
	lastError string
	at        time.Time
	retrying  bool
}

func newFailures(limit int, c clock.PassiveClock, format func(any) string) *Failures {
	return &Failures{limit: limit, clock: c, format: format, entries: make(map[any]*failure)}
}

// ObserveError records that a reconcile of item failed with err, the
// failures-th failure in a row, and whether it is retried; see
// [workqueue.ErrorObserver]. item should be of the queue's item type; an
// item of another type is shown as fmt.Sprint shows it. It panics if item
// is not comparable, as no queue's item is, and on a Failures not made by
// [Register].
func (f *Failures) ObserveError(item any, err error, failures int, retrying bool) {
	f.check()
	text := ""
	if err != nil {
		text = cutText(err.Error(), maxErrorText)
	}
	entry := failure{failures: failures, lastError: text, at: f.clock.Now(), retrying: retrying}
	f.mu.Lock()
	defer f.mu.Unlock()
	if e, ok := f.entries[item]; ok {
		*e = entry
		return
	}
	if len(f.entries) >= f.limit {
		var leastItem any
		var least *failure
		for item, e := range f.entries {
			if least == nil || e.failures < least.failures || e.failures == least.failures && e.at.Before(least.at) {
				leastItem, least = item, e
			}
		}
		if least.failures > failures {
			return
		}
		delete(f.entries, leastItem)
	}
	f.entries[item] = &entry
	f.size.Store(int64(len(f.entries)))
}

// ObserveSuccess takes item out of the table, if it is there: its last
// reconcile succeeded. See [workqueue.ErrorObserver]. It panics on a
// Failures not made by [Register].
func (f *Failures) ObserveSuccess(item any) {
	f.check()
	if f.size.Load() == 0 {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.entries, item)
	f.size.Store(int64(len(f.entries)))
}

func (f *Failures) check() {
	if f == nil || f.format == nil {
		panic("inspect: a Failures not made by Register")
	}
}

// rows returns the failing keys, most failures first, as of now.
func (f *Failures) rows(now time.Time) []FailingKey {
	f.mu.Lock()
	rows := make([]FailingKey, 0, len(f.entries))
	items := make([]any, 0, len(f.entries))
	for item, e := range f.entries {
		items = append(items, item)
		rows = append(rows, FailingKey{
			Failures: e.failures, LastError: e.lastError, LastFailed: e.at,
			AgoSeconds: max(now.Sub(e.at), 0).Seconds(), Retrying: e.retrying,
		})
	}
	f.mu.Unlock()
	// Keys are formatted outside the lock: the format function is the
	// user's and may be slow.
	for i, item := range items {
		rows[i].Key = f.format(item)
	}
	slices.SortFunc(rows, byMostFailures)
	return rows
}

// cutText returns s cut to at most n bytes at a rune boundary, with an
// ellipsis if it was cut.
func cutText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const ellipsis = "…"
	cut := n - len(ellipsis)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + ellipsis
}
