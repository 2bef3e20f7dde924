package redisqueue

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"k8s.io/utils/clock"

	"github.com/go-workqueue/workqueue"
	"github.com/go-workqueue/workqueue/reconcile"
)

var (
	// ErrKeyTooLarge is returned for an item whose encoded key is longer
	// than Options.MaxKeyBytes.
	ErrKeyTooLarge = errors.New("workqueue: key too large")
	// ErrLeaseLost is returned by DoneContext and ParkContext when the
	// item's lease is no longer this handle's: it expired and was taken
	// back to hand the item out again, or Redis lost it. The call changed
	// nothing.
	ErrLeaseLost = errors.New("workqueue: lease lost")
	// ErrNotHeld is returned by DoneContext for an item this handle did
	// not hand out, or already marked done.
	ErrNotHeld = errors.New("workqueue: item not held by this handle")
	// ErrNotReplicated is returned by an add or a DoneContext when
	// Options.WaitReplicas is set and too few replicas acknowledged its
	// writes within Options.WaitTimeout. The call took effect on the
	// primary and is lost if the primary dies before a replica has it.
	ErrNotReplicated = errors.New("workqueue: write not replicated in time")
)

// Queue is one process's handle on a queue kept in Redis: every handle
// made with the same Redis and name shares the queue. It satisfies
// workqueue.TypedRateLimitingInterface[T], so a reconcile.Runner or an existing
// worker loop runs on it unchanged. It adds the priority queue's
// AddWithOpts and GetWithPriority, Remove, and parking: Park, Wake,
// WakeFunc and WakeItem.
//
// The client-go-shaped methods retry with backoff while Redis is
// unreachable or refuses for a while (loading, read-only, out of memory,
// out of connections), and log what they give up on; each method's doc
// says until when. Each has a variant that takes a context and returns
// Redis's error instead. Each call takes effect at one instant between
// its call and its return (AddBatch at one per 256 items; WakeFunc, which
// calls accept between its read and its wake, is not one), and an add
// that returned is in Redis.
//
// With Options.Partitions every per-key guarantee holds, but keys keep
// their order, priorities included, only within a partition, and Len, Snapshot and AddBatch
// take effect at one instant per partition, not one for the whole queue;
// likewise a GetContext that gives up found each partition empty at an
// instant of its own.
//
// ShutDown and ShutDownWithDrain stop this handle only: the queue in Redis
// and the other handles go on.
//
// Make one with New; the zero value is not usable. All methods are safe
// for concurrent use.
type Queue[T comparable] struct {
	client redis.UniversalClient
	// lib is the library whose functions the handle calls.
	lib  *library
	name string
	// parts are the queue's partitions, indexed by partitionOf; one
	// unless Options.Partitions says otherwise.
	parts     []*partition
	handle    string
	codec     Codec[T]
	lease     time.Duration
	heartbeat time.Duration
	maxKey    int
	maxPark   time.Duration
	// waitReplicas and waitTimeout: Options.WaitReplicas and WaitTimeout.
	waitReplicas int
	waitTimeout  time.Duration
	logger       *slog.Logger
	clock        clock.WithTicker
	fakeTime     bool
	// provider and metricsName are the options', for MetricsConfig.
	provider    workqueue.MetricsProvider
	metricsName string
	metrics     *handleMetrics
	// tracer is provider as a TracingProvider, nil if it is not one: the
	// handle then sends no links and keeps none in Redis.
	tracer reconcile.TracingProvider
	// fairness and fairWeight: Options.Fairness[0] and FairnessWeights[0];
	// nested and nestedWeight: Fairness[1] and FairnessWeights[1]; each
	// nil if not given.
	fairness     func(T) string
	fairWeight   func(string) int
	nested       func(T) string
	nestedWeight func(string) int
	// maxWait is Options.MaxWait.
	maxWait time.Duration
	// parkBackoff is Options.ParkBackoff, or the default.
	parkBackoff workqueue.TypedRateLimiter[T]
	// groups is Options.GroupLimits, its Limits copied, nil without it.
	groups *groupLimits[T]

	// cursor modulo the number of partitions is the partition a Get
	// looks at first (see roundOrder).
	cursor atomic.Uint64
	// partitionsChecked is set once checkPartitions found the queue's
	// number of partitions to be this handle's; checkMu serializes the look.
	partitionsChecked atomic.Bool
	checkMu           sync.Mutex

	mu           sync.Mutex
	held         map[string]*holding
	waiting      int // Gets in progress
	sleeping     int // Gets waiting for a wakeup: only then does the listener block on Redis
	shuttingDown bool
	idleClosed   bool
	stopCh       chan struct{} // closed at ShutDown
	idleCh       chan struct{} // closed once shut down, with nothing held and no Get in progress
	wake         chan struct{} // a listener's wakeup for one waiting Get
	// woke marks the partitions whose listener took a wakeup token for a
	// waiting Get that no Get has taken over yet; beat those whose
	// listener's heartbeat passed without a token since a Get last woke
	// for it.
	woke         []bool
	beat         []bool
	listeners    sync.WaitGroup
	keeperDone   chan struct{}
	stopListener sync.Once
	// extenders are the keeper's extensions of leases still running, one
	// per partition at most.
	extenders sync.WaitGroup
}

