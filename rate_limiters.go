package workqueue

import (
	"fmt"
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// TypedRateLimiter gives retry delays. It must be safe for concurrent use.
type TypedRateLimiter[T comparable] interface {
	When(item T) time.Duration // records a failure of item and returns its delay
	Forget(item T)             // clears item's failures
	NumRequeues(item T) int    // item's failures since it was last forgotten
}

// DefaultTypedControllerRateLimiter returns the max of a per-item backoff from
// 5 ms to 1000 s and a 10/s bucket, burst 100, as Kubernetes does.
func DefaultTypedControllerRateLimiter[T comparable]() TypedRateLimiter[T] {
	return NewTypedMaxOfRateLimiter(
		NewTypedItemExponentialFailureRateLimiter[T](5*time.Millisecond, 1000*time.Second),
		&TypedBucketRateLimiter[T]{Limiter: rate.NewLimiter(rate.Limit(10), 100)},
	)
}

// DefaultTypedItemBasedRateLimiter returns a backoff from 1 ms to 1000 s.
func DefaultTypedItemBasedRateLimiter[T comparable]() TypedRateLimiter[T] {
	return NewTypedItemExponentialFailureRateLimiter[T](time.Millisecond, 1000*time.Second)
}

// failureCounts counts failures per item. It forgets its storage once it is
// empty after having been large, because a Go map keeps its peak size.
type failureCounts[T comparable] struct {
	mu     sync.Mutex
	counts map[T]int
	peak   int
}

// shrinkAfterPeak is the size above which an emptied failure map is
// replaced by a fresh one.
const shrinkAfterPeak = 1024

// record counts one more failure of item and returns the count before it.
// The count saturates instead of wrapping around.
func (f *failureCounts[T]) record(item T) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.counts == nil {
		f.counts = make(map[T]int)
	}
	before := f.counts[item]
	if before < math.MaxInt {
		f.counts[item] = before + 1
	}
	f.peak = max(f.peak, len(f.counts))
	return before
}

func (f *failureCounts[T]) get(item T) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.counts[item]
}

func (f *failureCounts[T]) forget(item T) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.counts, item)
	if len(f.counts) == 0 && f.peak > shrinkAfterPeak {
		f.counts, f.peak = nil, 0
	}
}

// TypedItemExponentialFailureRateLimiter delays an item's n-th failure since
// it was forgotten by baseDelay * 2^(n-1), at most maxDelay, and is safe for
// concurrent use; its zero value never delays.
type TypedItemExponentialFailureRateLimiter[T comparable] struct {
	failures  failureCounts[T]
	baseDelay time.Duration
	maxDelay  time.Duration
}

// NewTypedItemExponentialFailureRateLimiter returns an exponential backoff. It
// panics if a delay is negative or maxDelay is less than baseDelay.
func NewTypedItemExponentialFailureRateLimiter[T comparable](baseDelay time.Duration, maxDelay time.Duration) TypedRateLimiter[T] {
	if baseDelay < 0 || maxDelay < 0 {
		panic(fmt.Sprintf("workqueue: exponential rate limiter needs non-negative delays, got base %v and max %v", baseDelay, maxDelay))
	}
	if maxDelay < baseDelay {
		panic(fmt.Sprintf("workqueue: exponential rate limiter needs max delay %v to be at least base delay %v", maxDelay, baseDelay))
	}
	return &TypedItemExponentialFailureRateLimiter[T]{baseDelay: baseDelay, maxDelay: maxDelay}
}

// When records a failure of item and returns its delay.
func (r *TypedItemExponentialFailureRateLimiter[T]) When(item T) time.Duration {
	return exponentialBackoff(r.baseDelay, r.maxDelay, r.failures.record(item))
}

// exponentialBackoff returns min(base * 2^exp, max) without overflowing:
// shifting base left by exp stays within max exactly when base <= max >> exp.
func exponentialBackoff(base, max time.Duration, exp int) time.Duration {
	if base <= 0 {
		return 0
	}
	if exp >= 63 || base > max>>exp {
		return max
	}
	return base << exp
}

// NumRequeues returns item's failures since it was last forgotten.
func (r *TypedItemExponentialFailureRateLimiter[T]) NumRequeues(item T) int {
	return r.failures.get(item)
}

// Forget clears item's failures.
func (r *TypedItemExponentialFailureRateLimiter[T]) Forget(item T) {
	r.failures.forget(item)
}

// TypedItemFastSlowRateLimiter delays an item's first maxFastAttempts failures
// by fastDelay, later ones by slowDelay; its zero value never delays. It is
// safe for concurrent use.
type TypedItemFastSlowRateLimiter[T comparable] struct {
	failures        failureCounts[T]
	fastDelay       time.Duration
	slowDelay       time.Duration
	maxFastAttempts int
}

// NewTypedItemFastSlowRateLimiter returns a fast-slow limiter; it panics if an
// argument is negative.
func NewTypedItemFastSlowRateLimiter[T comparable](fastDelay, slowDelay time.Duration, maxFastAttempts int) TypedRateLimiter[T] {
	if fastDelay < 0 || slowDelay < 0 {
		panic(fmt.Sprintf("workqueue: fast-slow rate limiter needs non-negative delays, got fast %v and slow %v", fastDelay, slowDelay))
	}
	if maxFastAttempts < 0 {
		panic(fmt.Sprintf("workqueue: fast-slow rate limiter needs non-negative fast attempts, got %d", maxFastAttempts))
	}
	return &TypedItemFastSlowRateLimiter[T]{fastDelay: fastDelay, slowDelay: slowDelay, maxFastAttempts: maxFastAttempts}
}

