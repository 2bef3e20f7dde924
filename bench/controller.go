package bench

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// Controller is the shape of a controller-shaped case: Producers goroutines
// (informer event handlers) add keys drawn from Keys keys, and Workers
// goroutines each get a key, spend Cost of CPU reconciling it, and mark it
// done. One op is one Add; the time runs until a drained shutdown has
// returned and the workers have exited, so it counts every reconcile the
// adds cause. A queue that collapses a key added again while it waits
// reconciles less; the channel reconciles every add. Where most adds
// collapse (K=64), the reconciles per add and the time move by several
// times from run to run: take their medians over several runs.
type Controller struct {
	Producers, Workers int
	// Keys is how many distinct keys the adds are drawn from.
	Keys int
	// Hot skews the adds: HotPercent of them go to the hottest 1% of the keys
	// (at least one key), the rest to any key, uniformly. Without it every
	// add draws a key uniformly.
	Hot bool
	// Cost is the CPU time each reconcile spins for (see Spin).
	Cost time.Duration
	// Wait is how long each reconcile then blocks, as on a call to an API
	// server: the worker sleeps, and another runs.
	Wait time.Duration
}

// HotPercent is the percentage of adds that go to the hottest 1% of the
// keys in a skewed case.
const HotPercent = 80

// The controller-shaped cases use P=4 producers and W=8 workers: a
// controller's adds come from a few informer event handlers, and it runs a
// handful of reconcile workers (kube-controller-manager's defaults range
// from 5 to 20).
//
// Eight workers keep more workers than cores on the small machines the
// comparison runs on, as a controller manager with many controllers does.
const (
	ControllerProducers = 4
	ControllerWorkers   = 8
)

// ControllerWait is how long a reconcile of the I/O cases blocks: about a
// round trip to an API server on the same network.
const ControllerWait = 50 * time.Microsecond

// controllerTimeFraction keeps the family, 18 cases in the full run, to
// some two minutes of the compare command's five repetitions on two cores.
// A measurement takes some 2.5 times its target time: the rounds before the
// last, a garbage collection before each, and, where most adds collapse, a
// round that takes much less than its adds predict, so one more round.
const controllerTimeFraction = 1.0 / 3

// controllerCases returns the controller-shaped cases: every key count,
// distribution and reconcile cost.
func controllerCases(quick bool) []Case {
	notCoreOnly := func(impl Impl) bool { return !impl.CoreOnly }
	keyCounts := []int{64, 10_000, 1_000_000}
	if quick {
		keyCounts = keyCounts[:2]
	}
	var cases []Case
	for _, k := range keyCounts {
		for _, hot := range []bool{false, true} {
			for _, cost := range []time.Duration{0, time.Microsecond, 20 * time.Microsecond} {
				c := Controller{Producers: ControllerProducers, Workers: ControllerWorkers, Keys: k, Hot: hot, Cost: cost}
				cases = append(cases, Case{Name: c.Name(), Applies: notCoreOnly, Run: c.Run, Op: c.Op(), TimeFraction: controllerTimeFraction})
			}
		}
		// Reconciles that wait on I/O, where the CPU goes to parking and
		// waking the workers rather than to the queue.
		c := Controller{Producers: ControllerProducers, Workers: ControllerWorkers, Keys: k, Hot: true, Wait: ControllerWait}
		cases = append(cases, Case{Name: c.Name(), Applies: notCoreOnly, Run: c.Run, Op: c.Op(), TimeFraction: controllerTimeFraction})
	}
	return cases
}

// Name is "controller/K=<keys>/<uniform|hot>/cost=<cost>", e.g.
// controller/K=10k/hot/cost=1µs; producers and workers are not in it, since
// every case has the same.
func (c Controller) Name() string {
	dist := "uniform"
	if c.Hot {
		dist = "hot"
	}
	if c.Wait > 0 {
		return fmt.Sprintf("controller/K=%s/%s/wait=%v", shortCount(c.Keys), dist, c.Wait)
	}
	cost := "0"
	if c.Cost > 0 {
		cost = c.Cost.String()
	}
	return fmt.Sprintf("controller/K=%s/%s/cost=%s", shortCount(c.Keys), dist, cost)
}

// Op says what one op of the case is, for the table.
func (c Controller) Op() string {
	dist := "uniformly"
	if c.Hot {
		dist = fmt.Sprintf("%d%% to the hottest 1%%", HotPercent)
	}
	work := fmt.Sprintf("spinning %v", c.Cost)
	if c.Wait > 0 {
		work = fmt.Sprintf("blocking %v", c.Wait)
	}
	return fmt.Sprintf("one add by one of %d producers of one of %d keys (%s), each reconcile %s on one of %d workers, up to a drained shutdown",
		c.Producers, c.Keys, dist, work, c.Workers)
}

// shortCount writes 10000 as 10k and 1000000 as 1M.
func shortCount(n int) string {
	switch {
	case n >= 1_000_000 && n%1_000_000 == 0:
		return strconv.Itoa(n/1_000_000) + "M"
	case n >= 1000 && n%1000 == 0:
		return strconv.Itoa(n/1000) + "k"
	}
	return strconv.Itoa(n)
}

