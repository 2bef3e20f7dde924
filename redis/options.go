package redisqueue

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"time"

	"k8s.io/utils/clock"

	"github.com/go-workqueue/workqueue"
)

// MaxFairnessLevels is the most Options.Fairness functions a Queue takes:
// its library in Redis keeps two levels of turns.
const MaxFairnessLevels = 2

// Options configures a Queue. The zero value is valid for a Queue[string].
type Options[T comparable] struct {
	// Codec turns items into Redis strings and back. It may be nil for a
	// Queue[string], which stores the strings as they are.
	Codec Codec[T]

	// LeaseDuration bounds how long a key stays leased after its holder
	// dies or loses Redis; while the holder lives, the handle extends the
	// lease until Done. Default 30s; at least 3ms.
	LeaseDuration time.Duration

	// Heartbeat bounds how long a waiting Get goes without looking for
	// delayed keys that came due and expired leases, which no add
	// signals. Default 2s; at least 1s, truncated to whole seconds.
	Heartbeat time.Duration

	// RateLimit configures AddRateLimited. Nil means DefaultRateLimit().
	RateLimit *RateLimit

	// MaxKeyBytes is the largest encoded key accepted. Default 64 KiB.
	MaxKeyBytes int

	// MaxParkTime bounds a park (see Queue.Park): a key parked by this
	// handle's Done is queued again once this long has passed since, or
	// once its ParkBackoff has if that ends later, if nothing woke it
	// before. 0 means workqueue.DefaultMaxParkTime.
	MaxParkTime time.Duration

	// ParkBackoff gives, at each Park of an item this handle holds, how
	// long from the Park a wake waits before it queues the item, as the
	// in-memory rate-limiting queue's ParkBackoff does: a Wake or WakeFunc
	// by any handle before then makes the item wait until then, as an
	// AddAfter would, and MaxParkTime's end waits for it too; WakeItem and
	// an add do not wait. Nil means a backoff per item from 5 ms, doubling
	// up to 10 s, as in the in-memory queue. Its When is called once per
	// Park (once per ParkContext) of an item this handle holds, whether or
	// not the park then takes effect; Forget and Remove through this handle
	// call its Forget. It must be safe for concurrent use.
	//
	// Unlike RateLimit it is not kept in Redis, as it is a
	// workqueue.TypedRateLimiter: its counts are this handle's, so the
	// Park of an item by another handle goes by that handle's counts, and
	// another handle's Forget or Remove does not reset this one's. The end
	// of a park's backoff is kept in Redis with the park.
	ParkBackoff workqueue.TypedRateLimiter[T]

	// WaitReplicas, when positive, makes every add and Done wait until
	// that many replicas have its writes (Redis's WAIT), so that one that
	// returned survives a failover to a replica (Sentinel, Redis Cluster).
	// One whose writes reach fewer replicas within WaitTimeout fails with
	// ErrNotReplicated, which the client-go-shaped methods retry; the
	// retry finds the writes made already, so a Remove, WakeItem or Wake
	// retried so reports what it did on the retry, not on the first try
	// (false, or fewer parks). It needs a *redis.Client or a
	// *redis.ClusterClient; New panics on another.
	WaitReplicas int

	// WaitTimeout bounds each WAIT. Default 1s.
	WaitTimeout time.Duration

	// Partitions splits the queue into that many partitions, each under
	// its own hash tag, so that it spreads over the shards of a Redis
	// Cluster (see Queue for what changes). Every handle of a queue must
	// use the same number, or get ErrPartitionsChanged. While a Get waits,
	// each partition holds one of the client's pooled connections; size
	// the pool as README.md says. 0 and 1 mean one partition; at most 256.
	Partitions int

	// MetricsProvider receives the metrics of this handle under Name, with
	// the Kubernetes workqueue names. Depth is the queue-wide ready count
	// as Redis last reported it to this handle's calls (items whose delay
	// ended included, as Len counts them), when the depth metric can be
	// Set. A call moves at most 256 of a partition's items whose delay
	// ended into the queue and counts the rest as one each, so while more
	// than that wait to be moved the depth also counts those of them that
	// are queued or being processed already, which Len does not. If it is a reconcile.TracingProvider, the handle traces: its
	// adds with a context send the span's link with the key, and its Gets
	// return the links (see GetWithInfoContext); every handle of a queue
	// must trace or none.
	MetricsProvider workqueue.MetricsProvider

	// Name labels the metrics; default the queue's name.
	Name string

	// Logger receives retries during outages, lost leases and dropped
	// items. Default slog.Default().
	Logger *slog.Logger

	// Fairness, if not empty, makes the keys these functions give the
	// items take turns within each priority, across every process, as the
	// in-memory priority queue's Fairness does: the first function's keys
	// (tenants, say), then within each the second's (namespaces). It takes
	// at most MaxFairnessLevels (two) functions, where the in-memory queue
	// takes any number: New panics on more. An item whose key has nothing queued waits
	// behind at most one item of each other key at its level and priority
	// when the encoded items sort by that key (as crredis's
	// "namespace/name" keys do), and at most two otherwise, however many
	// they have queued (besides the items that come back from waiting for
	// a group slot, see GroupLimits, which keep their earlier turns). An
	// item removed or raised to another priority gives its turn back only
	// once its key has no other item queued at that priority: the others
	// keep their turns. On a partitioned queue the turns are taken within
	// each partition. With two functions, Snapshot's Queued lists, of each
	// first-level key, only its next item (and, with MaxWait, its aged
	// ones).
	//
	// The functions must return the same key for an item every time, be
	// safe for concurrent use and not panic; every handle of a queue must
	// use the same Fairness and FairnessWeights. They are called on each
	// add and on items decoded from their keys.
	Fairness []func(item T) string

	// FairnessWeights, if not empty, gives keys of Fairness more turns:
	// FairnessWeights[d](key) is the weight of a key of Fairness[d] (a nil
	// function or a missing one means 1). A key of weight w gets w items
	// for each one of a key of weight 1, spread over the turn, not in a row
	// as in the in-memory queue. A weight is read at each add of the key's
	// items; weights below 1 count as 1 and above 2520 as 2520, and a
	// weight w acts as 2520/⌊2520/w⌋, which is w for the divisors of 2520
	// (1000 acts as 1260, 1300 as 2520). The functions are called as
	// Fairness's are. It cannot be longer than Fairness.
	FairnessWeights []func(key string) int

	// MaxWait, if positive, hands out an item queued for that long before
	// any other, whatever its priority or fairness key, the longest
	// queued first, as the in-memory priority queue's MaxWait does. A key
	// queued again at the front after its holder died is not aged, nor is,
	// with two Fairness functions and GroupLimits, an aged key that a Get passes
	// over for a full group: it goes back at the front of its priority.
	// Every handle of a queue must use the same MaxWait; at least 1ms.
	MaxWait time.Duration

	// GroupLimits, if set, limits how many keys of each group are leased
	// at once across every process, as the in-memory queue's GroupLimits
	// does: a Get passes over the keys of a group at its limit, which stay
	// queued in their order, and the Done (or lease expiry) that frees a
	// slot makes the group's first waiting key the one to hand out if it
	// comes first in the queue's order. Len counts the waiting keys as
	// queued. Snapshot counts the waiting keys that a Get has passed over
	// (WaitingForSlot) and leaves them out of Queued, where the keys of a
	// full group that no Get has reached yet are still listed; it lists
	// no Groups, and its GroupCount is 0. A slot held by a process that
	// dies frees when its lease expires.
	//
	// Group is called on each add and on items decoded from their keys,
	// and must return the same group for an item every time, be safe for
	// concurrent use and not panic. A group's limit is the one Default
	// and Limits give it, unless SetGroupLimit set one, which then holds
	// for every handle. Every handle of a queue must use the same
	// GroupLimits: each key keeps the limit of the handle that last added
	// it, and which of its group's keys' limits applies is not defined (a
	// handle without GroupLimits would not free the slots of the keys it
	// holds).
	// On a partitioned queue, the keys of a group are all in the one
	// partition its name maps to, so that its limit holds across the
	// queue; keys of no group ("") are spread by key.
	GroupLimits *workqueue.GroupLimits[T]

	// Clock, when set, gives the time the calls use instead of Redis's
	// own, and drives lease extension and the waits for delayed keys.
	// Every handle of a queue must use the same clock: it is meant for
	// tests with a fake clock.
	Clock clock.WithTicker
}

