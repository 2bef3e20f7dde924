package bench

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

// Case is one measurement, run for each implementation it applies to.
type Case struct {
	Name string
	// Applies tells whether impl can run the case.
	Applies func(impl Impl) bool
	// Run measures impl; one op is described by Op.
	Run func(b *testing.B, impl Impl)
	// Op says what one op is, for the table.
	Op string
	// TimeFraction, if set, is the fraction of its target time per
	// measurement that the compare command gives the case.
	TimeFraction float64
	// Reference, if set, is the implementation the case's ratios are
	// taken against, for a case the package's Reference does not run.
	Reference string
}

// Cases returns the measurements, smaller ones when quick is set.
func Cases(quick bool) []Case {
	all := func(Impl) bool { return true }
	notCoreOnly := func(impl Impl) bool { return !impl.CoreOnly }
	delays := func(impl Impl) bool { return impl.Delays && !impl.CoreOnly }
	fakeClock := func(impl Impl) bool { return impl.FakeClock && !impl.CoreOnly }
	metrics := func(impl Impl) bool { return impl.Metrics && !impl.CoreOnly }

	cases := []Case{
		{Name: "cycle", Applies: all, Run: cycle(Config{}), Op: "Add, Get, Done of one key"},
		{Name: "batch-1000", Applies: all, Run: batch, Op: "1000 keys added, then got and done"},
	}
	goroutines := []int{1, 8, 64}
	for _, p := range goroutines {
		for _, w := range goroutines {
			if quick && p != w {
				continue
			}
			cases = append(cases, Case{
				Name: fmt.Sprintf("parallel/P=%d/W=%d", p, w), Applies: all, Run: parallel(p, w, false),
				Op: "one key added by one of P producers and processed by one of W workers",
			})
		}
	}
	for _, p := range goroutines {
		for _, w := range goroutines {
			if quick && p != w {
				continue
			}
			cases = append(cases, Case{
				Name: fmt.Sprintf("paced/P=%d/W=%d", p, w), Applies: all, Run: parallel(p, w, true),
				Op: fmt.Sprintf("one key added by one of P producers, at most %d ahead of the W workers, and processed by one of them", pacedBacklog),
			})
		}
	}
	cases = append(cases, Case{Name: "duplicates", Applies: notCoreOnly, Run: duplicates, Op: "one add of one of 100 keys while 8 workers process"})
	pendings := []int{10_000, 1_000_000}
	if quick {
		pendings = pendings[:1]
	}
	for _, pending := range pendings {
		cases = append(cases, Case{
			Name: fmt.Sprintf("addafter/pending=%d", pending), Applies: delays, Run: addAfter(pending),
			Op: "AddAfter of a new key at a random delay",
		})
	}
	cases = append(cases,
		Case{Name: "addafter-fire", Applies: fakeClock, Run: fire, Op: "one waiting key fired by a fake clock step"},
		Case{Name: "ratelimited", Applies: delays, Run: rateLimited, Op: "AddRateLimited and Forget, default controller limiter"},
		Case{Name: "cycle-metrics", Applies: metrics, Run: cycle(Config{Metrics: true}), Op: "cycle with Prometheus metrics on"},
	)
	cases = append(cases, priorityCases(quick)...)
	return append(cases, controllerCases(quick)...)
}

func newFakeClock() *clocktesting.FakeClock { return clocktesting.NewFakeClock(time.Unix(0, 0)) }

var (
	keysMu sync.Mutex
	keys   []string
)

// Keys returns n distinct keys shaped like Kubernetes object keys, built
// once and shared.
func Keys(n int) []string {
	keysMu.Lock()
	defer keysMu.Unlock()
	for len(keys) < n {
		i := len(keys)
		keys = append(keys, "namespace-"+strconv.Itoa(i%97)+"/object-"+strconv.Itoa(i))
	}
	return keys[:n]
}

