package workqueue

import (
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// parkingUnderTest is what the parking tests call on every queue that
// parks.
type parkingUnderTest interface {
	Add(item string)
	Get() (string, bool)
	Done(item string)
	Len() int
	Park(item string, events ...string)
	Wake(event string) int
	WakeFunc(event string, accept func(string) bool) int
	WakeItem(item string) bool
	Remove(item string) bool
	Snapshot(n int) Snapshot[string]
	ShutDown()
	ShutDownWithDrain()
}

const testMaxPark = time.Minute

var discardLogger = slog.New(slog.DiscardHandler)

// parkingQueues are the queues of the package that park, each with the
// backoff a park gets on it: none without a rate limiter, and 1 s from a
// park backoff that always gives 1 s with one.
var parkingQueues = []struct {
	name    string
	backoff time.Duration
	make    func() parkingUnderTest
}{
	{"Typed", 0, func() parkingUnderTest {
		return NewTypedWithConfig(TypedQueueConfig[string]{MaxParkTime: testMaxPark, Logger: discardLogger})
	}},
	{"delaying", 0, func() parkingUnderTest {
		return NewTypedDelayingQueueWithConfig(TypedDelayingQueueConfig[string]{MaxParkTime: testMaxPark, Logger: discardLogger})
	}},
	{"rate-limiting", time.Second, func() parkingUnderTest {
		config := TypedRateLimitingQueueConfig[string]{
			DelayingQueue: NewTypedDelayingQueueWithConfig(TypedDelayingQueueConfig[string]{MaxParkTime: testMaxPark, Logger: discardLogger}),
			ParkBackoff:   NewTypedItemExponentialFailureRateLimiter[string](time.Second, time.Second),
		}
		return NewTypedRateLimitingQueueWithConfig(DefaultTypedControllerRateLimiter[string](), config)
	}},
	{"priority", time.Second, func() parkingUnderTest {
		return NewTypedPriorityQueue(DefaultTypedControllerRateLimiter[string](), TypedPriorityQueueConfig[string]{
			MaxParkTime: testMaxPark, Logger: discardLogger,
			ParkBackoff: NewTypedItemExponentialFailureRateLimiter[string](time.Second, time.Second),
		})
	}},
}

// parkTest drives one queue in a synctest bubble, where time passes only
// when every goroutine waits, so that a delay ends exactly when it should.
type parkTest struct {
	t       *testing.T
	q       parkingUnderTest
	backoff time.Duration
}

// handOut gets item, which must be the next queued.
func (p parkTest) handOut(item string) {
	p.t.Helper()
	require.Positive(p.t, p.q.Len(), "nothing queued to hand out %q", item)
	got, shutdown := p.q.Get()
	require.False(p.t, shutdown)
	require.Equal(p.t, item, got)
}

// parkAndDone gets item from an add and parks it on events.
func (p parkTest) parkAndDone(item string, events ...string) {
	p.t.Helper()
	p.q.Add(item)
	p.handOut(item)
	p.q.Park(item, events...)
	p.q.Done(item)
}

// sleep lets d pass and the queue's goroutines act on it.
func (p parkTest) sleep(d time.Duration) {
	time.Sleep(d)
	synctest.Wait()
}

// queuedAfterBackoff checks that nothing is queued until the backoff has
// passed, then that want are, in that order.
func (p parkTest) queuedAfterBackoff(want ...string) {
	p.t.Helper()
	if p.backoff > 0 {
		p.sleep(p.backoff - time.Millisecond)
		require.Zero(p.t, p.q.Len(), "queued before the backoff passed")
		p.sleep(time.Millisecond)
	}
	synctest.Wait()
	require.Equal(p.t, len(want), p.q.Len())
	for _, item := range want {
		p.handOut(item)
		p.q.Done(item)
	}
}

func (p parkTest) parked() []string {
	var items []string
	for _, it := range p.q.Snapshot(100).ParkedItems {
		items = append(items, it.Item)
	}
	return items
}

func TestPark(t *testing.T) {
	cases := []struct {
		name string
		run  func(p parkTest)
	}{
		{"a wake queues the parked item after its backoff", func(p parkTest) {
			p.parkAndDone("a", "e")
			assert.Zero(p.t, p.q.Len())
			s := p.q.Snapshot(10)
			require.Equal(p.t, 1, s.Parked)
			assert.Equal(p.t, []string{"e"}, s.ParkedItems[0].Events)
			assert.Equal(p.t, time.Now(), s.ParkedItems[0].Since)
			assert.Equal(p.t, 1, p.q.Wake("e"))
			assert.Zero(p.t, p.q.Snapshot(0).Parked)
			p.queuedAfterBackoff("a")
		}},
		{"a wake between Park and Done ends the park at Done", func(p parkTest) {
			p.q.Add("a")
			p.handOut("a")
			p.q.Park("a", "e")
			assert.Equal(p.t, 1, p.q.Wake("e"))
			p.q.Done("a")
			assert.Zero(p.t, p.q.Snapshot(0).Parked)
			p.queuedAfterBackoff("a")
		}},
		{"a wake between Get and Park is not lost", func(p parkTest) {
			p.q.Add("a")
			p.handOut("a")
			assert.Zero(p.t, p.q.Wake("e"))
			p.q.Park("a", "f", "e")
			p.q.Done("a")
			assert.Zero(p.t, p.q.Snapshot(0).Parked)
			p.queuedAfterBackoff("a")
		}},
		{"a wake before the Get is waited for", func(p parkTest) {
			p.q.Wake("e")
			p.parkAndDone("a", "e")
			p.sleep(2 * p.backoff)
			assert.Zero(p.t, p.q.Len())
			assert.Equal(p.t, []string{"a"}, p.parked())
		}},
		{"another event leaves the item parked", func(p parkTest) {
			p.parkAndDone("a", "e")
			assert.Zero(p.t, p.q.Wake("f"))
			p.sleep(2 * p.backoff)
			assert.Equal(p.t, []string{"a"}, p.parked())
		}},
		{"any of the events wakes the item, once", func(p parkTest) {
			p.parkAndDone("a", "e", "f", "e")
			assert.Equal(p.t, []string{"e", "f"}, p.q.Snapshot(1).ParkedItems[0].Events)
			assert.Equal(p.t, 1, p.q.Wake("f"))
			assert.Zero(p.t, p.q.Wake("e"))
			p.queuedAfterBackoff("a")
		}},
		{"WakeFunc wakes the items it accepts", func(p parkTest) {
			p.parkAndDone("a", "e")
			p.parkAndDone("b", "e")
			var offered []string
			assert.Equal(p.t, 1, p.q.WakeFunc("e", func(item string) bool {
				offered = append(offered, item)
				return item == "b"
			}))
			assert.Equal(p.t, []string{"a", "b"}, offered, "offered in the order parked")
			p.queuedAfterBackoff("b")
			assert.Equal(p.t, []string{"a"}, p.parked())
		}},
		{"a wake queues in the order the items were parked", func(p parkTest) {
			for _, item := range []string{"c", "a", "b"} {
				p.parkAndDone(item, "e")
			}
			assert.Equal(p.t, []string{"c", "a", "b"}, p.parked(), "longest parked first")
			assert.Equal(p.t, 3, p.q.Wake("e"))
			p.queuedAfterBackoff("c", "a", "b")
		}},
		{"WakeItem queues the item at once", func(p parkTest) {
			p.parkAndDone("a", "e")
			assert.True(p.t, p.q.WakeItem("a"))
			assert.False(p.t, p.q.WakeItem("a"))
			assert.False(p.t, p.q.WakeItem("b"))
			p.handOut("a")
		}},
		{"an add queues a parked item at once", func(p parkTest) {
			p.parkAndDone("a", "e")
			p.q.Add("a")
			assert.Zero(p.t, p.q.Snapshot(0).Parked)
			p.handOut("a")
			p.q.Done("a")
			assert.Zero(p.t, p.q.Wake("e"))
			p.sleep(2 * p.backoff)
			assert.Zero(p.t, p.q.Len(), "the woken park must not queue it again")
		}},
		{"an add since the Get wins over the park", func(p parkTest) {
			p.q.Add("a")
			p.handOut("a")
			p.q.Add("a")
			p.q.Park("a", "e")
			p.q.Done("a")
			assert.Zero(p.t, p.q.Snapshot(0).Parked)
			p.handOut("a")
		}},
		{"an add after Park, before Done, wins over the park", func(p parkTest) {
			p.q.Add("a")
			p.handOut("a")
			p.q.Park("a", "e")
			p.q.Add("a")
			p.q.Done("a")
			assert.Zero(p.t, p.q.Snapshot(0).Parked)
			p.handOut("a")
		}},
		{"a second Park replaces the first", func(p parkTest) {
			p.q.Add("a")
			p.handOut("a")
			p.q.Park("a", "e")
			p.q.Park("a", "f")
			p.q.Done("a")
			assert.Zero(p.t, p.q.Wake("e"))
			assert.Equal(p.t, 1, p.q.Wake("f"))
		}},
		{"Park of an item not being processed does nothing", func(p parkTest) {
			p.q.Park("a", "e")
			p.q.Add("a")
			p.q.Park("a", "e")
			assert.Equal(p.t, 1, p.q.Len())
			assert.Zero(p.t, p.q.Snapshot(0).Parked)
		}},
		{"the park ends after MaxParkTime without an event", func(p parkTest) {
			p.parkAndDone("a", "e")
			p.sleep(30 * time.Second)
			p.parkAndDone("b")
			p.sleep(testMaxPark - 30*time.Second - time.Millisecond)
			assert.Zero(p.t, p.q.Len())
			p.sleep(time.Millisecond)
			assert.Equal(p.t, 1, p.q.Len(), "the backoff ended long before")
			assert.Equal(p.t, []string{"b"}, p.parked())
			p.handOut("a")
			p.sleep(30 * time.Second)
			p.handOut("b")
		}},
		{"a burst of parks ends after MaxParkTime, batch by batch", func(p parkTest) {
			const burst = 2*waitingBatch + 10
			for i := range burst {
				p.parkAndDone(fmt.Sprint("item", i))
			}
			p.sleep(testMaxPark)
			assert.Equal(p.t, burst, p.q.Len())
			assert.Zero(p.t, p.q.Snapshot(0).Parked)
		}},
		{"Remove takes a parked item back", func(p parkTest) {
			p.parkAndDone("a", "e")
			assert.True(p.t, p.q.Remove("a"))
			assert.False(p.t, p.q.Remove("a"))
			assert.Zero(p.t, p.q.Wake("e"))
			p.sleep(testMaxPark)
			assert.Zero(p.t, p.q.Len())
			assert.Equal(p.t, Snapshot[string]{Taken: time.Now(), Adds: 1}, p.q.Snapshot(10))
		}},
		{"Remove takes back a park not yet in effect", func(p parkTest) {
			p.q.Add("a")
			p.handOut("a")
			p.q.Park("a", "e")
			assert.True(p.t, p.q.Remove("a"))
			p.q.Done("a")
			assert.Zero(p.t, p.q.Wake("e"))
			assert.Equal(p.t, Snapshot[string]{Taken: time.Now(), Adds: 1}, p.q.Snapshot(10))
		}},
		{"Remove takes back an item woken and waiting for its backoff", func(p parkTest) {
			p.parkAndDone("a", "e")
			p.q.Wake("e")
			p.q.Remove("a")
			p.sleep(2 * p.backoff)
			assert.Zero(p.t, p.q.Len())
		}},
		{"a shutdown drops the parked items", func(p parkTest) {
			p.parkAndDone("a", "e")
			p.q.Add("b")
			p.handOut("b")
			p.q.Park("b", "e")
			p.q.ShutDown()
			p.q.Done("b")
			assert.Zero(p.t, p.q.Wake("e"))
			s := p.q.Snapshot(10)
			assert.Zero(p.t, s.Parked)
			assert.Zero(p.t, s.Processing)
			_, shutdown := p.q.Get()
			assert.True(p.t, shutdown)
		}},
		{"a drain does not wait for parked items", func(p parkTest) {
			p.parkAndDone("a", "e")
			p.q.ShutDownWithDrain()
			assert.Zero(p.t, p.q.Snapshot(0).Parked)
		}},
		{"Park after the shutdown began does nothing", func(p parkTest) {
			p.q.Add("a")
			p.handOut("a")
			drained := make(chan struct{})
			go func() {
				p.q.ShutDownWithDrain()
				close(drained)
			}()
			synctest.Wait()
			p.q.Park("a", "e")
			p.q.Done("a")
			<-drained
			assert.Zero(p.t, p.q.Snapshot(0).Parked)
		}},
	}
	for _, kind := range parkingQueues {
		for _, c := range cases {
			t.Run(kind.name+"/"+c.name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					q := kind.make()
					defer q.ShutDown()
					c.run(parkTest{t: t, q: q, backoff: kind.backoff})
					requireSound(t, q)
				})
			})
		}
	}
}

