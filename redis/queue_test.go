package redisqueue

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/go-workqueue/workqueue"
	"github.com/go-workqueue/workqueue/redis/redistest"
)

var queueSeq atomic.Int64

// newTestQueue returns a handle on a fresh queue of s, shut down and
// drained when the test ends.
func newTestQueue(t *testing.T, client redis.UniversalClient, opts Options[string]) *Queue[string] {
	t.Helper()
	name := fmt.Sprintf("%s-%d", strings.ReplaceAll(t.Name(), "/", "-"), queueSeq.Add(1))
	return newHandle(t, client, name, opts)
}

// newHandle returns one more handle on the queue called name.
func newHandle(t *testing.T, client redis.UniversalClient, name string, opts Options[string]) *Queue[string] {
	t.Helper()
	q := New(client, name, opts)
	t.Cleanup(func() {
		drained := make(chan struct{})
		go func() {
			q.ShutDownWithDrain()
			close(drained)
		}()
		select {
		case <-drained:
		case <-time.After(10 * time.Second):
			t.Errorf("ShutDownWithDrain still waits after 10s: an item handed out was never marked done")
		}
	})
	return q
}

// getNow hands out the next item, failing the test if none comes within
// a second.
func getNow(t *testing.T, q *Queue[string]) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	item, err := q.GetContext(ctx)
	require.NoError(t, err)
	return item
}

// TestSequences runs short scripts of calls through one handle and checks
// what Get hands out and what Len and NumRequeues say, against what the
// in-memory queue does.
func TestSequences(t *testing.T) {
	s := redistest.Start(t, redistest.Options{})
	client := s.Client()
	tests := []struct {
		name   string
		script string // ops separated by spaces: +x add, -x done, g get, r x ratelimited, f x forget
		gets   []string
		len    int
	}{
		{name: "fifo", script: "+a +b +c", gets: []string{"a", "b", "c"}},
		{name: "dedup while queued", script: "+a +b +a +a", gets: []string{"a", "b"}},
		{name: "add while processing requeues after done", script: "+a +b g +a -a", gets: []string{"b", "a"}, len: 0},
		{name: "many adds while processing requeue once", script: "+a g +a +a +a -a", gets: []string{"a"}},
		{name: "done without add leaves idle", script: "+a g -a", len: 0},
		{name: "len counts queued only", script: "+a +b g", len: 1},
		{name: "rate limited without delay adds", script: "ra rb", gets: []string{"a", "b"}},
		{name: "done of an unheld item does nothing", script: "+a -a -b", gets: []string{"a"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := newTestQueue(t, client, Options[string]{RateLimit: &RateLimit{}})
			ref := workqueue.NewTypedRateLimitingQueue(workqueue.NewTypedItemExponentialFailureRateLimiter[string](0, 0))
			defer ref.ShutDown()
			var held []string
			defer func() {
				for _, item := range held {
					q.Done(item)
				}
			}()
			for _, op := range strings.Fields(tt.script) {
				switch {
				case op == "g":
					want, _ := ref.Get()
					got := getNow(t, q)
					assert.Equal(t, want, got)
					held = append(held, got)
				case op[0] == '+':
					q.Add(op[1:])
					ref.Add(op[1:])
				case op[0] == '-':
					q.Done(op[1:])
					ref.Done(op[1:])
				case op[0] == 'r':
					q.AddRateLimited(op[1:])
					ref.AddRateLimited(op[1:])
				case op[0] == 'f':
					q.Forget(op[1:])
					ref.Forget(op[1:])
				}
			}
			assert.Equal(t, tt.len+len(tt.gets), q.Len(), "Len before the final gets")
			for _, want := range tt.gets {
				got := getNow(t, q)
				assert.Equal(t, want, got)
				q.Done(got)
			}
			assert.Equal(t, tt.len, q.Len())
		})
	}
}

