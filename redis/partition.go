package redisqueue

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// ErrPartitionsChanged is returned by every call of a handle whose
// Options.Partitions differs from the number recorded by the queue's
// first handle. No method retries it, and Get returns shutdown on it.
// README.md says how to change a queue's number of partitions.
var ErrPartitionsChanged = errors.New("workqueue: the queue has another number of partitions")

// maxPartitions bounds Options.Partitions: more partitions than a
// cluster has primaries gain nothing, and each costs an idle handle a
// listener and a look per wakeup.
const maxPartitions = 256

// partition is one part of a queue: a complete queue of its own, under
// its own hash tag, holding the keys that partitionOf maps to it, with its
// own calls of concurrent calls and its own listener.
type partition struct {
	index int
	keys  queueKeys
	// limit is the addopts function's rate limit arguments: the per-key backoff
	// whole, the bucket's rate and burst shared out between partitions.
	limit []any

	// adds batches the handle's concurrent adds here, steps its
	// concurrent Gets and Dones together (see runSteps).
	adds  *coalescer[addCall, int64]
	steps *coalescer[stepCall, stepResult]

	// hasWaiter tells the partition's listener that a Get went to sleep.
	hasWaiter chan struct{}
	// depth is the partition's ready count as Redis last reported it,
	// and parked its count of parked keys.
	depth  atomic.Int64
	parked atomic.Int64
	// failures counts the get calls in a row that failed for an outage,
	// the last at failedAt (Unix ns on the handle's clock): the partition
	// is left out of Gets' rounds for backoff(failures-1) after it.
	failures atomic.Int64
	failedAt atomic.Int64
	// probing is set while a Get looks at the partition after failures.
	probing atomic.Bool
	// orphans are nonces of get calls of this partition whose reply was
	// lost and whose Get left without sending them again: each may have
	// leased a key that no one holds. A later Get here sends one instead
	// of a new nonce, and so gets that grant, if there was one and its
	// lease still runs, instead of leaving the key stuck until its lease
	// expires. Guarded by orphansMu.
	orphansMu sync.Mutex
	orphans   []string
	// extending is set while the keeper's extension of the partition's
	// leases runs, and extendAgain when a tick came meanwhile (see
	// extendLeases). Guarded by the Queue's mu.
	extending, extendAgain bool
}

// retryIn reports whether a Get is to look at p at now: yes if its last
// get call answered, else once its backoff has passed and no other Get
// looks at it, and then probe is set: the Get must clear p.probing once
// its look is over. If not, it returns how long to wait before asking
// again.
func (p *partition) retryIn(now time.Time) (until time.Duration, look, probe bool) {
	n := p.failures.Load()
	if n == 0 {
		return 0, true, false
	}
	wait := backoff(int(n - 1))
	if until := time.Unix(0, p.failedAt.Load()).Add(wait).Sub(now); until > 0 {
		return until, false, false
	}
	if !p.probing.CompareAndSwap(false, true) {
		return wait, false, false
	}
	return 0, true, true
}

// maxOrphans bounds partition.orphans: past it, during a long outage, a
// lost grant's key waits for its lease to expire.
const maxOrphans = 1024

// orphan records nonce, sent in a get call of p whose reply was lost,
// for a later Get to send again.
func (p *partition) orphan(nonce string) {
	p.orphansMu.Lock()
	defer p.orphansMu.Unlock()
	if len(p.orphans) < maxOrphans {
		p.orphans = append(p.orphans, nonce)
	}
}

// nonce returns the nonce for a Get's next get call in p: an orphan,
// if any is left, else a new one.
func (p *partition) nonce() string {
	p.orphansMu.Lock()
	defer p.orphansMu.Unlock()
	if n := len(p.orphans); n > 0 {
		nonce := p.orphans[n-1]
		p.orphans = p.orphans[:n-1]
		return nonce
	}
	return newNonce()
}

// answered records that a get call of p succeeded.
func (p *partition) answered() {
	if p.failures.Load() != 0 {
		p.failures.Store(0)
	}
}

