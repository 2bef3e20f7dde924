package workqueue

import (
	"fmt"
	"math"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	clocktesting "k8s.io/utils/clock/testing"
)

// drainReady returns the items that are ready now, in order, marking each
// done. It must run in a synctest bubble.
func drainReady(q TypedInterface[string]) []string {
	synctest.Wait()
	var got []string
	for q.Len() > 0 {
		item, _ := q.Get()
		got = append(got, item)
		q.Done(item)
	}
	return got
}

func TestAddAfter(t *testing.T) {
	type add struct {
		item  string
		delay time.Duration
	}
	type check struct {
		at   time.Duration // since the start
		want []string      // items that became ready since the last check
	}
	tests := []struct {
		name   string
		adds   []add
		checks []check
	}{
		{"fires exactly at its delay",
			[]add{{"a", time.Second}},
			[]check{{0, nil}, {time.Second - 1, nil}, {time.Second, []string{"a"}}, {time.Hour, nil}}},
		{"zero and negative delays add at once",
			[]add{{"a", 0}, {"b", -time.Hour}, {"c", math.MinInt64}},
			[]check{{0, []string{"a", "b", "c"}}}},
		{"ordered by ready time, ties in add order",
			[]add{{"late", 3 * time.Second}, {"tie1", time.Second}, {"early", time.Millisecond}, {"tie2", time.Second}},
			[]check{{time.Millisecond, []string{"early"}}, {time.Second, []string{"tie1", "tie2"}}, {3 * time.Second, []string{"late"}}}},
		{"earlier ready time wins: moved earlier",
			[]add{{"a", 2 * time.Second}, {"a", time.Second}},
			[]check{{time.Second, []string{"a"}}, {3 * time.Second, nil}}},
		{"earlier ready time wins: later add ignored",
			[]add{{"a", time.Second}, {"a", 2 * time.Second}},
			[]check{{time.Second, []string{"a"}}, {3 * time.Second, nil}}},
		{"an immediate add leaves the waiting entry in place",
			[]add{{"a", time.Second}, {"a", 0}},
			[]check{{0, []string{"a"}}, {time.Second, []string{"a"}}}},
		{"a huge delay does not overflow",
			[]add{{"a", math.MaxInt64}, {"b", time.Second}},
			[]check{{time.Second, []string{"b"}}, {24 * time.Hour, nil}}},
		{"an earlier item added later wakes the loop without a heartbeat",
			[]add{{"slow", time.Hour}, {"fast", time.Millisecond}},
			[]check{{time.Millisecond, []string{"fast"}}, {time.Hour, []string{"slow"}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				q := NewTypedDelayingQueue[string]()
				defer q.ShutDown()
				start := time.Now()
				for _, a := range tt.adds {
					q.AddAfter(a.item, a.delay)
				}
				for _, c := range tt.checks {
					time.Sleep(c.at - time.Since(start))
					assert.Equalf(t, c.want, drainReady(q), "items ready at %v", c.at)
				}
			})
		})
	}
}

// Regression: client-go's AddAfter blocked once 1000 hand-offs to its
// waiting goroutine were pending. Here the waiting goroutine never runs
// while the adds happen, because the bubble's time does not move.
func TestAddAfterNeverBlocks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := NewTypedDelayingQueue[int]()
		defer q.ShutDown()
		const n = 20000
		for i := range n {
			q.AddAfter(i, time.Duration(n-i)*time.Millisecond)
		}
		time.Sleep(n * time.Millisecond)
		synctest.Wait()
		require.Equal(t, n, q.Len())
		for want := n - 1; want >= 0; want-- {
			got, _ := q.Get()
			require.Equal(t, want, got)
		}
	})
}

func TestDelayedItemsAreDroppedAtShutdown(t *testing.T) {
	for _, drain := range []bool{false, true} {
		t.Run(fmt.Sprintf("drain=%v", drain), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				q := NewTypedDelayingQueue[string]()
				q.AddAfter("waiting", time.Second)
				q.Add("ready")
				if drain {
					go func() {
						item, _ := q.Get()
						q.Done(item)
					}()
					q.ShutDownWithDrain()
				} else {
					q.ShutDown()
					item, _ := q.Get()
					assert.Equal(t, "ready", item)
				}
				q.AddAfter("late", 0)
				q.AddAfter("late", time.Second)
				time.Sleep(time.Minute)
				_, shutdown := q.Get()
				assert.True(t, shutdown, "an item was handed out after shutdown")
			})
		})
	}
}

