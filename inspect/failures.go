package inspect

import (
	"cmp"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"k8s.io/utils/clock"

	"github.com/go-workqueue/workqueue/reconcile"
)

// maxErrorText bounds the error text kept for a failed key, in bytes.
const maxErrorText = 1024

// State is what became of a key after a failed reconcile.
type State string

const (
	// Retrying means the Runner retries the key after its backoff.
	Retrying State = "retrying"
	// GivenUp means the Runner gave up on the key: its retries ran out or
	// its error was terminal.
	GivenUp State = "givenUp"
	// DroppedAtShutdown means the key is not retried because its queue is
	// shutting down. A key that fails while its queue shuts down shows so
	// even if the Runner would have given up on it.
	DroppedAtShutdown State = "droppedAtShutdown"
	// Succeeded means a reconcile of the key succeeded after the failure
	// shown. Only [QueueView.Recent] shows it.
	Succeeded State = "succeeded"
)

// Failures is a registered queue's record of failed reconciles. It is the
// [reconcile.ErrorObserver] to give the queue's Runner, with
// [reconcile.WithErrorObserver]; a loop written by hand can call its
// methods itself. It keeps, within the handler's limit of keys (see
// [WithLimit]):
//   - the failing keys: those whose last reconcile failed, each with its
//     failures in a row, last error, when it failed and its [State]. When
//     the table is full, a key that fails replaces the key with the fewest
//     failures, the one that failed longest ago among equals, unless that
//     key has more failures than the new one. A key leaves the table when
//     a reconcile of it succeeds; a key given up on stays until then, or
//     until it is replaced.
//   - the recent failures: the last failure of each of the keys that
//     failed most recently, including keys that have succeeded since.
//   - counts of failed reconciles: in the last minute, and failures and
//     give-ups since registration.
//
// Failures is safe for concurrent use. Make one with [Register]; the zero
// value is not usable, and its methods panic on it.
type Failures struct {
	limit        int
	clock        clock.PassiveClock
	format       func(item any) string // the registration's, for any item
	shuttingDown func() bool           // the queue's; nil if it has none

	mu sync.Mutex
	// failing holds the keys whose last reconcile failed, at most limit.
	failing map[any]*failure
	// recent holds the last failure of the limit keys that failed last;
	// open counts those of its entries not Succeeded.
	recent map[any]*failure
	open   int
	seq    uint64 // numbers each failure, to order recent
	window window
	total  uint64 // failed reconciles since registration
	gaveUp uint64 // give-ups since registration
	// watched is len(failing) + open: the keys whose success changes the
	// record. It is read without mu so that a success with nothing to
	// change, the common case, costs no lock.
	watched atomic.Int64
}

var _ reconcile.ErrorObserver = (*Failures)(nil)

type failure struct {
	failures  int
	lastError string
	at        time.Time
	state     State
	seq       uint64
}

func newFailures(limit int, c clock.PassiveClock, format func(any) string, shuttingDown func() bool) *Failures {
	return &Failures{limit: limit, clock: c, format: format, shuttingDown: shuttingDown,
		failing: make(map[any]*failure), recent: make(map[any]*failure)}
}

// ObserveError records that a reconcile of item failed with err, the
// failures-th failure in a row, and whether it is retried; see
// [reconcile.ErrorObserver]. A key not retried shows as [GivenUp], or as
// [DroppedAtShutdown] if its queue is shutting down. item should be of the
// queue's item type; an item of another type is shown as fmt.Sprint shows
// it. It panics if item is not comparable, as no queue's item is, and on a
// Failures not made by [Register].
func (f *Failures) ObserveError(item any, err error, failures int, retrying bool) {
	f.check()
	text := ""
	if err != nil {
		text = cutText(err.Error(), maxErrorText)
	}
	state := Retrying
	if !retrying {
		state = GivenUp
		if f.shuttingDown != nil && f.shuttingDown() {
			state = DroppedAtShutdown
		}
	}
	now := f.clock.Now()
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seq++
	entry := failure{failures: failures, lastError: text, at: now, state: state, seq: f.seq}
	f.total++
	if state == GivenUp {
		f.gaveUp++
	}
	f.window.add(now)
	f.putFailing(item, entry)
	f.putRecent(item, entry)
	f.watched.Store(int64(len(f.failing) + f.open))
}