// A Queue runs wherever a client-go rate-limiting queue does.
var _ workqueue.TypedRateLimitingInterface[string] = (*Queue[string])(nil)

// New returns a handle on the queue called name in the Redis that client
// talks to. It does not contact Redis: an unreachable Redis, or a queue
// with another number of partitions (ErrPartitionsChanged), shows in the
// first calls. The handle's goroutines stop once it is shut down and holds
// nothing; ShutDownWithDrain waits for them.
//
// New panics, with a message that starts with "workqueue:", on a nil
// client; on a name that is empty, longer than 256 bytes or holds '{' or
// '}'; on a nil Codec for a T other than string; on a LeaseDuration below
// 3ms, a MaxWait below 1ms, a Heartbeat below 1s, and negative durations
// and limits (MaxParkTime included); on Partitions outside 0 to 256; on
// GroupLimits with a nil Group; on a nil Fairness function, more than
// two (MaxFairnessLevels), or more FairnessWeights than Fairness; and on
// WaitReplicas with a client other than a *redis.Client or
// *redis.ClusterClient.
func New[T comparable](client redis.UniversalClient, name string, opts Options[T]) *Queue[T] {
	if client == nil {
		panic("workqueue: redisqueue.New needs a client")
	}
	if !validName(name) {
		panic(fmt.Sprintf("workqueue: redisqueue.New: queue name %q must be 1 to 256 bytes without '{' or '}'", name))
	}
	codec := opts.Codec
	if codec == nil {
		c, ok := any(stringCodec{}).(Codec[T])
		if !ok {
			var zero T
			panic(fmt.Sprintf("workqueue: redisqueue.New: a queue of %T needs Options.Codec", zero))
		}
		codec = c
	}
	lease := orDefault(opts.LeaseDuration, 30*time.Second)
	if lease < 3*time.Millisecond {
		panic(fmt.Sprintf("workqueue: redisqueue.New: LeaseDuration %v is below 3ms", lease))
	}
	if opts.MaxWait < 0 || (opts.MaxWait > 0 && opts.MaxWait < time.Millisecond) {
		panic(fmt.Sprintf("workqueue: redisqueue.New: MaxWait %v is negative or below 1ms", opts.MaxWait))
	}
	heartbeat := orDefault(opts.Heartbeat, 2*time.Second)
	if heartbeat < time.Second {
		panic(fmt.Sprintf("workqueue: redisqueue.New: Heartbeat %v is below 1s, the shortest wait of BLPOP", heartbeat))
	}
	heartbeat = heartbeat.Truncate(time.Second)
	limit := DefaultRateLimit()
	if opts.RateLimit != nil {
		limit = opts.RateLimit
	}
	if err := limit.validate(); err != nil {
		panic("workqueue: redisqueue.New: " + err.Error())
	}
	maxKey := opts.MaxKeyBytes
	if maxKey < 0 {
		panic(fmt.Sprintf("workqueue: redisqueue.New: MaxKeyBytes %d is negative", maxKey))
	}
	if maxKey == 0 {
		maxKey = 64 << 10
	}
	if opts.MaxParkTime < 0 {
		panic(fmt.Sprintf("workqueue: redisqueue.New: MaxParkTime %v is negative", opts.MaxParkTime))
	}
	if opts.WaitReplicas < 0 || opts.WaitTimeout < 0 {
		panic(fmt.Sprintf("workqueue: redisqueue.New: WaitReplicas %d and WaitTimeout %v must not be negative", opts.WaitReplicas, opts.WaitTimeout))
	}
	if opts.WaitReplicas > 0 {
		switch client.(type) {
		case *redis.Client, *redis.ClusterClient:
		default:
			panic(fmt.Sprintf("workqueue: redisqueue.New: WaitReplicas needs a *redis.Client or *redis.ClusterClient, got %T", client))
		}
	}
	partitions := opts.Partitions
	if partitions < 0 || partitions > maxPartitions {
		panic(fmt.Sprintf("workqueue: redisqueue.New: Partitions %d is outside 0 to %d", partitions, maxPartitions))
	}
	partitions = max(partitions, 1)
	if len(opts.Fairness) > MaxFairnessLevels {
		panic(fmt.Sprintf("workqueue: redisqueue.New: %d Fairness functions; the Redis queue takes at most %d", len(opts.Fairness), MaxFairnessLevels))
	}
	for i, f := range opts.Fairness {
		if f == nil {
			panic(fmt.Sprintf("workqueue: redisqueue.New: Fairness[%d] is nil", i))
		}
	}
	if len(opts.FairnessWeights) > len(opts.Fairness) {
		panic(fmt.Sprintf("workqueue: redisqueue.New: %d FairnessWeights for %d Fairness functions", len(opts.FairnessWeights), len(opts.Fairness)))
	}
	var fairness, nested func(T) string
	var fairWeight, nestedWeight func(string) int
	if len(opts.Fairness) > 0 {
		fairness = opts.Fairness[0]
	}
	if len(opts.Fairness) > 1 {
		nested = opts.Fairness[1]
	}
	if len(opts.FairnessWeights) > 0 {
		fairWeight = opts.FairnessWeights[0]
	}
	if len(opts.FairnessWeights) > 1 {
		nestedWeight = opts.FairnessWeights[1]
	}
	parkBackoff := opts.ParkBackoff
	if parkBackoff == nil {
		parkBackoff = workqueue.NewTypedItemExponentialFailureRateLimiter[T](5*time.Millisecond, 10*time.Second)
	}
	if opts.GroupLimits != nil && opts.GroupLimits.Group == nil {
		panic("workqueue: redisqueue.New: GroupLimits.Group is nil")
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.Default()
	}
	var clk clock.WithTicker = clock.RealClock{}
	if opts.Clock != nil {
		clk = opts.Clock
	}
	metricsName := opts.Name
	if metricsName == "" {
		metricsName = name
	}
	q := &Queue[T]{
		client:       client,
		lib:          queueLibrary,
		name:         name,
		handle:       newHandleID(),
		codec:        codec,
		lease:        lease,
		heartbeat:    heartbeat,
		maxKey:       maxKey,
		maxPark:      orDefault(opts.MaxParkTime, workqueue.DefaultMaxParkTime),
		waitReplicas: opts.WaitReplicas,
		waitTimeout:  orDefault(opts.WaitTimeout, time.Second),
		logger:       logger.With("queue", name),
		clock:        clk,
		fakeTime:     opts.Clock != nil,
		metrics:      newHandleMetrics(opts.MetricsProvider, metricsName),
		provider:     opts.MetricsProvider,
		tracer:       tracerOf(opts.MetricsProvider),
		metricsName:  metricsName,
		fairness:     fairness,
		fairWeight:   fairWeight,
		nested:       nested,
		nestedWeight: nestedWeight,
		maxWait:      opts.MaxWait,
		parkBackoff:  parkBackoff,
		groups:       newGroupLimits(opts.GroupLimits),
		held:         make(map[string]*holding),
		stopCh:       make(chan struct{}),
		idleCh:       make(chan struct{}),
		wake:         make(chan struct{}, 1),
		woke:         make([]bool, partitions),
		beat:         make([]bool, partitions),
		keeperDone:   make(chan struct{}),
	}
	for i, prefix := range partitionPrefixes(name, partitions) {
		p := &partition{
			index:     i,
			keys:      newQueueKeys(prefix),
			limit:     limit.rateLimitArgs(partitions),
			hasWaiter: make(chan struct{}, 1),
		}
		p.adds = newCoalescer(maxBatch, func(calls []addCall) ([]int64, error) {
			return q.runAdds(context.Background(), p, calls)
		})
		// An adder usually adds again at once (a handler's events, a
		// list's keys); a worker whose Done returned calls Get.
		p.adds.returns = func(addCall) bool { return true }
		p.steps = newCoalescer(maxBatch, func(calls []stepCall) ([]stepResult, error) { return q.runSteps(p, calls) })
		p.steps.returns = func(c stepCall) bool { return c.isDone }
		q.parts = append(q.parts, p)
	}
	// One listener per partition waits on Redis for wakeups while a Get
	// waits; the keeper extends the leases of the items being processed.
	for _, p := range q.parts {
		q.listeners.Go(func() { q.listen(p) })
	}
	go q.keep()
	return q
}