// TestMatchesInMemoryQueue runs random operations, one at a time, through
// 1 to 4 handles on one Redis queue and through the in-memory rate-limiting
// queue, and checks that every observable result agrees: what Get hands
// out, Len, NumRequeues. Gets are only made when the reference has an
// item ready, so that none blocks; Done is called by the handle that got
// the item.
//
// A queue of P partitions is compared with P in-memory queues, one per
// partition, each fed the keys of its partition: an item Get hands out
// must be the one the in-memory queue of its partition hands out next
// (which partition it comes from is the queue's choice), and Len the sum.
func TestMatchesInMemoryQueue(t *testing.T) {
	s := redistest.Start(t, redistest.Options{})
	client := s.Client()
	ops := 3000
	if testing.Short() {
		ops = 500
	}
	keys := []string{"a", "b", "c", "d", "e", "f", "g"}
	tests := []struct{ handles, partitions int }{
		{1, 1}, {2, 1}, {3, 1}, {4, 1}, {1, 3}, {3, 3},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("handles=%d,partitions=%d", tt.handles, tt.partitions), func(t *testing.T) {
			seed := rand.Uint64()
			rng := rand.New(rand.NewPCG(seed, 0))
			name := fmt.Sprintf("differential-%d-%d", tt.handles, queueSeq.Add(1))
			qs := make([]*Queue[string], tt.handles)
			for i := range qs {
				qs[i] = newHandle(t, client, name, Options[string]{RateLimit: &RateLimit{}, Partitions: tt.partitions})
			}
			ref := newPartitionedRef(tt.partitions)
			defer ref.ShutDown()
			if tt.partitions > 1 {
				used := map[int]bool{}
				for _, key := range keys {
					used[partitionOf(key, tt.partitions)] = true
				}
				require.Len(t, used, tt.partitions, "the keys are in every partition")
			}
			held := map[string]int{} // item -> handle that got it
			for i := range ops {
				q := rng.IntN(tt.handles)
				key := keys[rng.IntN(len(keys))]
				where := fmt.Sprintf("seed %d, op %d", seed, i)
				switch rng.IntN(10) {
				case 0, 1:
					qs[q].Add(key)
					ref.Add(key)
				case 2:
					qs[q].AddAfter(key, 0)
					ref.AddAfter(key, 0)
				case 3:
					qs[q].AddAfter(key, time.Hour)
					ref.AddAfter(key, time.Hour)
				case 4:
					qs[q].AddRateLimited(key)
					ref.AddRateLimited(key)
				case 5:
					qs[q].Forget(key)
					ref.Forget(key)
				case 6:
					require.Equal(t, ref.NumRequeues(key), qs[q].NumRequeues(key), where)
					require.Equal(t, ref.Len(), qs[q].Len(), where)
				case 7:
					if ref.Len() == 0 {
						continue
					}
					got := getNow(t, qs[q])
					require.Equal(t, ref.next(got), got, where)
					held[got] = q
				case 9:
					batch := []string{key, keys[rng.IntN(len(keys))], keys[rng.IntN(len(keys))]}
					qs[q].AddBatch(batch)
					for _, item := range batch {
						ref.Add(item)
					}
				case 8:
					for item, h := range held {
						qs[h].Done(item)
						ref.Done(item)
						delete(held, item)
						break
					}
				}
			}
			for item, h := range held {
				qs[h].Done(item)
				ref.Done(item)
			}
			require.Equal(t, ref.Len(), qs[0].Len())
			for ref.Len() > 0 {
				got := getNow(t, qs[0])
				require.Equal(t, ref.next(got), got)
				ref.Done(got)
				qs[0].Done(got)
			}
		})
	}
}

// partitionedRef is the reference for a queue of len(parts) partitions:
// an in-memory rate-limiting queue per partition, each holding the keys
// partitionOf maps to it.
type partitionedRef struct {
	parts []workqueue.TypedRateLimitingInterface[string]
}

func newPartitionedRef(n int) *partitionedRef {
	r := &partitionedRef{}
	for range n {
		r.parts = append(r.parts, workqueue.NewTypedRateLimitingQueue(workqueue.NewTypedItemExponentialFailureRateLimiter[string](0, 0)))
	}
	return r
}

func (r *partitionedRef) of(key string) workqueue.TypedRateLimitingInterface[string] {
	return r.parts[partitionOf(key, len(r.parts))]
}

func (r *partitionedRef) Add(key string)                       { r.of(key).Add(key) }
func (r *partitionedRef) AddAfter(key string, d time.Duration) { r.of(key).AddAfter(key, d) }
func (r *partitionedRef) AddRateLimited(key string)            { r.of(key).AddRateLimited(key) }
func (r *partitionedRef) Forget(key string)                    { r.of(key).Forget(key) }
func (r *partitionedRef) NumRequeues(key string) int           { return r.of(key).NumRequeues(key) }
func (r *partitionedRef) Done(key string)                      { r.of(key).Done(key) }

// next hands out the next item of got's partition, which the queue must
// have handed out as got; "" if that partition has none ready.
func (r *partitionedRef) next(got string) string {
	part := r.of(got)
	if part.Len() == 0 {
		return ""
	}
	want, _ := part.Get()
	return want
}

// Len is the sum of the partitions' counts.
func (r *partitionedRef) Len() int {
	n := 0
	for _, p := range r.parts {
		n += p.Len()
	}
	return n
}

