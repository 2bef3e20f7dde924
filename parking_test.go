package workqueue

import (
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-workqueue/workqueue/internal/list"
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

// parkSpec is the sequential specification of parking, written once: the
// model walks (through parkingModel, which adds the clock) and the
// linearizability histories (through queueSpec) both apply it. It is a
// value, so that porcupine can keep its states and compare them with ==,
// over keys 0 to parkKeys-1.
//
// The rules: a Park ends at once if one of its events woke since the key's
// Get; otherwise it waits for a wake of one of its events and takes effect
// (settles) at the key's Done. A wake ends the parks waiting for it in the
// order of their Park calls; an add, a Remove, a WakeItem or a shutdown
// ends a park too, and after a shutdown nothing parks or wakes. What an
// ended park's key becomes (queued, or added again at its Done) is the
// owner's to say, as is which keys may park at all (processing, neither
// added again nor woken since their Get, no shutdown).
type parkSpec struct {
	order   [parkKeys]int8 // the keys with a park, in the order of their Park calls
	parks   int8           // the length of order
	settled [parkKeys]int8 // the keys whose park took effect, in the order of their Done
	inForce int8           // the length of settled
	held    uint16         // bit per key: handed out and not yet done
	events  [parkKeys]uint8
	fired   [parkKeys]uint8 // the events woken since each held key's Get
	down    bool
}

// parkKeys is the number of keys a parkSpec holds: the model walks' items.
const parkKeys = modelItems

// endedPark is a park that has ended: settled says it had taken effect
// (its item's Done came); on the walks' clock, its item is ready once
// until has passed.
type endedPark struct {
	item    int
	settled bool
	until   time.Duration
}

// handOut notes that Get handed key out: no event has woken since.
func (p *parkSpec) handOut(key int) {
	p.held |= 1 << key
	p.fired[key] = 0
}

// has reports whether key has a park, settled or to settle at its Done.
func (p *parkSpec) has(key int) bool { return slices.Contains(p.order[:p.parks], int8(key)) }

// park applies Park(key, events), for a key the owner found may park: a
// park asked for before is replaced. It reports whether the park ended at
// once, as it does if one of events woke since key's Get.
func (p *parkSpec) park(key int, events uint8) (endedAtOnce bool) {
	p.drop(key)
	if p.fired[key]&events != 0 {
		return true
	}
	p.order[p.parks] = int8(key)
	p.parks++
	p.events[key] = events
	return false
}

// done notes that key's processing ended: its park, if it has one, takes
// effect, and done reports whether one did.
func (p *parkSpec) done(key int) (settled bool) {
	p.held &^= 1 << key
	p.fired[key] = 0
	if !p.has(key) || slices.Contains(p.settled[:p.inForce], int8(key)) {
		return false
	}
	p.settled[p.inForce] = int8(key)
	p.inForce++
	return true
}

// wake applies Wake of the events in bits: it ends the parks waiting for
// them and returns them in the order of their Park calls.
func (p *parkSpec) wake(bits uint8) []endedPark {
	if p.down {
		return nil
	}
	for key := range parkKeys {
		if p.held&(1<<key) != 0 {
			p.fired[key] |= bits
		}
	}
	var ended []endedPark
	for _, key := range slices.Clone(p.order[:p.parks]) {
		if p.events[key]&bits != 0 {
			_, settled := p.drop(int(key))
			ended = append(ended, endedPark{item: int(key), settled: settled})
		}
	}
	return ended
}

// wakeItem applies WakeItem(key): it ends key's park, if it has one, and
// reports whether it did and whether that park had taken effect.
func (p *parkSpec) wakeItem(key int) (woken, settled bool) { return p.drop(key) }

// drop ends key's park without waking it, as an add or a Remove does, and
// reports whether it had one and whether that one had taken effect.
func (p *parkSpec) drop(key int) (had, settled bool) {
	i := slices.Index(p.order[:p.parks], int8(key))
	if i < 0 {
		return false, false
	}
	p.parks = remove8(&p.order, p.parks, i)
	if j := slices.Index(p.settled[:p.inForce], int8(key)); j >= 0 {
		p.inForce = remove8(&p.settled, p.inForce, j)
		settled = true
	}
	p.events[key] = 0
	return true, settled
}

// remove8 takes the element at i out of the first n of a and returns the
// new length, leaving the rest of a zero.
func remove8(a *[parkKeys]int8, n int8, i int) int8 {
	copy(a[i:], a[i+1:n])
	n--
	a[n] = 0
	return n
}

// shutDown drops every park; from here on nothing parks or wakes.
func (p *parkSpec) shutDown() {
	for p.parks > 0 {
		p.drop(int(p.order[0]))
	}
	p.down = true
}

// settledOrder returns the keys of the parks in effect, oldest first.
func (p *parkSpec) settledOrder() []int {
	keys := make([]int, 0, p.inForce)
	for _, key := range p.settled[:p.inForce] {
		keys = append(keys, int(key))
	}
	return keys
}

// masks returns a bit per key: parked since its Done, and parked by its
// worker, to take effect at Done.
func (p *parkSpec) masks() (parked, parking uint16) {
	for _, key := range p.order[:p.parks] {
		parking |= 1 << key
	}
	for _, key := range p.settled[:p.inForce] {
		parked |= 1 << key
	}
	return parked, parking &^ parked
}

// parkingModel puts the parks of a model's specification (a parkSpec it
// points to) on the model walks' clock: each park takes a backoff from the
// walks' park limiter (counts holds the parks since each item's last
// Forget or Remove), and a settled park ends by itself maxPark after its
// Done, oldest settled first. An ended park's item is ready once its
// backoff has passed. The methods that end parks hand them to the owner's
// release.
type parkingModel struct {
	*parkSpec
	maxPark      time.Duration
	counts       map[int]int
	backoffUntil map[int]time.Duration // of each park
	since        map[int]time.Duration // when each settled park took effect
}

func newParkingModel(parks *parkSpec, maxPark time.Duration) parkingModel {
	return parkingModel{parkSpec: parks, maxPark: maxPark, counts: map[int]int{}, backoffUntil: map[int]time.Duration{}, since: map[int]time.Duration{}}
}

// park applies Park(item, events) at now to an item the owner found may
// park, and returns the park backoff it took; a park that ends at once
// goes to release.
func (p *parkingModel) park(now time.Duration, item int, events uint8, release func(...endedPark)) time.Duration {
	backoff := modelBackoff(p.counts, item)
	if p.parkSpec.park(item, events) {
		release(endedPark{item: item, until: now + backoff})
	}
	p.backoffUntil[item] = now + backoff
	return backoff
}

// tookEffect notes that item's park took effect at now, at its Done.
func (p *parkingModel) tookEffect(now time.Duration, item int) { p.since[item] = now }

// wake applies Wake of the events in bit, hands the parks it ended to
// release in the order of their Park calls, and returns how many it ended.
func (p *parkingModel) wake(bit uint8, release func(...endedPark)) int {
	woken := p.parkSpec.wake(bit)
	for i := range woken {
		woken[i].until = p.backoffUntil[woken[i].item]
	}
	release(woken...)
	return len(woken)
}

// wakeItem applies WakeItem(item) at now: it ends item's park, if it has
// one, with no backoff left, hands it to release, and reports whether it
// did.
func (p *parkingModel) wakeItem(now time.Duration, item int, release func(...endedPark)) bool {
	woken, settled := p.parkSpec.wakeItem(item)
	if woken {
		release(endedPark{item: item, settled: settled, until: now})
	}
	return woken
}

// nextExpiry returns the first instant at which a settled park has lasted
// maxPark.
func (p *parkingModel) nextExpiry() (time.Duration, bool) {
	next, ok := time.Duration(0), false
	for _, item := range p.settledOrder() {
		if t := p.since[item] + p.maxPark; !ok || t < next {
			next, ok = t, true
		}
	}
	return next, ok
}

// expire ends the parks that have lasted maxPark at t, oldest settled
// first.
func (p *parkingModel) expire(t time.Duration) []endedPark {
	var expired []endedPark
	for _, item := range p.settledOrder() {
		if p.since[item]+p.maxPark == t {
			p.parkSpec.drop(item)
			expired = append(expired, endedPark{item: item, settled: true, until: p.backoffUntil[item]})
		}
	}
	return expired
}

// forget resets item's park backoff, as Forget and Remove do.
func (p *parkingModel) forget(item int) { delete(p.counts, item) }

// parked returns the number of parks in effect.
func (p *parkingModel) parked() int { return int(p.inForce) }

// parkingRef is a reference model that parks: queueModel or pqModel.
type parkingRef interface {
	// park applies a worker's Park(item, events), and reports whether it
	// took effect and then the park backoff it took.
	park(item int, events uint8) (backoff time.Duration, parked bool)
}

// modelParkOp applies a worker's Park(item, events) to q and to the model
// m, and describes how the park backoff q took differs from m's, or "". A
// park consults the queue's ParkBackoff (parkLimiter), never its rate
// limiter.
func modelParkOp(q parkingUnderTest, limiter, parkLimiter *recordingLimiter, m parkingRef, item int, events uint8) string {
	limiter.last, parkLimiter.last = -1, -1
	q.Park(modelKeys[item], linEvents(events)...)
	if limiter.last != -1 {
		return "Park consulted the rate limiter"
	}
	want, parked := m.park(item, events)
	if !parked {
		want = -1
	}
	if parkLimiter.last != want {
		return fmt.Sprintf("park backoff = %v, model %v", parkLimiter.last, want)
	}
	return ""
}

// clone returns a copy of p that can be changed without changing p, for
// the parks of parks, a copy of p's.
func (p *parkingModel) clone(parks *parkSpec) parkingModel {
	c := *p
	c.parkSpec = parks
	c.counts, c.backoffUntil, c.since = maps.Clone(p.counts), maps.Clone(p.backoffUntil), maps.Clone(p.since)
	return c
}

// verifyParking checks a core's parking against the ids of the records
// that say they are parked: it holds exactly those, each under each of its
// events and no other (an event's set may be empty); the parks that took effect are exactly those of
// items no longer processed, listed oldest first; and no item is parked
// without the delays whose goroutine ends parks.
func verifyParking[T comparable](c *core[T], parked map[int32]bool) error {
	p := c.parking
	if p == nil {
		if len(parked) > 0 {
			return fmt.Errorf("%d records parked, no parking", len(parked))
		}
		return nil
	}
	if len(p.byID) != len(parked) {
		return fmt.Errorf("%d records parked, the parking holds %d", len(parked), len(p.byID))
	}
	if len(parked) > 0 && c.delays == nil {
		return fmt.Errorf("%d items parked without the delays' goroutine", len(parked))
	}
	listed := 0
	for id, r := range p.byID {
		if !parked[id] || r.id != id {
			return fmt.Errorf("the parking holds id %d, whose record is not parked", id)
		}
		if r.settledIn == c.items.At(id).Val.processing {
			return fmt.Errorf("item %v: processing %v, park in effect %v", c.items.At(id).Item, c.items.At(id).Val.processing, r.settledIn)
		}
		for _, e := range r.events {
			if p.byEvent[e][id] != r {
				return fmt.Errorf("item %v is not filed under its event %q", c.items.At(id).Item, e)
			}
		}
		listed += len(r.events)
	}
	for _, set := range p.byEvent {
		listed -= len(set)
	}
	if listed != 0 {
		return fmt.Errorf("the events file %d more items than the parks name", -listed)
	}
	settled, err := list.VerifyPtrs(&p.settled)
	if err != nil {
		return fmt.Errorf("parks in effect: %w", err)
	}
	for i, r := range settled {
		if !r.settledIn || p.byID[r.id] != r {
			return fmt.Errorf("the parks in effect list item %v, which is not parked", c.items.At(r.id).Item)
		}
		if i > 0 && settled[i-1].since > r.since {
			return fmt.Errorf("the parks in effect are not oldest first")
		}
	}
	inEffect := 0
	for _, r := range p.byID {
		if r.settledIn {
			inEffect++
		}
	}
	if inEffect != len(settled) {
		return fmt.Errorf("%d parks in effect, %d listed", inEffect, len(settled))
	}
	return nil
}
