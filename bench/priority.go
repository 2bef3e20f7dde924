package bench

import (
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The priority cases run the implementations that have priorities: our
// TypedPriorityQueue and controller-runtime's priority queue, which is
// their reference (client-go's queue has no priorities).
const priorityReference = "controller-runtime"

// mixedPriorities are the priorities of the adds of priority/mixed, in
// turn: controller-runtime's handlers add the objects of an informer's
// initial list at -100 (LowPriority) and real changes at 0; 10 stands for
// a caller that raises urgent work.
var mixedPriorities = [...]int{-100, 0, 0, 10}

// Raises per key in priority/raise, and the keys it raises.
const (
	raiseSteps = 4
	raiseKeys  = 1000
)

// lightTenants is how many light tenants fairness/heavy-light adds one key
// each for, behind the heavy tenant's backlog.
const lightTenants = 100

// priorityCases returns the cases that need priorities, and the cycle with
// fairness on for the implementations that have fairness.
func priorityCases(quick bool) []Case {
	priority := func(impl Impl) bool { return impl.NewPriority != nil }
	fairness := func(impl Impl) bool { return impl.NewPriority != nil && impl.Fairness }
	heavy := 10_000
	if quick {
		heavy = 1_000
	}
	return []Case{
		{
			Name: "priority/mixed", Applies: priority, Run: mixed, Reference: priorityReference,
			Op: "one key added at priority -100, 0 or 10 by one of 4 producers and processed by one of 8 workers",
		},
		{
			Name: "priority/raise", Applies: priority, Run: raise, Reference: priorityReference,
			Op: "1000 keys added at priority 0, each raised to 1, 2, 3 and 4 while queued, then got and done",
		},
		{
			Name: "fairness/heavy-light", Applies: priority, Run: heavyLight(heavy, lightTenants), Reference: priorityReference,
			Op: "one tenant's backlog of " + strconv.Itoa(heavy) + " keys, then one key of each of " + strconv.Itoa(lightTenants) +
				" light tenants, all got and done by one worker; fairness on where the queue has it",
		},
		{
			Name: "fairness/cycle", Applies: fairness, Run: cycle(Config{Fairness: tenantOf}),
			Op: "cycle with fairness by namespace on (compare with the cycle of the same queue)",
		},
	}
}

// tenantOf is the fairness key of a key: its namespace, the part before
// the slash.
func tenantOf(key string) string {
	tenant, _, _ := strings.Cut(key, "/")
	return tenant
}

// mixed is the parallel case with producers adding at mixed priorities.
func mixed(b *testing.B, impl Impl) {
	q := impl.NewPriority(Config{})
	produce(b, q, ControllerProducers, ControllerWorkers, false, func(i int, key string) {
		q.AddWithPriority(mixedPriorities[i%len(mixedPriorities)], key)
	})
}

// raise queues raiseKeys keys at priority 0 and raises each raiseSteps
// times, one step at a time, in a scattered order, then gets them all. The
// settle key, added last at the lowest priority, comes out last: for
// controller-runtime, whose adds are filed by another goroutine, it is
// handed out once every add before it is filed and what they queued is
// handed out. controller-runtime may hand out a key before its raises are
// filed, and then again after them: gets/key counts the gets per key.
func raise(b *testing.B, impl Impl) {
	keys := Keys(raiseKeys)
	q := impl.NewPriority(Config{})
	defer q.ShutDown()
	b.ReportAllocs()
	gets, rounds := 0, 0
	for b.Loop() {
		for _, key := range keys {
			q.AddWithPriority(0, key)
		}
		for step := 1; step <= raiseSteps; step++ {
			for j := range keys {
				// 7919 is prime, so this visits every key once.
				q.AddWithPriority(step, keys[(j*7919+step)%len(keys)])
			}
		}
		q.AddWithPriority(-1, settleKey)
		for {
			key, _, _ := q.GetWithPriority()
			q.Done(key)
			if key == settleKey {
				break
			}
			gets++
		}
		rounds++
	}
	b.ReportMetric(float64(gets)/float64(rounds*len(keys)), "gets/key")
}

// heavyLight adds a backlog of heavy keys of one tenant, then one key of
// each of light tenants, and gets and finishes them in one goroutine: the
// order is fixed, so the waits are exact. It reports how many items were
// handed out before each light tenant's key (all keys are queued before
// the first Get), the largest and the median. With fairness, a light key
// waits for at most one item of each other tenant: light items.
func heavyLight(heavy, light int) func(b *testing.B, impl Impl) {
	return func(b *testing.B, impl Impl) {
		keys := make([]string, 0, heavy+light)
		for i := range heavy {
			keys = append(keys, "heavy/object-"+strconv.Itoa(i))
		}
		for i := range light {
			keys = append(keys, "light-"+strconv.Itoa(i)+"/object-0")
		}
		var cfg Config
		if impl.Fairness {
			cfg.Fairness = tenantOf
		}
		q := impl.NewPriority(cfg)
		defer q.ShutDown()
		waits := make([]int, 0, light)
		b.ReportAllocs()
		for b.Loop() {
			for _, key := range keys {
				q.Add(key)
			}
			waits = waits[:0]
			for handed := range keys {
				key, _ := q.Get()
				if !strings.HasPrefix(key, "heavy/") {
					waits = append(waits, handed)
				}
				q.Done(key)
			}
		}
		slices.Sort(waits)
		if len(waits) != light {
			b.Fatalf("%d light keys handed out, want %d", len(waits), light)
		}
		b.ReportMetric(float64(waits[len(waits)-1]), "light-wait-max-items")
		b.ReportMetric(float64(waits[(len(waits)-1)/2]+waits[len(waits)/2])/2, "light-wait-median-items")
	}
}