// partitionFailed records that a get call of p failed with err, an
// outage, logging the first failure in a row and every twentieth. It is
// called once per script, not per Get the call served, so that one
// failure of a call shared by many Gets backs off as one.
func (q *Queue[T]) partitionFailed(p *partition, err error) {
	p.failedAt.Store(q.clock.Now().UnixNano())
	n := p.failures.Add(1)
	if n%20 == 1 {
		q.logger.Warn("workqueue: a partition is unreachable; Gets take from the others meanwhile", "partition", p.index, "attempt", n, "err", err)
	}
}

// backoffFor returns how long p is left out of the Gets' rounds after its
// last failed get call: the backoff of its failures in a row.
func (p *partition) backoffFor() time.Duration {
	return backoff(int(max(p.failures.Load()-1, 0)))
}

// partitionOf returns the partition of key among n: the CRC-32 (IEEE) of
// key modulo n, the same in every process.
func partitionOf(key string, n int) int {
	if n == 1 {
		return 0
	}
	return int(crc32.ChecksumIEEE([]byte(key)) % uint32(n))
}

// partitionPrefixes returns the key prefixes of the n partitions of the
// queue called name. Partition 0 has the prefix of a queue of one
// partition, wq:{name}:, which also holds the recorded number of
// partitions. Partition i > 0 has the prefix wq:i:{name:s}:, where s is
// the smallest number whose hash tag falls in the slot i/n of the way
// round the 16,384 slots from partition 0's (or the nearest found): on a
// cluster whose primaries serve equal ranges of consecutive slots, as
// redis-cli --cluster create and most hosted clusters make them, n
// partitions on n primaries land one on each. The prefixes of two queues
// never coincide (i is before the braces, and s has no ':'), though their
// slots may. The search takes about 1ms per partition, so its results are
// kept for the process's later handles.
func partitionPrefixes(name string, n int) []string {
	if n == 1 {
		return []string{"wq:{" + name + "}:"}
	}
	type queue struct {
		name string
		n    int
	}
	if prefixes, ok := prefixCache.Load(queue{name, n}); ok {
		return prefixes.([]string)
	}
	prefixes := findPrefixes(name, n)
	prefixCache.Store(queue{name, n}, prefixes)
	return prefixes
}

// prefixCache maps a queue's name and number of partitions to
// partitionPrefixes' result.
var prefixCache sync.Map

func findPrefixes(name string, n int) []string {
	prefixes := make([]string, n)
	prefixes[0] = "wq:{" + name + "}:"
	first := clusterSlot(name)
	// The CRC of name+":" once; each candidate only adds its digits.
	base := crc16(0, name+":")
	var digits []byte
	for i := 1; i < n; i++ {
		target := (first + i*clusterSlots/n) % clusterSlots
		best, bestDistance := 0, clusterSlots
		for s := 0; s < 1<<17 && bestDistance > 0; s++ {
			digits = strconv.AppendInt(digits[:0], int64(s), 10)
			d := slotDistance(int(crc16(base, string(digits)))%clusterSlots, target)
			if d < bestDistance {
				best, bestDistance = s, d
			}
		}
		prefixes[i] = "wq:" + strconv.Itoa(i) + ":{" + name + ":" + strconv.Itoa(best) + "}:"
	}
	return prefixes
}

const clusterSlots = 16384

// clusterSlot is Redis Cluster's slot of a hash tag: CRC-16/XMODEM
// modulo 16,384.
func clusterSlot(tag string) int {
	return int(crc16(0, tag)) % clusterSlots
}

// crc16 continues the CRC-16/XMODEM crc over s.
func crc16(crc uint16, s string) uint16 {
	for i := 0; i < len(s); i++ {
		crc = crc<<8 ^ crc16Table[byte(crc>>8)^s[i]]
	}
	return crc
}

func slotDistance(a, b int) int {
	d := a - b
	if d < 0 {
		d = -d
	}
	return min(d, clusterSlots-d)
}

var crc16Table = func() (table [256]uint16) {
	for i := range table {
		crc := uint16(i) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
		table[i] = crc
	}
	return table
}()

// part returns the partition of key: with GroupLimits, that of its
// group's name, if it has a group, so that a group's leases are counted
// in one place.
func (q *Queue[T]) part(key string) *partition {
	if q.groups != nil && len(q.parts) > 1 {
		if item, err := q.codec.Decode(key); err == nil {
			if group := q.groups.group(item); group != "" {
				return q.parts[partitionOf(group, len(q.parts))]
			}
		}
	}
	return q.parts[partitionOf(key, len(q.parts))]
}

