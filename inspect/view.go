package inspect

import (
	"cmp"
	"slices"
	"sync"
	"time"

	"github.com/go-workqueue/workqueue"
)

// View is what a [Handler] serves, as JSON with format=json and as the
// HTML page otherwise: every registered queue at the time of the request.
// Keys are shown as their queue's registration formats them. Durations are
// in seconds.
type View struct {
	// Time is when the view was made, on the handler's clock.
	Time time.Time `json:"time"`
	// Limit is the most keys any list holds.
	Limit int `json:"limit"`
	// Queues holds the queues in the order they were registered.
	Queues []QueueView `json:"queues"`
}

// QueueView is one queue in a [View]: the counts and lists of a
// [workqueue.Snapshot], with keys as text and ages and delays worked out
// at the snapshot's time, and the failures its Runner reported.
type QueueView struct {
	// Name is the name the queue was registered under.
	Name string `json:"name"`
	// Taken is when the snapshot was taken, on the queue's clock.
	Taken time.Time `json:"taken"`
	// ShuttingDown reports whether the queue's shutdown has begun.
	ShuttingDown bool `json:"shuttingDown"`
	// Depth, Processing and Parked count the keys queued, handed out and
	// not yet done, and parked until an event; Waiting counts the delays
	// pending, where a key's delayed add and its park backoff count apart.
	Depth      int `json:"depth"`
	Processing int `json:"processing"`
	Waiting    int `json:"waiting"`
	Parked     int `json:"parked"`
	// Adds counts the adds since the queue was made; see
	// [workqueue.Snapshot].
	Adds uint64 `json:"adds"`
	// AddsPerSecond is the rate of adds from an earlier snapshot to this
	// one, or nil before there is one a second old. The handler keeps one
	// earlier snapshot's count per queue: the one Register took, replaced
	// by each view that comes a second or more after it. A page reloaded
	// every few seconds thus shows the rate since its previous load, and
	// a view less than a second after the last replacement shows the
	// rate that replacement computed.
	AddsPerSecond *float64 `json:"addsPerSecond"`
	// Queued holds the next keys to be handed out, first first; on a queue
	// with group limits, the keys of groups at their limit are left out.
	Queued []string `json:"queued"`
	// InFlight holds the keys being processed, longest first; only keys
	// handed out since the queue was registered are listed.
	InFlight []InFlightKey `json:"inFlight"`
	// Delayed holds the delays pending, soonest first; a key may show twice.
	Delayed []DelayedKey `json:"delayed"`
	// ParkedKeys holds the keys parked until an event, longest first.
	ParkedKeys []ParkedKey `json:"parkedKeys"`
	// Failing holds the keys whose last reconcile failed, most failures
	// in a row first, as the queue's [Failures] keeps them.
	Failing []FailedKey `json:"failing"`
	// Recent holds the last failure of each of the keys that failed most
	// recently, latest first, including keys that have succeeded since.
	Recent []FailedKey `json:"recent"`
	// WaitingForSlot counts the queued keys, counted in Depth, that wait
	// for a free slot of their group; 0 on a queue without group limits
	// (see [workqueue.GroupLimits]).
	WaitingForSlot int `json:"waitingForSlot"`
	// GroupCount counts the groups that have keys in flight or queued;
	// Groups holds the first of them, as many as the view's Limit, those
	// with keys waiting for a slot first, then by name. Both are empty on a queue without group limits.
	GroupCount int         `json:"groupCount"`
	Groups     []GroupView `json:"groups"`
	// FailuresLastMinute counts the failed reconciles in the 60 whole
	// seconds up to the view, on the handler's clock; Failures and GivenUp
	// count the failed reconciles and the give-ups since registration.
	FailuresLastMinute int    `json:"failuresLastMinute"`
	Failures           uint64 `json:"failures"`
	GivenUp            uint64 `json:"givenUp"`
}