func (r *partitionedRef) ShutDown() {
	for _, p := range r.parts {
		p.ShutDown()
	}
}

// TestDelays checks AddAfter and AddRateLimited against a fake clock that
// every handle shares: an item is handed out when its ready time comes and
// not before, the earlier of two ready times wins, and the backoff doubles
// from Base up to Max with failure counts that every handle sees.
func TestDelays(t *testing.T) {
	s := redistest.Start(t, redistest.Options{})
	client := s.Client()
	clk := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
	q := newTestQueue(t, client, Options[string]{
		Clock:     clk,
		RateLimit: &RateLimit{Base: 10 * time.Millisecond, Max: 40 * time.Millisecond},
	})
	other := newHandle(t, client, queueNameOf(q), Options[string]{Clock: clk, RateLimit: &RateLimit{Base: 10 * time.Millisecond, Max: 40 * time.Millisecond}})

	q.AddAfter("late", time.Minute)
	q.AddAfter("late", 10*time.Second) // earlier wins
	q.AddAfter("late", 20*time.Second) // later loses
	assert.Equal(t, 0, q.Len())
	assertNothingReady(t, q)
	clk.Step(10*time.Second - time.Millisecond)
	assertNothingReady(t, q)
	clk.Step(time.Millisecond)
	assert.Equal(t, "late", getNow(t, other))
	other.Done("late")

	// The backoff: 10, 20, 40, 40 ms, counted across handles.
	for i, want := range []time.Duration{10, 20, 40, 40} {
		h := []*Queue[string]{q, other}[i%2]
		h.AddRateLimited("retry")
		assert.Equal(t, i+1, q.NumRequeues("retry"))
		clk.Step(want*time.Millisecond - time.Millisecond)
		assertNothingReady(t, h)
		clk.Step(time.Millisecond)
		assert.Equal(t, "retry", getNow(t, h))
		h.Done("retry")
	}
	other.Forget("retry")
	assert.Equal(t, 0, q.NumRequeues("retry"))
}

// TestBucket checks the shared token bucket: Burst items pass at once,
// then one per 1/QPS, whichever handle asks.
func TestBucket(t *testing.T) {
	s := redistest.Start(t, redistest.Options{})
	client := s.Client()
	clk := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
	limit := &RateLimit{QPS: 10, Burst: 2}
	q := newTestQueue(t, client, Options[string]{Clock: clk, RateLimit: limit})
	other := newHandle(t, client, queueNameOf(q), Options[string]{Clock: clk, RateLimit: limit})
	q.AddRateLimited("a")
	other.AddRateLimited("b")
	q.AddRateLimited("c")     // waits 100ms
	other.AddRateLimited("d") // waits 200ms
	assert.Equal(t, 2, q.Len())
	clk.Step(100 * time.Millisecond)
	for _, want := range []string{"a", "b", "c"} {
		assert.Equal(t, want, getNow(t, q))
	}
	assertNothingReady(t, q)
	clk.Step(100 * time.Millisecond)
	assert.Equal(t, "d", getNow(t, q))
	for _, item := range []string{"a", "b", "c", "d"} {
		q.Done(item)
	}
}

// TestLeases checks crash recovery and fencing with fake clocks: a lease
// that is not extended expires and its item is handed out again, at the
// front; a Done from the old holder is then refused and changes nothing;
// a lease that is extended does not expire. The dead handle's clock stands
// still, so its lease keeper never runs, as in a process that died.
func TestLeases(t *testing.T) {
	s := redistest.Start(t, redistest.Options{})
	client := s.Client()
	start := time.Unix(1_000_000, 0)
	deadClock, clk := clocktesting.NewFakeClock(start), clocktesting.NewFakeClock(start)
	dead := newTestQueue(t, client, Options[string]{Clock: deadClock, LeaseDuration: 3 * time.Second})
	name := queueNameOf(dead)
	live := newHandle(t, client, name, Options[string]{Clock: clk, LeaseDuration: 3 * time.Second})

	dead.Add("a")
	dead.Add("b")
	assert.Equal(t, "a", getNow(t, dead))
	clk.Step(3 * time.Second)
	// a's lease expired: it comes back before b.
	assert.Equal(t, "a", getNow(t, live))
	assert.ErrorIs(t, dead.DoneContext(context.Background(), "a"), ErrLeaseLost)
	assert.Equal(t, 1, live.Len(), "the refused Done changed nothing")
	live.Add("a") // marked: live holds it
	require.NoError(t, live.DoneContext(context.Background(), "a"))
	assert.Equal(t, []string{"b", "a"}, []string{getNow(t, live), getNow(t, live)})

	// live extends its leases every second of its clock: stepping one
	// second at a time and waiting for each extension, a and b stay held
	// well past 3s.
	leases := live.parts[0].keys.all[3]
	for range 6 {
		clk.Step(time.Second)
		want := float64(clk.Now().Add(3 * time.Second).UnixMilli())
		require.Eventually(t, func() bool {
			return client.ZScore(context.Background(), leases, "a").Val() == want &&
				client.ZScore(context.Background(), leases, "b").Val() == want
		}, 5*time.Second, time.Millisecond)
	}
	assertNothingReady(t, live)
	require.NoError(t, live.DoneContext(context.Background(), "a"))
	require.NoError(t, live.DoneContext(context.Background(), "b"))
	assert.ErrorIs(t, live.DoneContext(context.Background(), "b"), ErrNotHeld)
}