// roundOrder returns the order in which a Get looks at every partition:
// first the cursor's, then the others whose last reported depth was
// positive, then the rest, each group from the first onwards.
//
// The cursor moves on to the next partition when a get call of the
// cursor's partition starts (see runTakes), so that the Gets that come
// while one runs share the next call there, where a cursor moved by each
// Get would split them over the partitions into calls that serve fewer
// Gets each. Each partition is first in turn, so none starves, whatever
// the depths say: a depth that this handle has not heard of for a while
// is refreshed when its partition is first.
func (q *Queue[T]) roundOrder() []int {
	n := len(q.parts)
	first := int(q.cursor.Load() % uint64(n))
	order := make([]int, 0, n)
	order = append(order, first)
	for _, busy := range []bool{true, false} {
		for k := 1; k < n; k++ {
			i := (first + k) % n
			if (q.parts[i].depth.Load() > 0) == busy {
				order = append(order, i)
			}
		}
	}
	return order
}

// turn moves the cursor on if it is at partition p, whose get call is
// about to run.
func (q *Queue[T]) turn(p *partition) {
	if c := q.cursor.Load(); int(c%uint64(len(q.parts))) == p.index {
		q.cursor.CompareAndSwap(c, c+1)
	}
}

// setDepth records partition p's ready count and sets the depth metric to
// the sum of the last counts of every partition.
func (q *Queue[T]) setDepth(p *partition, depth int64) {
	p.depth.Store(depth)
	var sum int64
	for _, p := range q.parts {
		sum += p.depth.Load()
	}
	q.metrics.setDepth(sum)
}

// checkPartitions makes sure, once per handle (with WaitReplicas, until
// the replicas have the number), that the queue in Redis has as many
// partitions as this handle: the first handle of a queue records its
// number in partition 0, and a handle with another gets
// ErrPartitionsChanged from every call. A queue that holds keys but no
// recorded number counts as one partition. It returns Redis's error until
// a look succeeds.
func (q *Queue[T]) checkPartitions(ctx context.Context) error {
	if q.partitionsChecked.Load() {
		return nil
	}
	q.checkMu.Lock()
	defer q.checkMu.Unlock()
	if q.partitionsChecked.Load() {
		return nil
	}
	keys := q.parts[0].keys.fcall
	// Replicated as the adds are, so that a failover cannot lose the
	// recorded number while handles go on using the queue it describes.
	res, err := q.runReplicated(ctx, keys, opPartitions, len(q.parts))
	// Not replicated yet, the number stands on the primary: the call goes
	// on (an add's own WAIT covers the number too, written before it), and
	// the next call checks again until the replicas have it.
	replicated := !errors.Is(err, ErrNotReplicated)
	if err != nil && replicated {
		return err
	}
	r := replyReader{script: "partitions"}
	n := r.int(res, "the number of partitions")
	if r.err != nil {
		return r.err
	}
	if n != int64(len(q.parts)) {
		return fmt.Errorf("%w: %q has %d, this handle %d (Options.Partitions)", ErrPartitionsChanged, q.name, n, len(q.parts))
	}
	q.partitionsChecked.Store(replicated)
	return nil
}

// rateLimitArgs returns the addopts function's rate limit arguments for one of n
// partitions: the per-key backoff as configured, and a bucket of QPS/n
// with a burst of Burst/n rounded up, so that the n buckets together
// refill at QPS.
func (r RateLimit) rateLimitArgs(n int) []any {
	share := r
	share.QPS = r.QPS / float64(n)
	share.Burst = (r.Burst + n - 1) / n
	return share.functionArgs()
}

// untilDue returns how long a Get waits at now for the first of the
// times due (zero: none) at which it is to look again: 0 if one has come,
// -1 if none is set.
func untilDue(due []time.Time, now time.Time) time.Duration {
	wait := time.Duration(-1)
	for _, d := range due {
		if d.IsZero() {
			continue
		}
		left := d.Sub(now)
		if left <= 0 {
			return 0
		}
		if wait < 0 || left < wait {
			wait = left
		}
	}
	return wait
}