func orDefault(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

func newHandleID() string {
	return newNonce()
}

// newNonce returns 16 random hex digits.
func newNonce() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// now is the time the calls use: the handle's clock when one was
// configured, else -1, which makes them read Redis's.
func (q *Queue[T]) now() int64 {
	if q.fakeTime {
		return q.clock.Now().UnixMilli()
	}
	return -1
}

func (q *Queue[T]) encode(item T) (string, error) {
	key, err := q.codec.Encode(item)
	if err != nil {
		return "", fmt.Errorf("workqueue: encoding %v: %w", item, err)
	}
	if len(key) > q.maxKey {
		return "", fmt.Errorf("%w: %d bytes, the limit is %d", ErrKeyTooLarge, len(key), q.maxKey)
	}
	return key, nil
}

// Forget clears item's failure count in Redis, for every process, and
// this handle's ParkBackoff count of it. It retries while Redis is
// unreachable, and logs a failure it gives up on.
func (q *Queue[T]) Forget(item T) {
	q.parkBackoff.Forget(item)
	key, err := q.encode(item)
	if err != nil {
		return // it was never counted
	}
	if err := q.retry("Forget", nil, func(ctx context.Context) error {
		return q.forget(ctx, key)
	}); err != nil {
		q.logger.Error("workqueue: Forget failed", "key", key, "err", err)
	}
}

// ForgetContext is Forget without retries.
func (q *Queue[T]) ForgetContext(ctx context.Context, item T) error {
	q.parkBackoff.Forget(item)
	key, err := q.encode(item)
	if err != nil {
		return err
	}
	return q.forget(ctx, key)
}

func (q *Queue[T]) forget(ctx context.Context, key string) error {
	if err := q.checkPartitions(ctx); err != nil {
		return err
	}
	return q.client.HDel(ctx, q.part(key).keys.fails, key).Err()
}

// NumRequeues returns item's failure count in Redis, counted by every
// process since its last Forget. It retries while Redis is unreachable and
// returns 0 once the client is closed.
func (q *Queue[T]) NumRequeues(item T) int {
	n, err := retryValue(q, "NumRequeues", func(ctx context.Context) (int, error) {
		return q.NumRequeuesContext(ctx, item)
	})
	if err != nil {
		q.logger.Error("workqueue: NumRequeues failed", "err", err)
	}
	return n
}

// NumRequeuesContext is NumRequeues without retries.
func (q *Queue[T]) NumRequeuesContext(ctx context.Context, item T) (int, error) {
	key, err := q.encode(item)
	if err != nil {
		return 0, err
	}
	if err := q.checkPartitions(ctx); err != nil {
		return 0, err
	}
	n, err := q.client.HGet(ctx, q.part(key).keys.fails, key).Int()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	return n, err
}

// Len returns the number of items queued and ready, across every process:
// an item whose After or rate-limit delay has ended is ready, whether or
// not a Get has looked since; items still waiting for a delay, parked or
// being processed are not counted. On a partitioned queue it sums the
// partitions' counts, each taken at its own instant. It retries while
// Redis is unreachable and returns 0 once the client is closed.
func (q *Queue[T]) Len() int {
	n, err := retryValue(q, "Len", q.LenContext)
	if err != nil {
		q.logger.Error("workqueue: Len failed", "err", err)
	}
	return n
}

// LenContext is Len without retries.
func (q *Queue[T]) LenContext(ctx context.Context) (int, error) {
	if err := q.checkPartitions(ctx); err != nil {
		return 0, err
	}
	// Each call moves a bounded batch of a partition's due keys into its
	// queue (see fn_len); a partition whose batch was full is looked at
	// again, so that its count, from its last call, has them all.
	pending := q.parts
	for loaded := false; len(pending) > 0; {
		cmds := make([]*redis.Cmd, len(pending))
		_, err := q.client.Pipelined(ctx, func(pipe redis.Pipeliner) error {
			for i, p := range pending {
				cmds[i] = pipe.FCall(ctx, q.lib.fns[opLen], p.keys.fcall, q.features(), q.now())
			}
			return nil
		})
		if lacksLibrary(err) {
			if loaded {
				return 0, q.lib.mismatch(err)
			}
			if err := q.lib.load(ctx, q.client); err != nil {
				return 0, err
			}
			loaded = true
			continue
		}
		if err != nil {
			return 0, err
		}
		var left []*partition
		for i, p := range pending {
			r := replyReader{script: "len"}
			reply := r.ints(cmds[i].Val(), 2, "the reply")
			if r.err != nil {
				return 0, r.err
			}
			p.depth.Store(reply[0])
			if reply[1] == 1 {
				left = append(left, p)
			}
		}
		pending = left
	}
	var n int64
	for _, p := range q.parts {
		n += p.depth.Load()
	}
	q.metrics.setDepth(n)
	return int(n), nil
}

// ShuttingDown reports whether ShutDown has been called on this handle.
func (q *Queue[T]) ShuttingDown() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.shuttingDown
}

