package redisqueue

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/go-workqueue/workqueue"
	wqprometheus "github.com/go-workqueue/workqueue/prometheus"
	"github.com/go-workqueue/workqueue/redis/redistest"
)

// TestWakeups checks that adds reach Gets that wait in other handles
// through the signal list, not the heartbeat (set to an hour here): six
// Gets waiting in three handles all get one of six keys added by a fourth;
// on a queue of 3 partitions too, where each partition's listener wakes
// the Gets for its keys.
func TestWakeups(t *testing.T) {
	for _, partitions := range []int{1, 3} {
		t.Run(fmt.Sprint("partitions=", partitions), func(t *testing.T) { testWakeups(t, partitions) })
	}
}

func testWakeups(t *testing.T, partitions int) {
	s := redistest.Start(t, redistest.Options{})
	client := s.Client()
	opts := Options[string]{Heartbeat: time.Hour, Partitions: partitions}
	producer := newTestQueue(t, client, opts)
	name := queueNameOf(producer)
	var wg sync.WaitGroup
	got := make(chan string, 6)
	for range 3 {
		q := newHandle(t, client, name, opts)
		for range 2 {
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				item, err := q.GetContext(ctx)
				if assert.NoError(t, err) {
					got <- item
					q.Done(item)
				}
			})
		}
	}
	// Let the Gets start waiting before the adds, so that the wakeups are
	// what delivers the keys; a Get that has not started yet would find
	// its key anyway.
	waitBlockedPops(t, client, 3*partitions)
	// Six keys, as many in each partition.
	var keys []string
	perPartition := map[int]int{}
	for i := 0; len(keys) < 6; i++ {
		key := strconv.Itoa(i)
		if p := partitionOf(key, partitions); perPartition[p] < 6/partitions {
			perPartition[p]++
			keys = append(keys, key)
		}
	}
	for _, key := range keys {
		producer.Add(key)
	}
	wg.Wait()
	close(got)
	var items []string
	for item := range got {
		items = append(items, item)
	}
	assert.ElementsMatch(t, keys, items)
}

// TestIdleHandleIsQuiet bounds the commands an idle handle sends: with a
// Get waiting and a 1s heartbeat, about two per heartbeat and partition (a
// BLPOP and the Get's look at that partition for expired leases). A
// handle that polled in a loop would send thousands, and one whose Get
// looked at every partition at each partition's heartbeat 2P+P².
func TestIdleHandleIsQuiet(t *testing.T) {
	for _, partitions := range []int{1, 3} {
		t.Run(fmt.Sprint("partitions=", partitions), func(t *testing.T) { testIdleHandleIsQuiet(t, partitions) })
	}
}

func testIdleHandleIsQuiet(t *testing.T, partitions int) {
	s := redistest.Start(t, redistest.Options{})
	client := s.Client()
	var sent atomic.Int64
	client.AddHook(countingHook{&sent})
	q := newTestQueue(t, client, Options[string]{Heartbeat: time.Second, Partitions: partitions})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, err := q.GetContext(ctx)
		assert.ErrorIs(t, err, context.Canceled)
	}()
	start := time.Now()
	// Time passing is what is measured here, so a sleep is the point.
	time.Sleep(3 * time.Second)
	cancel()
	<-done
	heartbeats := time.Since(start).Seconds()
	t.Logf("an idle handle sent %d commands in %.1f heartbeats", sent.Load(), heartbeats)
	// The first call also loads the library (FCALL, INFO, FUNCTION LOAD,
	// FCALL again) and the first Get looks
	// at every partition, the handle looks once at the queue's number of
	// partitions (the same two), and each partition's heartbeat may end
	// just as the measurement does.
	p := float64(partitions)
	assert.LessOrEqual(t, float64(sent.Load()), 2*p*heartbeats+2*p+4)
}

// countingHook counts the commands a client sends, a pipeline as one,
// leaving out the handshake of new connections.
type countingHook struct{ n *atomic.Int64 }

func (h countingHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h countingHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if name := cmd.Name(); name != "hello" && name != "client" { // a new connection's handshake
			h.n.Add(1)
		}
		return next(ctx, cmd)
	}
}

func (h countingHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmds)
	}
}