// When records a failure of item and returns its delay.
func (r *TypedItemFastSlowRateLimiter[T]) When(item T) time.Duration {
	if r.failures.record(item) < r.maxFastAttempts {
		return r.fastDelay
	}
	return r.slowDelay
}

// NumRequeues returns item's failures since it was last forgotten.
func (r *TypedItemFastSlowRateLimiter[T]) NumRequeues(item T) int {
	return r.failures.get(item)
}

// Forget clears item's failures.
func (r *TypedItemFastSlowRateLimiter[T]) Forget(item T) {
	r.failures.forget(item)
}

// TypedBucketRateLimiter limits all items with one token bucket, safe for
// concurrent use: &TypedBucketRateLimiter[T]{Limiter: rate.NewLimiter(r, b)}.
type TypedBucketRateLimiter[T comparable] struct {
	*rate.Limiter
}

// maxUnreservableDelay caps the delay for a bucket that can never grant a
// token, the largest delay of the default controller limiter.
const maxUnreservableDelay = 1000 * time.Second

// When takes a token and returns the wait for it; a bucket that never grants
// one gives a token interval, at most 1000 s. It panics on a nil Limiter.
func (r *TypedBucketRateLimiter[T]) When(item T) time.Duration {
	if r.Limiter == nil {
		panic("workqueue: TypedBucketRateLimiter needs a Limiter, got nil; build it as &TypedBucketRateLimiter[T]{Limiter: rate.NewLimiter(r, b)}")
	}
	// ReserveN, unlike Reserve, inlines here, so the reservation stays on
	// the stack and When does not allocate.
	reservation := r.Limiter.ReserveN(time.Now(), 1)
	delay := reservation.Delay()
	if reservation.OK() && delay < rate.InfDuration/2 {
		return delay
	}
	reservation.Cancel()
	limit := float64(r.Limiter.Limit())
	if limit <= 0 || float64(time.Second)/limit > float64(maxUnreservableDelay) {
		return maxUnreservableDelay
	}
	return time.Duration(float64(time.Second) / limit)
}

// NumRequeues returns 0.
func (r *TypedBucketRateLimiter[T]) NumRequeues(item T) int {
	return 0
}

// Forget does nothing.
func (r *TypedBucketRateLimiter[T]) Forget(item T) {}

// TypedMaxOfRateLimiter, safe for concurrent use, gives its limiters' longest
// delay and largest count and forgets in all; its zero value never delays.
type TypedMaxOfRateLimiter[T comparable] struct {
	limiters []TypedRateLimiter[T]
}

// NewTypedMaxOfRateLimiter combines limiters. It panics if one is nil.
func NewTypedMaxOfRateLimiter[T comparable](limiters ...TypedRateLimiter[T]) TypedRateLimiter[T] {
	for i, limiter := range limiters {
		if limiter == nil {
			panic(fmt.Sprintf("workqueue: max-of rate limiter got a nil rate limiter at position %d", i))
		}
	}
	return &TypedMaxOfRateLimiter[T]{limiters: append([]TypedRateLimiter[T](nil), limiters...)}
}

// When records a failure in every limiter and returns the longest delay.
func (r *TypedMaxOfRateLimiter[T]) When(item T) time.Duration {
	var longest time.Duration
	for _, limiter := range r.limiters {
		longest = max(longest, limiter.When(item))
	}
	return longest
}

// NumRequeues returns the largest requeue count of any limiter.
func (r *TypedMaxOfRateLimiter[T]) NumRequeues(item T) int {
	var most int
	for _, limiter := range r.limiters {
		most = max(most, limiter.NumRequeues(item))
	}
	return most
}

// Forget forgets item in every limiter.
func (r *TypedMaxOfRateLimiter[T]) Forget(item T) {
	for _, limiter := range r.limiters {
		limiter.Forget(item)
	}
}

// TypedWithMaxWaitRateLimiter caps another limiter's delays, and is as safe
// for concurrent use as it. Its methods panic on a zero value.
type TypedWithMaxWaitRateLimiter[T comparable] struct {
	limiter  TypedRateLimiter[T]
	maxDelay time.Duration
}

// NewTypedWithMaxWaitRateLimiter caps limiter's delays at maxDelay. It panics
// if limiter is nil or maxDelay is negative.
func NewTypedWithMaxWaitRateLimiter[T comparable](limiter TypedRateLimiter[T], maxDelay time.Duration) TypedRateLimiter[T] {
	if limiter == nil {
		panic("workqueue: max-wait rate limiter needs a rate limiter, got nil")
	}
	if maxDelay < 0 {
		panic(fmt.Sprintf("workqueue: max-wait rate limiter needs a non-negative max delay, got %v", maxDelay))
	}
	return &TypedWithMaxWaitRateLimiter[T]{limiter: limiter, maxDelay: maxDelay}
}

// When returns the wrapped limiter's delay, at most maxDelay.
func (w TypedWithMaxWaitRateLimiter[T]) When(item T) time.Duration {
	return min(w.wrapped("When").When(item), w.maxDelay)
}

// Forget forgets item in the wrapped limiter.
func (w TypedWithMaxWaitRateLimiter[T]) Forget(item T) {
	w.wrapped("Forget").Forget(item)
}

// NumRequeues returns the wrapped limiter's count.
func (w TypedWithMaxWaitRateLimiter[T]) NumRequeues(item T) int {
	return w.wrapped("NumRequeues").NumRequeues(item)
}

// wrapped returns the wrapped limiter, which only a zero value lacks.
func (w TypedWithMaxWaitRateLimiter[T]) wrapped(method string) TypedRateLimiter[T] {
	if w.limiter == nil {
		panic("workqueue: " + method + " on a zero TypedWithMaxWaitRateLimiter; make one with NewTypedWithMaxWaitRateLimiter")
	}
	return w.limiter
}