// RateLimit is AddRateLimited's limiter, kept in Redis so that every
// process sees the same failure counts and shares one token bucket. The
// delay is the larger of a per-key exponential backoff, Base*2^failures
// capped at Max, and the wait for a token of a bucket refilled at QPS up
// to Burst, as client-go's default controller rate limiter does. On a
// queue of P partitions each partition has its own bucket, refilled at
// QPS/P up to ceil(Burst/P): the whole queue refills at QPS, but one
// partition's keys get only its share.
type RateLimit struct {
	// Base is the first retry's delay; 0 turns the per-key backoff off.
	Base time.Duration
	// Max caps the per-key backoff.
	Max time.Duration
	// QPS is the bucket's refill rate; 0 turns the bucket off.
	QPS float64
	// Burst is the bucket's size; at least 1 when QPS is set.
	Burst int
}

// DefaultRateLimit returns client-go's default controller rate limit: a
// per-key backoff from 5ms to 1000s and a bucket of 10 qps with burst 100.
func DefaultRateLimit() *RateLimit {
	return &RateLimit{Base: 5 * time.Millisecond, Max: 1000 * time.Second, QPS: 10, Burst: 100}
}

func (r RateLimit) validate() error {
	switch {
	case r.Base < 0 || r.Max < 0:
		return fmt.Errorf("RateLimit.Base and Max must not be negative, got %v and %v", r.Base, r.Max)
	case r.Base > 0 && r.Max < r.Base:
		return fmt.Errorf("RateLimit.Max %v is below Base %v", r.Max, r.Base)
	case r.QPS < 0 || math.IsNaN(r.QPS) || math.IsInf(r.QPS, 0):
		return fmt.Errorf("RateLimit.QPS must be a finite number >= 0, got %v", r.QPS)
	case r.QPS > 0 && r.Burst < 1:
		return fmt.Errorf("RateLimit.Burst must be at least 1 with a QPS, got %d", r.Burst)
	}
	return nil
}