// ShutDown shuts this handle down: its Gets in progress and later ones
// return shutdown at once, even with items queued (they stay for the
// other handles), and its adds are ignored. Items it handed out keep their
// leases, extended until their Done. The queue in Redis and the other
// handles are untouched. It returns once the handle's listeners have
// stopped: soon while Redis answers, else after up to a Heartbeat plus
// go-redis's 10s margin on blocking reads. Calling it again does nothing.
func (q *Queue[T]) ShutDown() {
	q.mu.Lock()
	if !q.shuttingDown {
		q.shuttingDown = true
		close(q.stopCh)
	}
	q.checkIdleLocked()
	q.mu.Unlock()
	// The listeners are stopped and waited for; the keeper goes on
	// extending the leases still held until their Done (see keep).
	q.stopListener.Do(func() {
		// Wake the listener if it is blocked on Redis. If this fails, its
		// wait times out within a heartbeat.
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, _ = q.client.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, part := range q.parts {
				wakeKey := part.keys.wakeKey(q.handle)
				p.RPush(ctx, wakeKey, 1)
				p.PExpire(ctx, wakeKey, time.Minute)
			}
			return nil
		})
	})
	q.listeners.Wait()
}

// ShutDownWithDrain shuts the handle down as ShutDown does, then waits
// until Done has been called for every item it handed out, those whose
// lease was lost included, and its goroutines have stopped. It does not
// wait for the queue to empty.
func (q *Queue[T]) ShutDownWithDrain() {
	q.ShutDown()
	<-q.idleCh
	<-q.keeperDone
}

// checkIdleLocked closes idleCh once the handle is shut down with nothing
// held and no Get in progress. q.mu must be held.
func (q *Queue[T]) checkIdleLocked() {
	if q.shuttingDown && !q.idleClosed && q.waiting == 0 && len(q.held) == 0 {
		q.idleClosed = true
		close(q.idleCh)
	}
}
