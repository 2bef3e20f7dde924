package workqueue

import (
	"bytes"
	"log/slog"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-workqueue/workqueue/internal/metricstest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// recordingProvider keeps every metric it makes, for tests to read.
type recordingProvider = metricstest.Recorder

func TestQueueMetrics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		provider := &recordingProvider{}
		q := NewTypedRateLimitingQueueWithConfig(NewTypedItemExponentialFailureRateLimiter[string](time.Second, time.Minute),
			TypedRateLimitingQueueConfig[string]{Name: "test", MetricsProvider: provider})
		defer q.ShutDown()
		value := func(kind string) float64 { return provider.Value("test", kind) }

		q.Add("a")
		q.Add("b")
		q.Add("a") // collapsed: not counted
		assert.Equal(t, 2.0, value("adds"))
		assert.Equal(t, 2.0, value("depth"))

		time.Sleep(300 * time.Millisecond)
		item, _ := q.Get() // a, queued for 300 ms
		assert.Equal(t, "a", item)
		assert.Equal(t, 1.0, value("depth"))
		assert.Equal(t, []float64{0.3}, provider.Observations("test", "latency"))

		q.Add("a") // added while processing: counted, handed out after Done
		assert.Equal(t, 3.0, value("adds"))
		assert.Equal(t, 2.0, value("depth"))

		time.Sleep(200 * time.Millisecond) // the refresh at 500 ms sees a running for 200 ms
		synctest.Wait()
		assert.InDelta(t, 0.2, value("unfinished"), 1e-9)
		assert.InDelta(t, 0.2, value("longest"), 1e-9)

		q.Get() // b, queued for 500 ms
		time.Sleep(500 * time.Millisecond)
		synctest.Wait() // refresh at 1 s: a for 700 ms, b for 500 ms
		assert.InDelta(t, 1.2, value("unfinished"), 1e-9)
		assert.InDelta(t, 0.7, value("longest"), 1e-9)

		q.Done("a")
		q.Done("b")
		assert.Equal(t, []float64{0.7, 0.5}, provider.Observations("test", "work"))
		assert.Equal(t, 1.0, value("depth"))

		q.AddRateLimited("c")
		q.AddAfter("d", 0)
		assert.Equal(t, 2.0, value("retries"))
		time.Sleep(500 * time.Millisecond)
		synctest.Wait()
		assert.Zero(t, value("unfinished"))
		assert.Zero(t, value("longest"))
	})
}

func TestNoMetricsWithoutNameOrProvider(t *testing.T) {
	tests := []struct {
		name       string
		queueName  string
		provider   *recordingProvider
		goroutines int
	}{
		{"no name", "", &recordingProvider{}, 0},
		{"no provider", "q", nil, 0},
		{"name and provider", "q", &recordingProvider{}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var provider MetricsProvider
			if tt.provider != nil {
				provider = tt.provider
			}
			const loop = "workqueue.(*queueMetrics["
			before := goroutinesIn(loop)
			q := NewTypedWithConfig(TypedQueueConfig[string]{Name: tt.queueName, MetricsProvider: provider})
			assert.Equal(t, tt.goroutines, goroutinesIn(loop)-before, "goroutines started")
			assert.Equal(t, tt.goroutines == 0, q.core.metrics == nil)
			q.Add("a")
			q.ShutDown()
			if tt.provider != nil && tt.goroutines == 0 {
				assert.Zero(t, tt.provider.Created(), "metrics created for a queue that records none")
			}
		})
	}
}

// nilProvider returns nil for every metric, which must disable that metric
// without a crash.
type nilProvider struct{}

func (nilProvider) NewDepthMetric(string) GaugeMetric                                  { return nil }
func (nilProvider) NewAddsMetric(string) CounterMetric                                 { return nil }
func (nilProvider) NewLatencyMetric(string) HistogramMetric                            { return nil }
func (nilProvider) NewWorkDurationMetric(string) HistogramMetric                       { return nil }
func (nilProvider) NewUnfinishedWorkSecondsMetric(string) SettableGaugeMetric          { return nil }
func (nilProvider) NewLongestRunningProcessorSecondsMetric(string) SettableGaugeMetric { return nil }
func (nilProvider) NewRetriesMetric(string) CounterMetric                              { return nil }

func TestProviderReturningNilMetrics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := NewTypedRateLimitingQueueWithConfig(DefaultTypedItemBasedRateLimiter[string](),
			TypedRateLimitingQueueConfig[string]{Name: "q", MetricsProvider: nilProvider{}})
		q.AddRateLimited("a")
		time.Sleep(time.Second)
		item, _ := q.Get()
		require.Equal(t, "a", item)
		q.Done(item)
		q.ShutDown()
	})
}