// functionArgs returns the limiter's arguments to the addopts function: base and
// max in ms, the bucket's interval between tokens in ms, and its burst.
func (r RateLimit) functionArgs() []any {
	interval := 0.0
	if r.QPS > 0 {
		interval = 1000 / r.QPS
	}
	return []any{millis(r.Base), millis(r.Max), interval, r.Burst}
}

func millis(d time.Duration) float64 {
	return float64(d) / float64(time.Millisecond)
}

// Codec turns items of type T into the strings stored in Redis and back.
// Encode must be deterministic and injective (equal items encode to the
// same string, and only they), or dedup breaks. A Queue calls it from
// many goroutines at once, so it must be safe for concurrent use.
type Codec[T any] interface {
	Encode(item T) (string, error)
	Decode(key string) (T, error)
}

// JSONCodec encodes items with encoding/json. It suits structs of plain
// fields; a map field encodes deterministically too, as json sorts keys.
// The zero value is ready to use and safe for concurrent use.
type JSONCodec[T any] struct{}

// Encode returns item's JSON.
func (JSONCodec[T]) Encode(item T) (string, error) {
	b, err := json.Marshal(item)
	return string(b), err
}

// Decode parses key as JSON.
func (JSONCodec[T]) Decode(key string) (T, error) {
	var item T
	err := json.Unmarshal([]byte(key), &item)
	return item, err
}

type stringCodec struct{}

func (stringCodec) Encode(item string) (string, error) { return item, nil }
func (stringCodec) Decode(key string) (string, error)  { return key, nil }