// InFlightKey is a key being processed.
type InFlightKey struct {
	Key string `json:"key"`
	// Since is when the queue handed the key out; AgeSeconds is how long
	// before the snapshot that was.
	Since      time.Time `json:"since"`
	AgeSeconds float64   `json:"ageSeconds"`
	// Requeue reports whether the key was added again while processed, so
	// that it is queued again when done.
	Requeue bool `json:"requeue"`
	// Requeues is the number of rate-limited requeues the queue's rate
	// limiter counts for the key (NumRequeues); 0 on a queue without one.
	Requeues int `json:"requeues"`
}

// DelayedKey is a key waiting for a delay.
type DelayedKey struct {
	Key string `json:"key"`
	// ReadyAt is when the key will be queued; ReadyInSeconds is how long
	// after the snapshot that is, or 0 if it is due already.
	ReadyAt        time.Time `json:"readyAt"`
	ReadyInSeconds float64   `json:"readyInSeconds"`
	// Requeues is as in InFlightKey.
	Requeues int `json:"requeues"`
}

// ParkedKey is a key parked until an event (see [workqueue.Base.Park]).
type ParkedKey struct {
	Key string `json:"key"`
	// Events are the events that wake it.
	Events []string `json:"events"`
	// Since is when its park took effect; ParkedSeconds is how long before
	// the snapshot that was.
	Since         time.Time `json:"since"`
	ParkedSeconds float64   `json:"parkedSeconds"`
	// Requeues is as in InFlightKey.
	Requeues int `json:"requeues"`
}

// GroupView is a group of a queue with group limits that has keys in
// flight or queued.
type GroupView struct {
	// Group is the group's name; "" is the keys of no group, which have
	// no limit.
	Group string `json:"group"`
	// Limit is how many of the group's keys may be in flight at once; 0
	// means no limit.
	Limit int `json:"limit"`
	// InFlight counts the group's keys handed out and not yet done, and
	// Queued its queued keys. WaitingForSlot is how many of those find no
	// free slot: Queued less the free slots, or 0.
	InFlight       int `json:"inFlight"`
	Queued         int `json:"queued"`
	WaitingForSlot int `json:"waitingForSlot"`
}

// FailedKey is a key whose reconcile failed, and what became of it.
type FailedKey struct {
	Key string `json:"key"`
	// Failures is the number of failed reconciles in a row, as of the
	// failure shown.
	Failures int `json:"failures"`
	// LastError is the failure's error text, cut to 1 KiB.
	LastError string `json:"lastError"`
	// LastFailed is when the handler was told of the failure, on the
	// handler's clock; AgoSeconds is how long before the view that was.
	LastFailed time.Time `json:"lastFailed"`
	AgoSeconds float64   `json:"agoSeconds"`
	// State is what became of the key: retried, given up, dropped because
	// the queue is shutting down, or, in Recent only, succeeded since.
	State State `json:"state"`
}

// queueEntry is a queue registered with a Handler.
type queueEntry[T comparable] struct {
	name     string
	queue    Snapshotter[T]
	format   func(T) string
	failures *Failures
	now      func() time.Time // the handler's clock

	// mu guards the adds-per-second state: the time and adds count of the
	// earlier snapshot, and the last rate computed (nil before the first).
	mu        sync.Mutex
	baseTaken time.Time
	baseAdds  uint64
	rate      *float64
}

// minRateInterval is the shortest time between the two snapshots of an
// adds-per-second rate.
const minRateInterval = time.Second