func TestDelayedItemsGaugeFollowsTheHeap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		provider := &recordingProvider{}
		q := NewTypedDelayingQueueWithConfig(TypedDelayingQueueConfig[string]{Name: "d", MetricsProvider: provider})
		delayed := func() float64 { return provider.Value("d", "delayed") }

		q.AddAfter("a", 2*time.Second)
		q.AddAfter("b", time.Second)
		assert.Equal(t, 2.0, delayed())
		q.AddAfter("a", time.Second) // moved earlier: still one item
		q.AddAfter("b", time.Hour)   // later: ignored
		q.AddAfter("c", 0)           // not delayed
		assert.Equal(t, 2.0, delayed())

		time.Sleep(time.Second)
		synctest.Wait()
		assert.Zero(t, delayed())
		assert.Equal(t, 3, q.Len())

		q.AddAfter("d", time.Minute)
		q.AddAfter("e", time.Minute)
		assert.Equal(t, 2.0, delayed())
		q.ShutDown()
		assert.Zero(t, delayed(), "items dropped at shutdown still counted")
		q.AddAfter("f", time.Minute)
		assert.Zero(t, delayed(), "an AddAfter after shutdown was counted")
		assert.Equal(t, 7.0, provider.Value("d", "retries"), "every AddAfter before shutdown counts")
	})
}

func TestUnfinishedWorkUpdatePeriodFromProvider(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		provider := &recordingProvider{Period: 2 * time.Second}
		q := NewTypedWithConfig(TypedQueueConfig[string]{Name: "p", MetricsProvider: provider})
		defer q.ShutDown()
		q.Add("a")
		q.Get()
		time.Sleep(1999 * time.Millisecond)
		synctest.Wait()
		assert.Zero(t, provider.Value("p", "unfinished"), "refreshed before the period")
		time.Sleep(time.Millisecond)
		synctest.Wait()
		assert.Equal(t, 2.0, provider.Value("p", "unfinished"))
	})
}

// addObserver is a queue that, on every Add, records how many items the
// delaying queue's gauge still counts as delayed.
type addObserver struct {
	TypedInterface[string]
	delayed      func() float64
	delayedAtAdd []float64
}

func (q *addObserver) Add(item string) {
	q.delayedAtAdd = append(q.delayedAtAdd, q.delayed())
	q.TypedInterface.Add(item)
}

// TestDelayedItemsGaugeCoversTheHandOver checks that an item whose delay has
// passed stays in the delayed gauge until it is in the queue, so that a
// reader of the gauges never finds it in neither.
func TestDelayedItemsGaugeCoversTheHandOver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		provider := &recordingProvider{}
		delayed := func() float64 { return provider.Value("d", "delayed") }
		inner := &addObserver{TypedInterface: NewTyped[string](), delayed: delayed}
		q := NewTypedDelayingQueueWithConfig(TypedDelayingQueueConfig[string]{Name: "d", MetricsProvider: provider, Queue: inner})
		defer q.ShutDown()

		q.AddAfter("a", time.Second)
		q.AddAfter("b", time.Second)
		q.AddAfter("c", time.Hour)
		time.Sleep(time.Second)
		synctest.Wait()
		assert.Equal(t, []float64{3, 3}, inner.delayedAtAdd, "delayed gauge when each ready item reached the queue")
		assert.Equal(t, 1.0, delayed(), "after the hand-over only c waits")
		assert.Equal(t, 2, q.Len())
	})
}

// TestNamedQueueWithoutProviderWarnsOnce checks the warning that tells a
// program switched from client-go why its named queues record no metrics:
// once for each name of a queue made without a provider.
func TestNamedQueueWithoutProviderWarnsOnce(t *testing.T) {
	warnedNoProvider.Clear()
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	configs := []TypedQueueConfig[string]{
		{Logger: logger}, // no name: nothing to warn of
		{Name: "with", MetricsProvider: &recordingProvider{}, Logger: logger}, // a provider
		{Name: "pods", Logger: logger},                                        // warns
		{Name: "nodes", Logger: logger},                                       // warns
		{Name: "pods", Logger: logger},                                        // warned already
	}
	for _, config := range configs {
		NewTypedWithConfig(config).ShutDown()
	}
	require.Equal(t, 2, strings.Count(logs.String(), "\n"), "lines logged: %s", logs.String())
	assert.Contains(t, logs.String(), `level=WARN msg="workqueue: a named queue without a MetricsProvider records no metrics;`)
	assert.Contains(t, logs.String(), "workqueue.SetProvider(prometheus.NewProvider(registry))")
	assert.Contains(t, logs.String(), "queue=pods")
	assert.Contains(t, logs.String(), "queue=nodes")
}

type addShutter interface {
	Add(item string)
	ShutDown()
}