func cycle(cfg Config) func(b *testing.B, impl Impl) {
	return func(b *testing.B, impl Impl) {
		keys := Keys(1024)
		q := impl.New(cfg)
		defer q.ShutDown()
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			key := keys[i&1023]
			q.Add(key)
			got, _ := q.Get()
			q.Done(got)
			i++
		}
	}
}

func batch(b *testing.B, impl Impl) {
	keys := Keys(1000)
	q := impl.New(Config{})
	defer q.ShutDown()
	b.ReportAllocs()
	for b.Loop() {
		for _, key := range keys {
			q.Add(key)
		}
		for range keys {
			got, _ := q.Get()
			q.Done(got)
		}
	}
}

// workers starts n goroutines that get and finish keys until shutdown, and
// returns how many keys they have processed and a wait for them.
func workers(q Queue, n int) (processed *atomic.Int64, wait func()) {
	processed = new(atomic.Int64)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			for {
				key, shutdown := q.Get()
				if shutdown {
					return
				}
				q.Done(key)
				processed.Add(1)
			}
		})
	}
	return processed, wg.Wait
}

// waitIdle waits until the queue is empty and its workers have processed
// want keys, or, for a queue that collapses duplicates, until it stays empty
// and no key is processed for a millisecond.
func waitIdle(q Queue, processed func() int64, want int64) {
	last := int64(-1)
	for {
		n := processed()
		if n >= want || (q.Len() == 0 && n == last) {
			return
		}
		last = n
		time.Sleep(time.Millisecond)
	}
}

func parallel(producers, workerCount int, paced bool) func(b *testing.B, impl Impl) {
	return func(b *testing.B, impl Impl) {
		q := impl.New(Config{})
		produce(b, q, producers, workerCount, paced, func(_ int, key string) { q.Add(key) })
	}
}

// pacedBacklog bounds how far the producers of a paced case run ahead of
// the workers, in adds: informers deliver events about as fast as a
// controller handles them, not a million ahead.
const pacedBacklog = 1024

// produce runs the b.N adds of a parallel case on q: producers goroutines
// call add with the add's index and key, while workerCount workers process
// the keys, until they have processed them all; then it shuts q down. With
// paced, a producer yields instead of adding while its add would be more
// than pacedBacklog ahead of the items processed.
func produce(b *testing.B, q Queue, producers, workerCount int, paced bool, add func(i int, key string)) {
	keys := Keys(1 << 20)
	processed, wait := workers(q, workerCount)
	b.ReportAllocs()
	b.ResetTimer()
	var wg sync.WaitGroup
	for p := range producers {
		wg.Go(func() {
			for i := p; i < b.N; i += producers {
				for paced && int64(i)-processed.Load() >= pacedBacklog {
					runtime.Gosched()
				}
				add(i, keys[i&(len(keys)-1)])
			}
		})
	}
	wg.Wait()
	waitIdle(q, processed.Load, int64(b.N))
	b.StopTimer()
	b.ReportMetric(float64(processed.Load())/float64(b.N), "items/op")
	q.ShutDown()
	wait()
}

func duplicates(b *testing.B, impl Impl) {
	keys := Keys(100)
	q := impl.New(Config{})
	processed, wait := workers(q, 8)
	b.ReportAllocs()
	b.ResetTimer()
	i := 0
	for b.Loop() {
		q.Add(keys[i%len(keys)])
		i++
	}
	waitIdle(q, processed.Load, int64(b.N))
	b.StopTimer()
	b.ReportMetric(float64(processed.Load())/float64(b.N), "items/op")
	q.ShutDown()
	wait()
}

// randomDelay is a delay between one and two hours: nothing fires while a
// benchmark runs.
func randomDelay(rng *rand.Rand) time.Duration {
	return time.Hour + time.Duration(rng.Int64N(int64(time.Hour)))
}

// fixture is a queue with pending items, kept across the rounds of one
// benchmark because filling it takes longer than the measurement.
type fixture struct {
	q    Queue
	rng  *rand.Rand
	next int
}

var (
	fixturesMu sync.Mutex
	fixtures   = map[string]*fixture{}
)