func (q *queueEntry[T]) view(limit int) QueueView {
	s := q.queue.Snapshot(limit)
	v := QueueView{
		Name:           q.name,
		Taken:          s.Taken,
		ShuttingDown:   s.ShuttingDown,
		Depth:          s.Depth,
		Processing:     s.Processing,
		Waiting:        s.Waiting,
		Parked:         s.Parked,
		Adds:           s.Adds,
		AddsPerSecond:  q.addsPerSecond(s),
		Queued:         make([]string, 0, len(s.Queued)),
		InFlight:       make([]InFlightKey, 0, len(s.InFlight)),
		Delayed:        make([]DelayedKey, 0, len(s.Delayed)),
		ParkedKeys:     make([]ParkedKey, 0, len(s.ParkedItems)),
		WaitingForSlot: s.WaitingForSlot,
		GroupCount:     max(s.GroupCount, len(s.Groups)),
		Groups:         make([]GroupView, 0, min(len(s.Groups), limit)),
	}
	q.failures.fill(&v, q.now())
	for _, item := range s.Queued {
		v.Queued = append(v.Queued, q.format(item))
	}
	for _, f := range s.InFlight {
		v.InFlight = append(v.InFlight, InFlightKey{
			Key: q.format(f.Item), Since: f.Since, AgeSeconds: s.Taken.Sub(f.Since).Seconds(),
			Requeue: f.Requeue, Requeues: s.Failures[f.Item],
		})
	}
	// The queues of this module list them longest first already; another
	// Snapshotter need not.
	slices.SortStableFunc(v.InFlight, func(a, b InFlightKey) int { return a.Since.Compare(b.Since) })
	for _, d := range s.Delayed {
		v.Delayed = append(v.Delayed, DelayedKey{
			Key: q.format(d.Item), ReadyAt: d.ReadyAt, ReadyInSeconds: max(d.ReadyAt.Sub(s.Taken), 0).Seconds(),
			Requeues: s.Failures[d.Item],
		})
	}
	slices.SortStableFunc(v.Delayed, func(a, b DelayedKey) int { return a.ReadyAt.Compare(b.ReadyAt) })
	for _, p := range s.ParkedItems {
		v.ParkedKeys = append(v.ParkedKeys, ParkedKey{
			Key: q.format(p.Item), Events: slices.Clone(p.Events), Since: p.Since,
			ParkedSeconds: max(s.Taken.Sub(p.Since), 0).Seconds(), Requeues: s.Failures[p.Item],
		})
	}
	// The queues of this module list the groups in this order already;
	// another Snapshotter need not.
	groups := slices.Clone(s.Groups)
	slices.SortStableFunc(groups, byWaitingThenName)
	for _, g := range groups[:min(len(groups), limit)] {
		v.Groups = append(v.Groups, GroupView{
			Group: g.Group, Limit: max(g.Limit, 0), InFlight: g.InFlight, Queued: g.Queued, WaitingForSlot: g.Waiting,
		})
	}
	if s.ShuttingDown {
		// A queue shutting down drops every add, so the retry the Runner
		// was told of when the key failed will not happen.
		for _, keys := range [][]FailedKey{v.Failing, v.Recent} {
			for i := range keys {
				if keys[i].State == Retrying {
					keys[i].State = DroppedAtShutdown
				}
			}
		}
	}
	return v
}

// addsPerSecond returns the rate of adds from the earlier snapshot to s, and
// makes s the earlier one if it is at least minRateInterval later; see
// QueueView.AddsPerSecond.
func (q *queueEntry[T]) addsPerSecond(s workqueue.Snapshot[T]) *float64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	elapsed := s.Taken.Sub(q.baseTaken)
	if elapsed < minRateInterval || s.Adds < q.baseAdds {
		return cloneRate(q.rate)
	}
	rate := float64(s.Adds-q.baseAdds) / elapsed.Seconds()
	q.rate = &rate
	q.baseTaken, q.baseAdds = s.Taken, s.Adds
	return cloneRate(q.rate)
}

// cloneRate copies r, so that a view shares nothing with the handler.
func cloneRate(r *float64) *float64 {
	if r == nil {
		return nil
	}
	c := *r
	return &c
}

// byWaitingThenName orders groups with keys waiting for a slot first, then
// by name, as [workqueue.Snapshot] lists them.
func byWaitingThenName(a, b workqueue.GroupState) int {
	aWaits, bWaits := a.Waiting > 0, b.Waiting > 0
	switch {
	case aWaits && !bWaits:
		return -1
	case bWaits && !aWaits:
		return 1
	}
	return cmp.Compare(a.Group, b.Group)
}

// byMostFailures orders failing keys most failures first, then the most
// recent failure first, then by key.
func byMostFailures(a, b FailedKey) int {
	return cmp.Or(cmp.Compare(b.Failures, a.Failures), b.LastFailed.Compare(a.LastFailed), cmp.Compare(a.Key, b.Key))
}