// Run measures impl in the case: b.N adds in all, split among the
// producers, then a drained shutdown. It reports the reconciles of the
// round, reconciles per add, the time per reconcile, and the process's CPU
// time per queue operation (each add, Get and Done), which, unlike the
// time to drain, does not reward workers that stall: a queue whose workers
// wait longer collapses more adds into fewer reconciles and drains sooner,
// but spends no less CPU on each operation.
func (c Controller) Run(b *testing.B, impl Impl) {
	// The producers never wait, and there are more goroutines than cores,
	// so the share of the CPU the workers get while the adds run is up to
	// the scheduler; where most adds collapse, that share sets the
	// reconciles per add, which is why those cases vary from run to run.
	keys := Keys(c.Keys)
	hot := max(1, c.Keys/100)
	// An add goes to a hot key when the low 32 bits of its random number
	// are below hotBelow; the high 32 bits pick the key.
	var hotBelow uint64
	if c.Hot {
		hotBelow = HotPercent << 32 / 100
	}
	iterations := SpinIterations(c.Cost)
	q := impl.New(Config{})
	reconciles, wait := reconcilers(q, c.Workers, iterations, c.Wait)
	b.ReportAllocs()
	b.ResetTimer()
	cpuStart := processCPU()
	var wg sync.WaitGroup
	for p := range c.Producers {
		wg.Go(func() {
			// A PCG draw and two multiplies, some nanoseconds against the
			// tens to hundreds that an Add costs; each producer has a
			// sequence of its own, the same in every round.
			rng := rand.NewPCG(uint64(p)+1, 0x9e3779b97f4a7c15)
			for i := p; i < b.N; i += c.Producers {
				x := rng.Uint64()
				n := uint64(len(keys))
				if x&(1<<32-1) < hotBelow {
					n = uint64(hot)
				}
				q.Add(keys[(x>>32)*n>>32])
			}
		})
	}
	wg.Wait()
	impl.ShutDownDrained(q, func() { waitIdle(q, reconciles, int64(b.N)) })
	wait()
	b.StopTimer()
	cpu := processCPU() - cpuStart
	n := reconciles()
	// The spinning reconciles' own CPU is not the queue's: take it out.
	spun := time.Duration(float64(n) * float64(iterations) * SpinStepNanoseconds())
	b.ReportMetric(float64((cpu-spun).Nanoseconds())/float64(int64(b.N)+2*n), "cpu-ns/queue-op")
	b.ReportMetric(float64(n), "reconciles")
	b.ReportMetric(float64(n)/float64(b.N), "reconciles/add")
	// The time per reconcile sets the queues side by side on the work
	// they did: where few adds collapse, reconciles/add moves several-fold
	// between runs of one queue with the scheduler's share of the CPU for
	// the workers, and ns/op with it.
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(max(n, 1)), "ns/reconcile")
}

// reconcileCount is one worker's count of reconciles, on a cache line of
// its own so that workers do not contend for the count.
type reconcileCount struct {
	n atomic.Int64
	_ [56]byte
}

// reconcilers starts n workers that get a key, spin the given iterations,
// block for block, and mark the key done, until shutdown. It returns the
// reconciles so far and a wait for the workers to exit.
func reconcilers(q Queue, n, iterations int, block time.Duration) (reconciles func() int64, wait func()) {
	counts := make([]reconcileCount, n)
	var wg sync.WaitGroup
	for i := range counts {
		count := &counts[i].n
		wg.Go(func() {
			var sum uint64
			for {
				key, shutdown := q.Get()
				if shutdown {
					break
				}
				sum += Spin(iterations)
				if block > 0 {
					time.Sleep(block)
				}
				q.Done(key)
				count.Add(1)
			}
			spinSink.Add(sum)
		})
	}
	reconciles = func() int64 {
		var total int64
		for i := range counts {
			total += counts[i].n.Load()
		}
		return total
	}
	return reconciles, wg.Wait
}

// spinSink keeps the results of Spin, so that no compiler could drop it.
var spinSink atomic.Uint64

// Spin is busy work that stands in for a reconcile's CPU time: n steps of a
// multiply and xor-shift chain, each step depending on the last, so that it
// can be neither vectorised nor skipped. Callers keep the result.
func Spin(n int) uint64 {
	x := uint64(n) | 1
	for range n {
		x ^= x >> 29
		x *= 0xbf58476d1ce4e5b9
	}
	return x
}

var (
	spinOnce    sync.Once
	spinPerStep float64 // nanoseconds
)

// SpinStepNanoseconds returns the nanoseconds one step of Spin takes on a
// core of its own, calibrated once per process.
func SpinStepNanoseconds() float64 {
	// The fastest of 15 timings of 2^18 steps (some 0.3 ms each), so that
	// a timing the scheduler interrupted does not count. With more busy
	// goroutines than cores, a reconcile gets its CPU time in several
	// slices.
	spinOnce.Do(func() {
		const steps = 1 << 18
		best := time.Duration(1<<63 - 1)
		var sum uint64
		for range 15 {
			start := time.Now()
			sum += Spin(steps)
			best = min(best, time.Since(start))
		}
		spinSink.Add(sum)
		spinPerStep = float64(best.Nanoseconds()) / steps
	})
	return spinPerStep
}

// SpinIterations returns the steps of Spin that take d of CPU time.
func SpinIterations(d time.Duration) int {
	if d <= 0 {
		return 0
	}
	return max(1, int(float64(d.Nanoseconds())/SpinStepNanoseconds()+0.5))
}

// processCPU returns the CPU time, user and system, that the process has
// used so far.
func processCPU() time.Duration {
	var usage syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &usage); err != nil {
		return 0
	}
	return time.Duration(usage.Utime.Nano() + usage.Stime.Nano())
}