func TestDelayingLoopStopsWhenUnderlyingQueueShutsDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		inner := NewTyped[string]()
		q := NewTypedDelayingQueueWithConfig(TypedDelayingQueueConfig[string]{Queue: inner})
		q.AddAfter("a", time.Second)
		inner.ShutDown()
		assert.True(t, q.ShuttingDown())
		time.Sleep(heartbeatPeriod)
		synctest.Wait()
		q.AddAfter("b", time.Second)
		time.Sleep(time.Second)
		_, shutdown := q.Get()
		assert.True(t, shutdown)
		q.ShutDown() // joins a goroutine that has already exited
	})
}

// TestAddAfterWithFakeClock checks that the configured clock decides when
// delays end, and that stepping a fake clock at any moment relative to the
// waiting goroutine delivers the item: Get blocks until it arrives.
func TestAddAfterWithFakeClock(t *testing.T) {
	for round := range 200 {
		clock := clocktesting.NewFakeClock(time.Unix(0, 0))
		q := NewTypedDelayingQueueWithConfig(TypedDelayingQueueConfig[int]{Clock: clock})
		q.AddAfter(round, time.Second)
		clock.Step(time.Second)
		got, _ := q.Get()
		require.Equal(t, round, got)
		q.ShutDown()
	}
}

// TestShutDownJoinsGoroutines checks that every layer's ShutDown and
// ShutDownWithDrain return only after the goroutines the queue started have
// exited: client-go's waiting goroutine lingered up to 10 s.
func TestShutDownJoinsGoroutines(t *testing.T) {
	provider := &recordingProvider{}
	layers := []struct {
		name string
		make func() TypedInterface[string]
	}{
		{"queue", func() TypedInterface[string] { return NewTyped[string]() }},
		{"queue with metrics", func() TypedInterface[string] {
			return NewTypedWithConfig(TypedQueueConfig[string]{Name: "q", MetricsProvider: provider})
		}},
		{"delaying", func() TypedInterface[string] { return NewTypedDelayingQueue[string]() }},
		{"delaying with metrics", func() TypedInterface[string] {
			return NewTypedDelayingQueueWithConfig(TypedDelayingQueueConfig[string]{Name: "q", MetricsProvider: provider})
		}},
		{"rate limiting", func() TypedInterface[string] {
			return NewTypedRateLimitingQueue(DefaultTypedControllerRateLimiter[string]())
		}},
		{"rate limiting with metrics", func() TypedInterface[string] {
			return NewTypedRateLimitingQueueWithConfig(DefaultTypedControllerRateLimiter[string](),
				TypedRateLimitingQueueConfig[string]{Name: "q", MetricsProvider: provider})
		}},
	}
	for _, layer := range layers {
		for _, drain := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/drain=%v", layer.name, drain), func(t *testing.T) {
				before := goleak.IgnoreCurrent()
				q := layer.make()
				if d, ok := q.(TypedDelayingInterface[string]); ok {
					d.AddAfter("waiting", time.Hour)
				}
				q.Add("a")
				item, _ := q.Get()
				q.Done(item)
				if drain {
					q.ShutDownWithDrain()
				} else {
					q.ShutDown()
				}
				// goleak retries for well under a second, far less than the
				// 10 s heartbeat a lingering goroutine would wait for.
				require.NoError(t, goleak.Find(before))
			})
		}
	}
}

// panickyGaugeProvider's delayed-items gauge panics on its first Set with a
// non-zero value.
type panickyGaugeProvider struct {
	recordingProvider
	once sync.Once
}

type panickyGauge struct{ p *panickyGaugeProvider }

func (g panickyGauge) Set(v float64) {
	if v != 0 {
		g.p.once.Do(func() { panic("gauge") })
	}
}

func (p *panickyGaugeProvider) NewDelayedItemsMetric(string) SettableGaugeMetric {
	return panickyGauge{p}
}

// A panic under the delaying queue's lock (an interface item holding a value
// that cannot be hashed, or a metric's Set) must not leave the lock held:
// every later AddAfter and ShutDown would hang.
func TestAddAfterPanicReleasesLock(t *testing.T) {
	t.Run("unhashable item", func(t *testing.T) {
		q := NewTypedDelayingQueue[any]()
		assert.Panics(t, func() { q.AddAfter([]int{1}, time.Hour) })
		assert.True(t, returnsWithin(10*time.Second, func() { q.AddAfter("y", time.Hour) }), "AddAfter hangs")
		assert.True(t, returnsWithin(10*time.Second, q.ShutDown), "ShutDown hangs")
	})
	t.Run("gauge panics", func(t *testing.T) {
		q := NewTypedDelayingQueueWithConfig(TypedDelayingQueueConfig[string]{Name: "q", MetricsProvider: &panickyGaugeProvider{}})
		assert.Panics(t, func() { q.AddAfter("x", time.Hour) })
		assert.True(t, returnsWithin(10*time.Second, q.ShutDown), "ShutDown hangs")
	})
	// For contrast: Typed.Add hashes before the lock and defers Unlock.
	t.Run("Typed.Add is fine", func(t *testing.T) {
		q := NewTyped[any]()
		assert.Panics(t, func() { q.Add([]int{1}) })
		assert.True(t, returnsWithin(10*time.Second, q.ShutDown))
	})
}