func pendingFixture(impl Impl, pending int) *fixture {
	fixturesMu.Lock()
	defer fixturesMu.Unlock()
	key := fmt.Sprint(impl.Name, pending)
	if f := fixtures[key]; f != nil {
		return f
	}
	f := &fixture{q: impl.New(Config{}), rng: rand.New(rand.NewPCG(1, 2))}
	for _, k := range Keys(pending) {
		f.q.AddAfter(k, randomDelay(f.rng))
	}
	settle(f.q)
	f.next = pending
	fixtures[key] = f
	return f
}

// ReleaseFixtures shuts down the queues kept across benchmark rounds.
func ReleaseFixtures() {
	fixturesMu.Lock()
	defer fixturesMu.Unlock()
	for key, f := range fixtures {
		f.q.ShutDown()
		delete(fixtures, key)
	}
	runtime.GC()
}

// addAfter measures AddAfter with pending items waiting, up to the time the
// queue has filed the new items (see settle), and reports the longest time
// that 16 consecutive calls took: an upper bound on the longest single call,
// which shows whether a producer ever blocks. Timing groups of calls rather
// than each call keeps two clock readings per call (some 80 ns on a VM) out
// of every implementation's figure.
func addAfter(pending int) func(b *testing.B, impl Impl) {
	const group = 16
	return func(b *testing.B, impl Impl) {
		f := pendingFixture(impl, pending)
		keys := Keys(f.next + b.N)
		b.ReportAllocs()
		b.ResetTimer()
		var longest time.Duration
		start := time.Now()
		for i := range b.N {
			f.q.AddAfter(keys[f.next+i], randomDelay(f.rng))
			if i%group == group-1 {
				now := time.Now()
				longest = max(longest, now.Sub(start))
				start = now
			}
		}
		settle(f.q)
		b.StopTimer()
		f.next += b.N
		b.ReportMetric(float64(longest.Microseconds()), "max16-µs")
	}
}

// fire measures how fast waiting items reach the queue once a fake clock
// passes their delays.
func fire(b *testing.B, impl Impl) {
	n := min(b.N, 1<<21)
	keys := Keys(n)
	clock := newFakeClock()
	q := impl.New(Config{Clock: clock})
	defer q.ShutDown()
	rng := rand.New(rand.NewPCG(3, 4))
	for _, key := range keys {
		q.AddAfter(key, randomDelay(rng))
	}
	b.ReportAllocs()
	b.ResetTimer()
	clock.Step(3 * time.Hour)
	for q.Len() < n {
		time.Sleep(100 * time.Microsecond)
	}
	b.StopTimer()
	if n < b.N {
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n), "ns/item")
	}
}

func rateLimited(b *testing.B, impl Impl) {
	keys := Keys(1024)
	q := impl.New(Config{})
	defer q.ShutDown()
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		key := keys[i&1023]
		q.AddRateLimited(key)
		q.Forget(key)
	}
	settle(q)
	b.StopTimer()
}

// settleKey is a key no case adds otherwise.
const settleKey = "bench/settle"

// settle returns once q has done the work of every add made before it.
// controller-runtime's priority queue appends an add to a buffer and files
// it in another goroutine, in order; a key added without delay and then got
// has passed through that buffer after every earlier add, so the time a
// case measures includes the filing that the producer left to the queue.
// For a queue that files adds in the caller, it costs one Add, Get and Done.
func settle(q Queue) {
	q.Add(settleKey)
	for {
		key, _ := q.Get()
		q.Done(key)
		if key == settleKey {
			return
		}
	}
}

// BytesPerItem returns the heap the queue of impl holds per queued key, with
// n distinct keys queued, after garbage collection; the keys themselves are
// not counted.
func BytesPerItem(impl Impl, n int) float64 {
	keys := Keys(n)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	q := impl.New(Config{})
	for _, key := range keys {
		q.Add(key)
	}
	for q.Len() < n {
		time.Sleep(time.Millisecond) // controller-runtime adds asynchronously
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(q)
	q.ShutDown()
	return float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / float64(n)
}