// requireSound checks the invariants of q's core, if it has one.
func requireSound(t *testing.T, q any) {
	t.Helper()
	switch q := q.(type) {
	case *Typed[string]:
		require.NoError(t, verifyQueue(q))
	case *TypedPriorityQueue[string]:
		require.NoError(t, verifyPriorityQueue(q))
	case *TypedDelayingQueue[string]:
		requireSound(t, q.queue)
	case *TypedRateLimitingQueue[string]:
		requireSound(t, q.delaying)
	}
}

// TestParkIsNotAFailure checks that parks stay out of the rate limiter on
// the queues that have one: NumRequeues never counts them, a stray Park of
// an item the caller does not hold records nothing, and the backoff after
// each wake doubles from 5 ms up to 10 s by default, until Forget resets it.
func TestParkIsNotAFailure(t *testing.T) {
	queues := map[string]func() rateLimitingQueue[string]{
		"rate-limiting": func() rateLimitingQueue[string] {
			return NewTypedRateLimitingQueue(DefaultTypedControllerRateLimiter[string]())
		},
		"priority": func() rateLimitingQueue[string] {
			return NewTypedPriorityQueue(DefaultTypedControllerRateLimiter[string](), TypedPriorityQueueConfig[string]{})
		},
	}
	// parkAndWake parks a, wakes it and returns how long it waited.
	parkAndWake := func(t *testing.T, q rateLimitingQueue[string]) time.Duration {
		q.Add("a")
		got, _ := q.Get()
		q.Park(got, "e")
		q.Done(got)
		require.Equal(t, 1, q.Wake("e"))
		start := time.Now()
		got, _ = q.Get()
		q.Done(got)
		return time.Since(start)
	}
	for name, make := range queues {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				q := make()
				defer q.ShutDown()
				q.Park("a", "e") // not held: does nothing
				q.Park("a", "e")
				assert.Zero(t, q.NumRequeues("a"))
				want := 5 * time.Millisecond
				for i := range 14 {
					assert.Equal(t, want, parkAndWake(t, q), "wait after park %d", i+1)
					want = min(2*want, 10*time.Second)
				}
				assert.Zero(t, q.NumRequeues("a"), "parks counted as failures")
				q.Forget("a")
				assert.Equal(t, 5*time.Millisecond, parkAndWake(t, q), "wait after Forget")
				q.Remove("a")
				assert.Equal(t, 5*time.Millisecond, parkAndWake(t, q), "wait after Remove")
			})
		})
	}
}