// TestAddCancelsDelay checks AddCancelsDelay against the default, client-go's
// rule, under which an item added while it waits for its delay is handed out
// now and again when the delay ends (kubernetes/kubernetes#126027).
func TestAddCancelsDelay(t *testing.T) {
	type queue interface {
		Add(string)
		AddAfter(string, time.Duration)
		Get() (string, bool)
		Done(string)
		Len() int
		ShutDown()
	}
	tests := []struct {
		name      string
		make      func(cancels bool) queue
		wait      func(q queue) // makes "a" wait for a delay of a second
		add       func(q queue)
		wantAgain int // handed out again once the delay has passed
	}{
		{"delaying, Add", func(cancels bool) queue {
			return NewTypedDelayingQueueWithConfig(TypedDelayingQueueConfig[string]{AddCancelsDelay: cancels})
		}, func(q queue) { q.AddAfter("a", time.Second) }, func(q queue) { q.Add("a") }, 1},
		{"delaying, AddAfter of no delay", func(cancels bool) queue {
			return NewTypedDelayingQueueWithConfig(TypedDelayingQueueConfig[string]{AddCancelsDelay: cancels})
		}, func(q queue) { q.AddAfter("a", time.Second) }, func(q queue) { q.AddAfter("a", 0) }, 1},
		{"rate-limiting, Add after AddRateLimited", func(cancels bool) queue {
			return NewTypedRateLimitingQueueWithConfig(NewTypedItemExponentialFailureRateLimiter[string](time.Second, time.Second),
				TypedRateLimitingQueueConfig[string]{AddCancelsDelay: cancels})
		}, func(q queue) { q.(*TypedRateLimitingQueue[string]).AddRateLimited("a") }, func(q queue) { q.Add("a") }, 1},
	}
	for _, tt := range tests {
		for _, cancels := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s, AddCancelsDelay=%v", tt.name, cancels), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					q := tt.make(cancels)
					defer q.ShutDown()
					tt.wait(q)
					tt.add(q)
					item, _ := q.Get()
					require.Equal(t, "a", item)
					q.Done(item)
					time.Sleep(time.Second)
					synctest.Wait()
					want := tt.wantAgain
					if cancels {
						want = 0
					}
					assert.Equal(t, want, q.Len(), "handed out again after the delay")
				})
			})
		}
	}
}

func TestAddCancelsDelayWithADelayingQueuePanics(t *testing.T) {
	delaying := NewTypedDelayingQueue[string]()
	defer delaying.ShutDown()
	assert.PanicsWithValue(t, "workqueue: NewTypedRateLimitingQueueWithConfig: AddCancelsDelay with a DelayingQueue; set it in the DelayingQueue's own config", func() {
		NewTypedRateLimitingQueueWithConfig(DefaultTypedControllerRateLimiter[string](),
			TypedRateLimitingQueueConfig[string]{AddCancelsDelay: true, DelayingQueue: delaying})
	})
}

// outsideQueue is a queue from outside this package, without GetContext.
type outsideQueue struct {
	TypedInterface[string]
}

// TestDebounceOfAReadyItem pins the Debounce field's doc: an add of an
// item already queued changes nothing over this package's Queue, but over
// one from outside, which cannot tell that it holds the item, it begins a
// burst that adds the item again at its end.
func TestDebounceOfAReadyItem(t *testing.T) {
	tests := []struct {
		name    string
		queue   func() TypedInterface[string]
		wantLen int // after the burst's end, the item handed out and done
	}{
		{"this package's Queue", func() TypedInterface[string] { return nil }, 0},
		{"an outside Queue", func() TypedInterface[string] { return outsideQueue{NewTyped[string]()} }, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				q := NewTypedDelayingQueueWithConfig(TypedDelayingQueueConfig[string]{Queue: tt.queue(), Debounce: Debounce{Quiet: time.Second}})
				defer q.ShutDown()
				q.Add("a")
				time.Sleep(time.Second)
				synctest.Wait()
				require.Equal(t, 1, q.Len(), "Len at the first burst's end")
				q.Add("a")
				item, _ := q.Get()
				q.Done(item)
				time.Sleep(time.Second)
				synctest.Wait()
				assert.Equal(t, tt.wantLen, q.Len(), "Len a Quiet period after the add of the queued item")
			})
		})
	}
}
