package compat

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	clientgo "k8s.io/client-go/util/workqueue"

	"github.com/go-workqueue/workqueue"
)

var diffOps = flag.Int64("diffops", 2_000_000, "operations TestDifferential compares")

// The operations a walk can generate. Documented differences from client-go
// are never generated; each is named here with the reason:
//
//   - doneOfItemNotProcessing: Done for an item no worker holds. client-go
//     queues such an item a second time; we do nothing. Walks call Done only
//     for items a Get handed out.
//   - equalReadyTimes: items whose delays end at the same instant. client-go's
//     heap hands them over in no defined order; ours in the order they were
//     added. Every operation runs at its own nanosecond and every delay is a
//     whole number of milliseconds, so no two ready times are equal.
//   - shutDownWithDrain: client-go's drain returns while items are queued.
//     Walks shut down with ShutDown.
//   - addRateLimitedAfterShutDown: client-go still records a failure; we do
//     not. Walks shut down only at their end.
//   - burstZeroBucket and exponentialOverflow: client-go waits forever or
//     returns a negative delay; walks use limiters that never reach either.
const (
	diffAdd = iota
	diffGet
	diffDone
	diffAddAfter
	diffAddRateLimited
	diffForget
	diffNumRequeues
	diffStep
)

var diffDelays = []time.Duration{-time.Second, 0, time.Millisecond, 5 * time.Millisecond, 100 * time.Millisecond,
	time.Second, 10 * time.Second, time.Minute, time.Hour}

// diffSteps are whole milliseconds, like the delays, so that ready times keep
// the distinct sub-millisecond offsets of the operations that set them.
var diffSteps = []time.Duration{time.Millisecond, 5 * time.Millisecond, 100 * time.Millisecond, time.Second, 10 * time.Second, time.Hour}

// recorder remembers the last delay its limiter returned.
type recorder struct {
	clientgo.TypedRateLimiter[string]
	last time.Duration
}

func (r *recorder) When(item string) time.Duration {
	r.last = r.TypedRateLimiter.When(item)
	return r.last
}

type diffPair struct {
	ours, theirs               clientgo.TypedRateLimitingInterface[string]
	oursLimiter, theirsLimiter *recorder
}

func newDiffPair() diffPair {
	p := diffPair{
		oursLimiter: &recorder{TypedRateLimiter: workqueue.NewTypedMaxOfRateLimiter(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Millisecond, 10*time.Second),
			workqueue.NewTypedItemFastSlowRateLimiter[string](2*time.Millisecond, time.Second, 3))},
		theirsLimiter: &recorder{TypedRateLimiter: clientgo.NewTypedMaxOfRateLimiter(
			clientgo.NewTypedItemExponentialFailureRateLimiter[string](time.Millisecond, 10*time.Second),
			clientgo.NewTypedItemFastSlowRateLimiter[string](2*time.Millisecond, time.Second, 3))},
	}
	p.ours = workqueue.NewTypedRateLimitingQueue[string](p.oursLimiter)
	p.theirs = clientgo.NewTypedRateLimitingQueue[string](p.theirsLimiter)
	return p
}

// runDiffWalk runs n random operations on both queues in a synctest bubble
// and returns how many it compared and the first divergence, or "".
func runDiffWalk(rng *rand.Rand, n int) (compared int, divergence string) {
	p := newDiffPair()
	defer func() { // also when a divergence ends the walk early
		p.ours.ShutDown()
		p.theirs.ShutDown()
	}()
	keys := []string{"a", "b", "c", "d", "e", "f", "g", "h"}
	var processing []string // handed out by Get, not yet done
	fail := func(i int, format string, args ...any) (int, string) {
		return compared, fmt.Sprintf("op %d: %s", i, fmt.Sprintf(format, args...))
	}
	for i := range n {
		time.Sleep(time.Nanosecond) // every operation at its own instant of the bubble's clock
		key := keys[rng.IntN(len(keys))]
		switch rng.IntN(diffStep + 1) {
		case diffAdd:
			p.ours.Add(key)
			p.theirs.Add(key)
		case diffGet:
			if p.theirs.Len() == 0 {
				continue // Get would block
			}
			got, _ := p.ours.Get()
			want, _ := p.theirs.Get()
			if got != want {
				return fail(i, "Get = %q, client-go %q", got, want)
			}
			processing = append(processing, got)
		case diffDone:
			if len(processing) == 0 {
				continue
			}
			j := rng.IntN(len(processing))
			item := processing[j]
			processing = append(processing[:j], processing[j+1:]...)
			p.ours.Done(item)
			p.theirs.Done(item)
		case diffAddAfter:
			d := diffDelays[rng.IntN(len(diffDelays))]
			p.ours.AddAfter(key, d)
			p.theirs.AddAfter(key, d)
		case diffAddRateLimited:
			p.ours.AddRateLimited(key)
			p.theirs.AddRateLimited(key)
			if p.oursLimiter.last != p.theirsLimiter.last {
				return fail(i, "AddRateLimited(%q) delay = %v, client-go %v", key, p.oursLimiter.last, p.theirsLimiter.last)
			}
		case diffForget:
			p.ours.Forget(key)
			p.theirs.Forget(key)
		case diffNumRequeues:
		case diffStep:
			time.Sleep(diffSteps[rng.IntN(len(diffSteps))])
		}
		compared++
		synctest.Wait()
		if got, want := p.ours.Len(), p.theirs.Len(); got != want {
			return fail(i, "Len = %d, client-go %d", got, want)
		}
		if got, want := p.ours.NumRequeues(key), p.theirs.NumRequeues(key); got != want {
			return fail(i, "NumRequeues(%q) = %d, client-go %d", key, got, want)
		}
	}
	// Shut both down: they must hand out the same queued items, then stop.
	p.ours.ShutDown()
	p.theirs.ShutDown()
	for {
		got, oursDone := p.ours.Get()
		want, theirsDone := p.theirs.Get()
		compared++
		if got != want || oursDone != theirsDone {
			return fail(n, "Get after ShutDown = %q, %v; client-go %q, %v", got, oursDone, want, theirsDone)
		}
		if oursDone {
			return compared, ""
		}
	}
}

// TestDifferential runs the same seeded single-goroutine walks against this
// package and client-go and compares Get order, Len, NumRequeues and the
// limiters' delays after every operation.
func TestDifferential(t *testing.T) {
	const walkLength = 2000
	var compared, walks, divergences atomic.Int64
	var first atomic.Value
	t.Run("group", func(t *testing.T) {
		for half := range 2 {
			t.Run(fmt.Sprint(half), func(t *testing.T) {
				t.Parallel()
				for walk := half; compared.Load() < *diffOps; walk += 2 {
					synctest.Test(t, func(t *testing.T) {
						n, divergence := runDiffWalk(rand.New(rand.NewPCG(uint64(walk), 0xc0de)), walkLength)
						compared.Add(int64(n))
						walks.Add(1)
						if divergence != "" {
							divergences.Add(1)
							first.CompareAndSwap(nil, fmt.Sprintf("walk %d: %s", walk, divergence))
						}
					})
				}
			})
		}
	})
	t.Logf("differential check against client-go: %d operations compared in %d walks, %d divergences",
		compared.Load(), walks.Load(), divergences.Load())
	if d := first.Load(); d != nil {
		t.Fatalf("diverged from client-go: %v", d)
	}
}