// TestShutDown checks the handle's shutdown: a waiting Get returns at
// once, later adds are ignored, queued items stay for other handles, and
// ShutDownWithDrain waits for the Done of the items the handle holds.
func TestShutDown(t *testing.T) {
	s := redistest.Start(t, redistest.Options{})
	client := s.Client()
	q := New(client, "shutdown", Options[string]{Heartbeat: time.Hour})
	other := newHandle(t, client, "shutdown", Options[string]{})

	q.Add("held")
	require.Equal(t, "held", getNow(t, q))
	waiting := make(chan error)
	go func() {
		_, err := q.GetContext(context.Background())
		waiting <- err
	}()
	require.Eventually(t, func() bool {
		q.mu.Lock()
		defer q.mu.Unlock()
		return q.waiting == 1
	}, time.Second, time.Millisecond)

	drained := make(chan struct{})
	go func() {
		q.ShutDownWithDrain()
		close(drained)
	}()
	select {
	case err := <-waiting:
		assert.ErrorIs(t, err, workqueue.ErrShutDown)
	case <-time.After(10 * time.Second):
		t.Fatal("a waiting Get did not return at ShutDown")
	}
	assert.ErrorIs(t, q.AddContext(context.Background(), "late"), workqueue.ErrShutDown)
	q.Add("late")
	other.Add("queued")
	_, shutdown := q.Get()
	assert.True(t, shutdown, "Get after ShutDown")
	assert.Equal(t, 1, other.Len(), "only the other handle's add was taken")
	select {
	case <-drained:
		t.Fatal("ShutDownWithDrain returned while an item was held")
	default:
	}
	q.Done("held")
	select {
	case <-drained:
	case <-time.After(10 * time.Second):
		t.Fatal("ShutDownWithDrain did not return after the held item was done")
	}
	assert.Equal(t, "queued", getNow(t, other))
	other.Done("queued")
}

// TestBadInput checks what New does with bad configuration (panics that
// start with "workqueue:") and what the methods do with keys of any bytes
// and oversize keys.
func TestBadInput(t *testing.T) {
	s := redistest.Start(t, redistest.Options{})
	client := s.Client()
	panics := []struct {
		name string
		new  func()
	}{
		{"nil client", func() { New[string](nil, "q", Options[string]{}) }},
		{"empty name", func() { New(client, "", Options[string]{}) }},
		{"name with a brace", func() { New(client, "a{b", Options[string]{}) }},
		{"name too long", func() { New(client, strings.Repeat("n", 257), Options[string]{}) }},
		{"no codec for a struct", func() { New(client, "q", Options[struct{ A int }]{}) }},
		{"lease too short", func() { New(client, "q", Options[string]{LeaseDuration: time.Millisecond}) }},
		{"negative heartbeat", func() { New(client, "q", Options[string]{Heartbeat: -time.Second}) }},
		{"heartbeat below a second", func() { New(client, "q", Options[string]{Heartbeat: time.Millisecond}) }},
		{"negative base", func() { New(client, "q", Options[string]{RateLimit: &RateLimit{Base: -1}}) }},
		{"max below base", func() {
			New(client, "q", Options[string]{RateLimit: &RateLimit{Base: time.Second, Max: time.Millisecond}})
		}},
		{"qps without burst", func() { New(client, "q", Options[string]{RateLimit: &RateLimit{QPS: 1}}) }},
		{"negative max key", func() { New(client, "q", Options[string]{MaxKeyBytes: -1}) }},
		{"negative partitions", func() { New(client, "q", Options[string]{Partitions: -1}) }},
		{"too many partitions", func() { New(client, "q", Options[string]{Partitions: 257}) }},
	}
	for _, tt := range panics {
		t.Run(tt.name, func(t *testing.T) {
			defer func() {
				r := recover()
				require.NotNil(t, r, "no panic")
				assert.True(t, strings.HasPrefix(fmt.Sprint(r), "workqueue:"), "%v", r)
			}()
			tt.new()
		})
	}

	t.Run("keys of any bytes", func(t *testing.T) {
		q := newTestQueue(t, client, Options[string]{})
		keys := []string{"", "\x00", "\xff\xfe", "{}", "a b\nc", "ключ", strings.Repeat("k", 64<<10)}
		for _, key := range keys {
			q.Add(key)
		}
		for _, key := range keys {
			got := getNow(t, q)
			assert.Equal(t, key, got)
			q.Done(got)
		}
	})

	t.Run("oversize key", func(t *testing.T) {
		q := newTestQueue(t, client, Options[string]{MaxKeyBytes: 8})
		assert.ErrorIs(t, q.AddContext(context.Background(), "123456789"), ErrKeyTooLarge)
		q.Add("123456789") // logged and dropped
		q.AddRateLimited("123456789")
		assert.Equal(t, 0, q.Len())
		assert.Equal(t, 0, q.NumRequeues("123456789"))
	})

	t.Run("codec", func(t *testing.T) {
		type object struct{ Namespace, Name string }
		name := fmt.Sprintf("codec-%d", queueSeq.Add(1))
		q := New(client, name, Options[object]{Codec: JSONCodec[object]{}})
		defer q.ShutDownWithDrain()
		q.Add(object{"default", "web"})
		q.Add(object{"default", "web"})
		// A key this codec cannot read, from a handle with another codec, is
		// dropped with a log instead of being handed out or held for ever.
		strings := newHandle(t, client, name, Options[string]{})
		strings.Add("not json")
		q.Add(object{"kube-system", "dns"})
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		for _, want := range []object{{"default", "web"}, {"kube-system", "dns"}} {
			got, err := q.GetContext(ctx)
			require.NoError(t, err)
			assert.Equal(t, want, got)
			q.Done(got)
		}
		assert.Equal(t, 0, q.Len())
	})
}