// assertNothingReady checks that a Get finds nothing to hand out.
func assertNothingReady(t *testing.T, q *Queue[string]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	item, err := q.GetContext(ctx)
	require.ErrorIs(t, err, context.DeadlineExceeded, "got %q", item)
}

func queueNameOf(q *Queue[string]) string {
	return q.name
}

// depthGauge is a MetricsProvider whose depth gauge keeps the last value
// set; its other metrics are off.
type depthGauge struct {
	mu    sync.Mutex
	value float64
}

func (g *depthGauge) Set(v float64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.value = v
}
func (g *depthGauge) Inc() {}
func (g *depthGauge) Dec() {}

func (g *depthGauge) get() float64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.value
}

func (g *depthGauge) NewDepthMetric(string) workqueue.GaugeMetric            { return g }
func (g *depthGauge) NewAddsMetric(string) workqueue.CounterMetric           { return nil }
func (g *depthGauge) NewLatencyMetric(string) workqueue.HistogramMetric      { return nil }
func (g *depthGauge) NewWorkDurationMetric(string) workqueue.HistogramMetric { return nil }
func (g *depthGauge) NewRetriesMetric(string) workqueue.CounterMetric        { return nil }
func (g *depthGauge) NewUnfinishedWorkSecondsMetric(string) workqueue.SettableGaugeMetric {
	return nil
}
func (g *depthGauge) NewLongestRunningProcessorSecondsMetric(string) workqueue.SettableGaugeMetric {
	return nil
}

// TestLenCountsDueKeys: an item whose After or rate-limit delay has
// ended is queued and ready, and Len and the depth gauge (refreshed by
// the busy worker's lease extension) count it at once, while every
// worker is busy and no Get looks, whichever handle asks, on plain,
// sorted and partitioned queues.
func TestLenCountsDueKeys(t *testing.T) {
	s := redistest.Start(t, redistest.Options{})
	client := s.Client()
	const due = 5
	tests := []struct {
		name  string
		opts  Options[string]
		delay func(q *Queue[string], key string)
		other bool // Len asked through another handle than the adds'
	}{
		{name: "AddAfter", delay: func(q *Queue[string], key string) { q.AddAfter(key, time.Second) }},
		{name: "AddAfter, another handle", other: true, delay: func(q *Queue[string], key string) { q.AddAfter(key, time.Second) }},
		{name: "AddRateLimited", opts: Options[string]{RateLimit: &RateLimit{Base: time.Second, Max: time.Minute}},
			delay: func(q *Queue[string], key string) { q.AddRateLimited(key) }},
		{name: "AddWithOpts After, priority", other: true,
			delay: func(q *Queue[string], key string) {
				prio := 3
				q.AddWithOpts(workqueue.AddOpts{After: time.Second, Priority: &prio}, key)
			}},
		{name: "Fairness", opts: Options[string]{Fairness: []func(string) string{func(string) string { return "f" }}},
			delay: func(q *Queue[string], key string) { q.AddAfter(key, time.Second) }},
		{name: "partitioned", opts: Options[string]{Partitions: 3}, other: true,
			delay: func(q *Queue[string], key string) { q.AddAfter(key, time.Second) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
			gauges := []*depthGauge{{}, {}}
			opts := tt.opts
			opts.Clock, opts.LeaseDuration = clk, time.Hour
			opts.MetricsProvider = gauges[0]
			q := newTestQueue(t, client, opts)
			opts.MetricsProvider = gauges[1]
			other := newHandle(t, client, queueNameOf(q), opts)
			looker, lookerGauge := q, gauges[0]
			if tt.other {
				looker, lookerGauge = other, gauges[1]
			}
			q.Add("busy")
			require.Equal(t, "busy", getNow(t, q)) // every worker busy
			for i := range due {
				tt.delay(q, fmt.Sprint("k", i))
			}
			require.Equal(t, 0, looker.Len(), "Len before the delay ended")
			clk.Step(time.Second)
			// The extension of the busy worker's lease reports the depth
			// of its item's partition: the due keys there.
			q.extendLeases().Wait()
			inPartition := 0
			for i := range due {
				if q.part(fmt.Sprint("k", i)) == q.part("busy") {
					inPartition++
				}
			}
			assert.Equal(t, float64(inPartition), gauges[0].get(), "depth gauge after a lease extension")
			assert.Equal(t, due, looker.Len(), "Len once the delay ended")
			assert.Equal(t, float64(due), lookerGauge.get(), "depth gauge after that Len")
			q.Done("busy")
		})
	}
}