// TestSetProvider checks that SetProvider's provider reaches the queues of
// every kind made after it without one, and not
// those made before it or with their own.
func TestSetProvider(t *testing.T) {
	defer SetProvider(nil)
	before := NewTypedWithConfig(TypedQueueConfig[string]{Name: "before", Logger: slog.New(slog.DiscardHandler)})
	defer before.ShutDown()
	global := &recordingProvider{}
	SetProvider(global)
	own := &recordingProvider{}
	queues := []struct {
		name string
		make func() addShutter
	}{
		{"typed", func() addShutter {
			return NewTypedWithConfig(TypedQueueConfig[string]{Name: "typed"})
		}},
		{"delaying", func() addShutter {
			return NewTypedDelayingQueueWithConfig(TypedDelayingQueueConfig[string]{Name: "delaying"})
		}},
		{"rate-limiting", func() addShutter {
			return NewTypedRateLimitingQueueWithConfig(DefaultTypedControllerRateLimiter[string](),
				TypedRateLimitingQueueConfig[string]{Name: "rate-limiting"})
		}},
		{"priority", func() addShutter {
			return NewTypedPriorityQueue(DefaultTypedControllerRateLimiter[string](), TypedPriorityQueueConfig[string]{Name: "priority"})
		}},
		{"own", func() addShutter {
			return NewTypedWithConfig(TypedQueueConfig[string]{Name: "own", MetricsProvider: own})
		}},
	}
	for _, q := range queues {
		queue := q.make()
		queue.Add("a")
		queue.Add("b")
		provider, name := queue.(metricsSource).MetricsConfig()
		if q.name == "own" {
			assert.Equal(t, 2.0, own.Value("own", "depth"))
			assert.Same(t, own, provider)
		} else {
			assert.Equal(t, 2.0, global.Value(q.name, "depth"), "depth of %s", q.name)
			assert.Equal(t, MetricsProvider(global), provider, "%s's provider", q.name)
		}
		assert.Equal(t, q.name, name)
		queue.ShutDown()
	}
	provider, _ := before.MetricsConfig()
	assert.Nil(t, provider, "a queue made before SetProvider")
	SetProvider(nil)
	after := NewTypedWithConfig(TypedQueueConfig[string]{Name: "after", Logger: slog.New(slog.DiscardHandler)})
	defer after.ShutDown()
	provider, _ = after.MetricsConfig()
	assert.Nil(t, provider, "after SetProvider(nil)")
}

// AddAfter(item, d <= 0) racing a shutdown counts a retry only if its add
// was accepted.
func TestRetriesCountOnlyAcceptedAdds(t *testing.T) {
	bad := 0
	rounds := racyRounds() * 3
	for range rounds {
		p := &recordingProvider{}
		q := NewTypedDelayingQueueWithConfig(TypedDelayingQueueConfig[string]{Name: "q", MetricsProvider: p})
		var wg sync.WaitGroup
		start := make(chan struct{})
		wg.Go(func() {
			<-start
			for i := 0; !q.ShuttingDown() || i < 50; i++ {
				q.AddAfter(strconv.Itoa(i), 0)
			}
		})
		close(start)
		runtime.Gosched()
		q.ShutDown()
		wg.Wait()
		if d := p.Value("q", "retries") - p.Value("q", "adds"); d != 0 {
			if bad < 3 {
				t.Logf("retries - adds = %v", d)
			}
			bad++
		}
	}
	t.Logf("%d of %d rounds counted a retry for a dropped AddAfter(x, 0)", bad, rounds)
	assert.Zero(t, bad)
}

// refreshSignal is a recordingProvider whose unfinished-work gauge reports
// each Set, so that a test can wait for the refresh goroutine to run.
type refreshSignal struct {
	recordingProvider
	set chan struct{}
}

func (p *refreshSignal) NewUnfinishedWorkSecondsMetric(string) SettableGaugeMetric {
	return signalGauge(p.set)
}

type signalGauge chan struct{}

func (g signalGauge) Set(float64) {
	select {
	case g <- struct{}{}:
	default:
	}
}

// TestConstructorStartsGoroutinesLast pins down a data race at
// construction: a queue's goroutines (the metrics refresh, the delays)
// must start only after the constructor has stored everything they read.
// With a refresh period of a millisecond on the real clock, a refresh that
// starts early races with the constructor, and the race detector sees it
// once the test waits for the first refresh.
func TestConstructorStartsGoroutinesLast(t *testing.T) {
	tests := []struct {
		name string
		make func(MetricsProvider) interface{ ShutDown() }
	}{
		{"Typed", func(p MetricsProvider) interface{ ShutDown() } {
			return NewTypedWithConfig(TypedQueueConfig[string]{Name: "q", MetricsProvider: p})
		}},
		{"delaying", func(p MetricsProvider) interface{ ShutDown() } {
			return NewTypedDelayingQueueWithConfig(TypedDelayingQueueConfig[string]{Name: "q", MetricsProvider: p})
		}},
		{"rate-limiting", func(p MetricsProvider) interface{ ShutDown() } {
			return NewTypedRateLimitingQueueWithConfig(DefaultTypedControllerRateLimiter[string](),
				TypedRateLimitingQueueConfig[string]{Name: "q", MetricsProvider: p})
		}},
		{"priority", func(p MetricsProvider) interface{ ShutDown() } {
			return NewTypedPriorityQueue(DefaultTypedControllerRateLimiter[string](),
				TypedPriorityQueueConfig[string]{Name: "q", MetricsProvider: p})
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for range 20 {
				p := &refreshSignal{recordingProvider: recordingProvider{Period: time.Millisecond}, set: make(chan struct{}, 1)}
				q := tt.make(p)
				select {
				case <-p.set:
				case <-time.After(10 * time.Second):
					require.Fail(t, "the unfinished-work gauge was never refreshed")
				}
				q.ShutDown()
			}
		})
	}
}