// TestOutages checks the methods while Redis cannot be reached: the
// client-go-shaped ones wait for it to come back and then take effect, the
// context ones return the error, and a closed client ends the waits.
func TestOutages(t *testing.T) {
	t.Run("server restarted", func(t *testing.T) {
		s := redistest.Start(t, redistest.Options{})
		client := s.Client()
		q := newTestQueue(t, client, Options[string]{})
		s.Kill()
		assert.Error(t, q.AddContext(context.Background(), "a"))
		added := make(chan struct{})
		go func() {
			q.Add("a")
			close(added)
		}()
		got := make(chan string)
		go func() {
			item, _ := q.Get()
			got <- item
		}()
		s.Restart()
		<-added
		select {
		case item := <-got:
			assert.Equal(t, "a", item)
			q.Done(item)
		case <-time.After(10 * time.Second):
			t.Fatal("Get did not hand out the item added during the outage")
		}
	})

	t.Run("server restarted empty", func(t *testing.T) {
		// Without persistence a restart forgets everything, the fencing
		// counter too: the lease granted after it gets the same number as
		// the one before, and only the nonce in the token tells them apart.
		s := redistest.Start(t, redistest.Options{})
		client := s.Client()
		before := newTestQueue(t, client, Options[string]{})
		after := newHandle(t, client, queueNameOf(before), Options[string]{})
		before.Add("a")
		assert.Equal(t, "a", getNow(t, before))
		s.Kill()
		s.Restart()
		after.Add("a")
		assert.Equal(t, "a", getNow(t, after))
		assert.ErrorIs(t, before.DoneContext(context.Background(), "a"), ErrLeaseLost)
		after.Add("a") // marked: the late Done above must not have ended after's lease
		require.NoError(t, after.DoneContext(context.Background(), "a"))
		assert.Equal(t, 1, after.Len())
		assert.Equal(t, "a", getNow(t, after))
		after.Done("a")
	})

	t.Run("server paused", func(t *testing.T) {
		s := redistest.Start(t, redistest.Options{})
		client := s.Client()
		q := newTestQueue(t, client, Options[string]{})
		admin := s.Client()
		// Before the PAUSE is sent, so that the pause ends at least 300ms
		// after start however long this goroutine stalls.
		start := time.Now()
		require.NoError(t, admin.Do(context.Background(), "CLIENT", "PAUSE", "300", "WRITE").Err())
		q.Add("a") // a write: waits for the pause to end
		assert.GreaterOrEqual(t, time.Since(start), 250*time.Millisecond, "Add returned during the pause")
		assert.Equal(t, "a", getNow(t, q))
		q.Done("a")
		// A server busy in a script or DEBUG SLEEP holds every command.
		go admin.Do(context.Background(), "DEBUG", "SLEEP", "0.3")
		q.Add("b")
		assert.Equal(t, "b", getNow(t, q))
		q.Done("b")
	})

	t.Run("client closed", func(t *testing.T) {
		s := redistest.Start(t, redistest.Options{})
		client := redis.NewClient(&redis.Options{Addr: s.Addr})
		q := New(client, "closed", Options[string]{})
		require.NoError(t, client.Close())
		assert.ErrorIs(t, q.AddContext(context.Background(), "a"), redis.ErrClosed)
		q.Add("a") // logged, not retried for ever
		_, err := q.GetContext(context.Background())
		assert.ErrorIs(t, err, redis.ErrClosed)
		_, shutdown := q.Get()
		assert.True(t, shutdown, "Get ends when the client is closed")
		assert.Equal(t, 0, q.Len())
		q.ShutDownWithDrain()
	})
}