// TestDepthCountsDueKeysPastABatch: when more keys fall due at once than
// one call moves (256), the depth a call reports counts the due keys it
// left too, so that the gauge reads every due key at the first report
// after the delay ends, while every worker is busy: from the busy
// worker's lease extension, and on a queue of one partition from an add
// and a Get through another handle, each of which leaves due keys too.
func TestDepthCountsDueKeysPastABatch(t *testing.T) {
	s := redistest.Start(t, redistest.Options{})
	client := s.Client()
	tests := []struct {
		name string
		due  int
		opts Options[string]
	}{
		{name: "plain", due: 900},
		{name: "Fairness", due: 900, opts: Options[string]{Fairness: []func(string) string{func(string) string { return "f" }}}},
		{name: "priority", due: 900},
		{name: "partitioned", due: 1000, opts: Options[string]{Partitions: 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
			gauges := []*depthGauge{{}, {}}
			opts := tt.opts
			opts.Clock, opts.LeaseDuration = clk, time.Hour
			opts.MetricsProvider = gauges[0]
			q := newTestQueue(t, client, opts)
			opts.MetricsProvider = gauges[1]
			other := newHandle(t, client, queueNameOf(q), opts)
			q.Add("busy")
			require.Equal(t, "busy", getNow(t, q)) // every worker busy
			prio := 2
			for i := range tt.due {
				if tt.name == "priority" {
					q.AddWithOpts(workqueue.AddOpts{After: time.Second, Priority: &prio}, fmt.Sprint("k", i))
				} else {
					q.AddAfter(fmt.Sprint("k", i), time.Second)
				}
			}
			clk.Step(time.Second)
			q.extendLeases().Wait()
			inPartition := 0
			for i := range tt.due {
				if q.part(fmt.Sprint("k", i)) == q.part("busy") {
					inPartition++
				}
			}
			require.Greater(t, inPartition, 256, "due keys in the busy key's partition")
			assert.Equal(t, float64(inPartition), gauges[0].get(), "depth gauge after a lease extension")
			if tt.opts.Partitions <= 1 {
				other.Add("extra")
				assert.Equal(t, float64(tt.due+1), gauges[1].get(), "depth gauge after an add")
				item := getNow(t, other)
				assert.Equal(t, float64(tt.due), gauges[1].get(), "depth gauge after a Get")
				other.Done(item)
			}
			assert.Equal(t, tt.due, other.Len(), "Len")
			q.Done("busy")
		})
	}
}

// TestDepthCountsLeftDueKeysOnce: while more due keys wait than one call
// moves, the depth counts each of them once, one whose add will find it
// being processed too, as Options.MetricsProvider says; Len, which moves
// them all, counts only those it queues.
func TestDepthCountsLeftDueKeysOnce(t *testing.T) {
	s := redistest.Start(t, redistest.Options{})
	clk := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
	gauge := &depthGauge{}
	q := newTestQueue(t, s.Client(), Options[string]{Clock: clk, LeaseDuration: time.Hour, MetricsProvider: gauge})
	q.Add("zbusy")
	require.Equal(t, "zbusy", getNow(t, q))
	const due = 300
	q.AddAfter("zbusy", time.Second) // last among ready times alike: left by the batch
	for i := range due {
		q.AddAfter(fmt.Sprint("k", i), time.Second)
	}
	clk.Step(time.Second)
	q.extendLeases().Wait()
	assert.Equal(t, float64(due+1), gauge.get(), "depth gauge with due keys left, the busy key among them")
	assert.Equal(t, due, q.Len(), "Len")
	assert.Equal(t, float64(due), gauge.get(), "depth gauge after Len")
	q.Done("zbusy")
	assert.Equal(t, due+1, q.Len(), "Len once the busy key is done and queued again")
}