// putFailing puts item in the failing table, if it has a place there.
func (f *Failures) putFailing(item any, entry failure) {
	if e, ok := f.failing[item]; ok {
		*e = entry
		return
	}
	if len(f.failing) >= f.limit {
		var leastItem any
		var least *failure
		for item, e := range f.failing {
			if least == nil || e.failures < least.failures || e.failures == least.failures && e.seq < least.seq {
				leastItem, least = item, e
			}
		}
		if least.failures > entry.failures {
			return
		}
		delete(f.failing, leastItem)
	}
	f.failing[item] = &entry
}

// putRecent makes entry item's recent failure, in place of the oldest
// entry if the record is full.
func (f *Failures) putRecent(item any, entry failure) {
	if e, ok := f.recent[item]; ok {
		if e.state == Succeeded {
			f.open++
		}
		*e = entry
		return
	}
	if len(f.recent) >= f.limit {
		var oldestItem any
		var oldest *failure
		for item, e := range f.recent {
			if oldest == nil || e.seq < oldest.seq {
				oldestItem, oldest = item, e
			}
		}
		if oldest.state != Succeeded {
			f.open--
		}
		delete(f.recent, oldestItem)
	}
	f.recent[item] = &entry
	f.open++
}

// ObserveSuccess records that a reconcile of item succeeded: it leaves the
// failing keys, and its recent failure, if listed, shows as [Succeeded].
// See [reconcile.ErrorObserver]. It panics on a Failures not made by
// [Register].
func (f *Failures) ObserveSuccess(item any) {
	f.check()
	if f.watched.Load() == 0 {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.failing, item)
	if e, ok := f.recent[item]; ok && e.state != Succeeded {
		e.state = Succeeded
		f.open--
	}
	f.watched.Store(int64(len(f.failing) + f.open))
}

func (f *Failures) check() {
	if f == nil || f.format == nil {
		panic("inspect: a Failures not made by Register")
	}
}

// fill sets v's failure fields as of now: the failing keys, most failures
// first, the recent failures, latest first, and the counts.
func (f *Failures) fill(v *QueueView, now time.Time) {
	type row struct {
		item any
		seq  uint64
		key  FailedKey
	}
	toRow := func(item any, e *failure) row {
		return row{item: item, seq: e.seq, key: FailedKey{
			Failures: e.failures, LastError: e.lastError, LastFailed: e.at,
			AgoSeconds: max(now.Sub(e.at), 0).Seconds(), State: e.state,
		}}
	}
	f.mu.Lock()
	failing := make([]row, 0, len(f.failing))
	for item, e := range f.failing {
		failing = append(failing, toRow(item, e))
	}
	recent := make([]row, 0, len(f.recent))
	for item, e := range f.recent {
		recent = append(recent, toRow(item, e))
	}
	v.FailuresLastMinute = f.window.count(now)
	v.Failures, v.GivenUp = f.total, f.gaveUp
	f.mu.Unlock()

	// Keys are formatted outside the lock: the format function is the
	// user's and may be slow.
	slices.SortFunc(recent, func(a, b row) int { return cmp.Compare(b.seq, a.seq) })
	v.Recent = make([]FailedKey, len(recent))
	for i, r := range recent {
		v.Recent[i] = r.key
		v.Recent[i].Key = f.format(r.item)
	}
	v.Failing = make([]FailedKey, len(failing))
	for i, r := range failing {
		v.Failing[i] = r.key
		v.Failing[i].Key = f.format(r.item)
	}
	slices.SortFunc(v.Failing, byMostFailures)
}

// windowSeconds is the span of a window, in whole seconds.
const windowSeconds = 60

// window counts failures over the last windowSeconds, by the second: a
// ring of per-second counts, each tagged with its second.
type window [windowSeconds]struct {
	second int64 // Unix time
	n      int
}

func (w *window) add(t time.Time) {
	s := t.Unix()
	b := &w[(s%windowSeconds+windowSeconds)%windowSeconds]
	if b.second != s {
		b.second, b.n = s, 0
	}
	b.n++
}

// count returns the failures of the windowSeconds seconds up to now's,
// now's included.
func (w *window) count(now time.Time) int {
	s, n := now.Unix(), 0
	for _, b := range w {
		if b.second > s-windowSeconds && b.second <= s {
			n += b.n
		}
	}
	return n
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