// TestMetrics checks the handle's metrics under the Kubernetes names:
// adds and retries count this handle's calls, depth is the queue-wide
// count Redis reported.
func TestMetrics(t *testing.T) {
	s := redistest.Start(t, redistest.Options{})
	client := s.Client()
	reg := prometheus.NewRegistry()
	q := newTestQueue(t, client, Options[string]{
		MetricsProvider: wqprometheus.NewProvider(reg), Name: "objects", RateLimit: &RateLimit{},
	})
	other := newHandle(t, client, queueNameOf(q), Options[string]{})
	other.Add("a")
	other.Add("b")
	q.Add("c")
	q.Add("c") // deduplicated: not an add
	q.AddRateLimited("d")
	assert.Equal(t, 2.0, metricValue(t, reg, "workqueue_adds_total"))
	item := getNow(t, q)
	assert.Equal(t, 3.0, metricValue(t, reg, "workqueue_depth"))
	q.Done(item)
	assert.Equal(t, 1.0, metricValue(t, reg, "workqueue_retries_total"))
	for range 3 {
		other.Done(getNow(t, other))
	}
}

// metricValue returns the value of the one series of the gauge or counter
// called name.
func metricValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		require.Len(t, f.GetMetric(), 1, name)
		m := f.GetMetric()[0]
		if m.GetGauge() != nil {
			return m.GetGauge().GetValue()
		}
		return m.GetCounter().GetValue()
	}
	t.Fatalf("no metric %s", name)
	return 0
}

// TestConcurrentHandles runs producers and workers in three handles on
// one queue, with few keys so that adds collide with processing, and
// checks that no key is processed by two workers at once and that every
// add is followed by a processing of its key that began after the add was
// called.
func TestConcurrentHandles(t *testing.T) {
	s := redistest.Start(t, redistest.Options{})
	client := s.Client()
	q0 := newTestQueue(t, client, Options[string]{})
	handles := []*Queue[string]{q0, newHandle(t, client, queueNameOf(q0), Options[string]{}), newHandle(t, client, queueNameOf(q0), Options[string]{})}
	const keys, adds = 20, 3000
	var clock atomic.Int64
	var lastAdd, lastStart [keys]atomic.Int64
	var busy [keys]atomic.Bool
	var processed atomic.Int64
	var workers sync.WaitGroup
	for _, q := range handles {
		for range 3 {
			workers.Go(func() {
				for {
					item, shutdown := q.Get()
					if shutdown {
						return
					}
					k, _ := strconv.Atoi(item)
					if !busy[k].CompareAndSwap(false, true) {
						t.Errorf("key %d handed to two workers at once", k)
					}
					storeMax(&lastStart[k], clock.Add(1))
					processed.Add(1)
					busy[k].Store(false)
					q.Done(item)
				}
			})
		}
	}
	var producers sync.WaitGroup
	for p, q := range handles {
		producers.Go(func() {
			for i := range adds / len(handles) {
				k := (i*7 + p) % keys
				// Numbered before the call: the guarantee is a processing
				// that begins after Add is called.
				storeMax(&lastAdd[k], clock.Add(1))
				q.Add(strconv.Itoa(k))
			}
		})
	}
	producers.Wait()
	require.Eventually(t, func() bool {
		for k := range keys {
			if lastStart[k].Load() < lastAdd[k].Load() {
				return false
			}
		}
		return true
	}, 30*time.Second, time.Millisecond, "an add was never followed by a processing of its key")
	for _, q := range handles {
		q.ShutDown()
	}
	workers.Wait()
	t.Logf("%d adds of %d keys made %d reconciles", adds, keys, processed.Load())
}

func storeMax(v *atomic.Int64, n int64) {
	for {
		old := v.Load()
		if n <= old || v.CompareAndSwap(old, n) {
			return
		}
	}
}