// TestParkKeepsThePriority checks that a woken item is handed out at the
// priority it was handed out at, ahead of lower ones.
func TestParkKeepsThePriority(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := NewTypedPriorityQueue(DefaultTypedControllerRateLimiter[string](), TypedPriorityQueueConfig[string]{
			ParkBackoff: NewTypedItemExponentialFailureRateLimiter[string](0, 0),
		})
		defer q.ShutDown()
		high := 5
		q.AddWithOpts(AddOpts{Priority: &high}, "a")
		item, _ := q.Get()
		q.Park(item, "e")
		q.Done(item)
		q.Add("b")
		q.Wake("e")
		item, priority, _ := q.GetWithPriority()
		assert.Equal(t, "a", item)
		assert.Equal(t, 5, priority)
	})
}

// TestParkWakeRace runs a wake against the park of an item handed out
// before it, in every interleaving the scheduler finds: whatever the
// order of Wake against Park and Done, the item must come back.
func TestParkWakeRace(t *testing.T) {
	for _, kind := range parkingQueues {
		t.Run(kind.name, func(t *testing.T) {
			q := kind.make()
			defer q.ShutDown()
			for round := range 2000 {
				q.Add("a")
				item, _ := q.Get()
				var wg sync.WaitGroup
				wg.Add(1)
				go func() {
					defer wg.Done()
					q.Wake("e")
				}()
				q.Park(item, "e")
				q.Done(item)
				wg.Wait()
				// The wake came after the Get: the item is queued, or
				// waits for its backoff, but is not parked.
				s := q.Snapshot(0)
				require.Zero(t, s.Parked, "round %d: the wake was lost", round)
				require.Equal(t, 1, s.Depth+s.Waiting, "round %d", round)
				require.True(t, q.Remove("a"))
				requireSound(t, q)
			}
		})
	}
}

func TestMaxParkTimeMustNotBeNegative(t *testing.T) {
	for name, make := range map[string]func(){
		"NewTypedWithConfig": func() { NewTypedWithConfig(TypedQueueConfig[string]{MaxParkTime: -1}) },
		"NewTypedDelayingQueueWithConfig": func() {
			NewTypedDelayingQueueWithConfig(TypedDelayingQueueConfig[string]{MaxParkTime: -1})
		},
		"NewTypedRateLimitingQueueWithConfig": func() {
			NewTypedRateLimitingQueueWithConfig(DefaultTypedControllerRateLimiter[string](), TypedRateLimitingQueueConfig[string]{MaxParkTime: -1})
		},
		"NewTypedPriorityQueue": func() {
			NewTypedPriorityQueue(DefaultTypedControllerRateLimiter[string](), TypedPriorityQueueConfig[string]{MaxParkTime: -1})
		},
	} {
		t.Run(name, func(t *testing.T) {
			assert.PanicsWithValue(t, "workqueue: "+name+": MaxParkTime must not be negative, got -1ns", make)
		})
	}
}

// TestParkingVersusPolling compares, on the bubble's exact clock, parking
// with the polling it replaces: 200 items each wait for an event of their
// own at a random time in the first 10 s, and a worker reconciles them.
// Parked, an item is reconciled twice (once to park it, once when its event
// wakes it) and handed out at the instant of its event. Polled with
// AddAfter every period, it is reconciled at 0, period, 2 period, ...
// until its event has happened. Each figure is checked item by item, and
// the means are logged for the README.
func TestParkingVersusPolling(t *testing.T) {
	const items = 200
	for _, period := range []time.Duration{0, 100 * time.Millisecond, time.Second} {
		name := "park"
		if period > 0 {
			name = "poll every " + period.String()
		}
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rng := rand.New(rand.NewPCG(1, 2))
				start := time.Now()
				eventAt := map[string]time.Duration{}
				for i := range items {
					eventAt[fmt.Sprint("item", i)] = time.Duration(rng.Int64N(int64(10 * time.Second)))
				}
				q := NewTypedRateLimitingQueue(NewTypedItemExponentialFailureRateLimiter[string](0, 0))
				var mu sync.Mutex
				happened := map[string]bool{}
				reconciles := map[string]int{}
				latency := map[string]time.Duration{}
				go func() {
					for {
						item, shutdown := q.Get()
						if shutdown {
							return
						}
						mu.Lock()
						reconciles[item]++
						ready := happened[item]
						mu.Unlock()
						switch {
						case ready:
							latency[item] = time.Since(start) - eventAt[item]
						case period == 0:
							q.Park(item, item)
						default:
							q.AddAfter(item, period)
						}
						q.Done(item)
					}
				}()
				for item := range eventAt {
					q.Add(item)
				}
				for item, at := range eventAt {
					go func() {
						time.Sleep(at)
						mu.Lock()
						happened[item] = true
						mu.Unlock()
						q.Wake(item) // does nothing for a polled item
					}()
				}
				time.Sleep(11 * time.Second)
				synctest.Wait()
				q.ShutDown()

				var totalReconciles int
				var totalLatency time.Duration
				for item, at := range eventAt {
					wantReconciles, wantLatency := 2, time.Duration(0)
					if period > 0 {
						polls := (at + period - 1) / period // reconciles after the first
						wantReconciles, wantLatency = 1+int(polls), polls*period-at
					}
					require.Equal(t, wantReconciles, reconciles[item], item)
					require.Equal(t, wantLatency, latency[item], item)
					totalReconciles += reconciles[item]
					totalLatency += latency[item]
				}
				t.Logf("%s: %.1f reconciles per item, %.1f of them wasted; mean latency from event to hand-out %v",
					name, float64(totalReconciles)/items, float64(totalReconciles)/items-2, totalLatency/items)
			})
		})
	}
}

// A Push that panics while a parked item is queued again (by an Add, a
// Wake or WakeItem) has not happened: the item stays parked, and a later
// attempt queues it.
func TestStoragePushPanicEndingAPark(t *testing.T) {
	for name, end := range map[string]func(q *Typed[string]){
		"Add":      func(q *Typed[string]) { q.Add("x") },
		"Wake":     func(q *Typed[string]) { q.Wake("e") },
		"WakeItem": func(q *Typed[string]) { q.WakeItem("x") },
	} {
		t.Run(name, func(t *testing.T) {
			storage := &panickyStorage{}
			q := NewTypedWithConfig(TypedQueueConfig[string]{Queue: storage, Logger: discardLogger})
			defer q.ShutDown()
			q.Add("x")
			item, _ := q.Get()
			q.Park(item, "e")
			q.Done(item)
			storage.fail = true
			assert.Panics(t, func() { end(q) })
			storage.fail = false
			require.NoError(t, verifyQueue(q))
			assert.Equal(t, 1, q.Snapshot(0).Parked, "x is still parked")
			end(q)
			assert.Equal(t, 1, q.Len(), "x queued by the attempt that succeeded")
			require.NoError(t, verifyQueue(q))
		})
	}
}
