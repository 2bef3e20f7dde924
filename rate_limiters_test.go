package workqueue

import (
	"fmt"
	"math"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/time/rate"
)

// limiterStep calls When (or Forget, if forget is set) for item and checks
// the delay and the NumRequeues that follow.
type limiterStep struct {
	item         string
	forget       bool
	wantDelay    time.Duration
	wantRequeues int
}

func runLimiterSteps(t *testing.T, limiter TypedRateLimiter[string], steps []limiterStep) {
	t.Helper()
	for i, step := range steps {
		if step.forget {
			limiter.Forget(step.item)
		} else {
			got := limiter.When(step.item)
			require.Equalf(t, step.wantDelay, got, "step %d: When(%q)", i, step.item)
		}
		require.Equalf(t, step.wantRequeues, limiter.NumRequeues(step.item), "step %d: NumRequeues(%q)", i, step.item)
	}
}

func TestRateLimiters(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		name    string
		limiter TypedRateLimiter[string]
		steps   []limiterStep
	}{
		{"exponential doubles per item and forgets",
			NewTypedItemExponentialFailureRateLimiter[string](ms, time.Second),
			[]limiterStep{
				{item: "a", wantDelay: ms, wantRequeues: 1},
				{item: "a", wantDelay: 2 * ms, wantRequeues: 2},
				{item: "b", wantDelay: ms, wantRequeues: 1},
				{item: "a", wantDelay: 4 * ms, wantRequeues: 3},
				{item: "a", forget: true, wantRequeues: 0},
				{item: "a", wantDelay: ms, wantRequeues: 1},
			}},
		{"exponential stops at max",
			NewTypedItemExponentialFailureRateLimiter[string](300*ms, time.Second),
			[]limiterStep{
				{item: "a", wantDelay: 300 * ms, wantRequeues: 1},
				{item: "a", wantDelay: 600 * ms, wantRequeues: 2},
				{item: "a", wantDelay: time.Second, wantRequeues: 3},
				{item: "a", wantDelay: time.Second, wantRequeues: 4},
			}},
		{"exponential zero value never delays",
			&TypedItemExponentialFailureRateLimiter[string]{},
			[]limiterStep{
				{item: "a", wantDelay: 0, wantRequeues: 1},
				{item: "a", wantDelay: 0, wantRequeues: 2},
			}},
		{"fast then slow",
			NewTypedItemFastSlowRateLimiter[string](ms, time.Second, 2),
			[]limiterStep{
				{item: "a", wantDelay: ms, wantRequeues: 1},
				{item: "a", wantDelay: ms, wantRequeues: 2},
				{item: "b", wantDelay: ms, wantRequeues: 1},
				{item: "a", wantDelay: time.Second, wantRequeues: 3},
				{item: "a", forget: true, wantRequeues: 0},
				{item: "a", wantDelay: ms, wantRequeues: 1},
			}},
		{"fast-slow with no fast attempts is always slow",
			NewTypedItemFastSlowRateLimiter[string](ms, time.Second, 0),
			[]limiterStep{{item: "a", wantDelay: time.Second, wantRequeues: 1}}},
		{"max-of takes the longest delay and the most requeues",
			NewTypedMaxOfRateLimiter(
				NewTypedItemFastSlowRateLimiter[string](5*ms, 3*time.Second, 3),
				NewTypedItemExponentialFailureRateLimiter[string](ms, time.Second)),
			[]limiterStep{
				{item: "a", wantDelay: 5 * ms, wantRequeues: 1},
				{item: "a", wantDelay: 5 * ms, wantRequeues: 2},
				{item: "a", wantDelay: 5 * ms, wantRequeues: 3},
				{item: "a", wantDelay: 3 * time.Second, wantRequeues: 4},
				{item: "a", forget: true, wantRequeues: 0},
				{item: "a", wantDelay: 5 * ms, wantRequeues: 1},
			}},
		{"max-of with no limiters never delays",
			NewTypedMaxOfRateLimiter[string](),
			[]limiterStep{{item: "a", wantDelay: 0, wantRequeues: 0}}},
		{"max-of zero value never delays",
			&TypedMaxOfRateLimiter[string]{},
			[]limiterStep{{item: "a", wantDelay: 0, wantRequeues: 0}}},
		{"fast-slow zero value never delays",
			&TypedItemFastSlowRateLimiter[string]{},
			[]limiterStep{
				{item: "a", wantDelay: 0, wantRequeues: 1},
				{item: "a", wantDelay: 0, wantRequeues: 2},
				{item: "a", forget: true, wantRequeues: 0},
			}},
		{"max wait caps the delay",
			NewTypedWithMaxWaitRateLimiter(NewTypedItemExponentialFailureRateLimiter[string](ms, time.Hour), 3*ms),
			[]limiterStep{
				{item: "a", wantDelay: ms, wantRequeues: 1},
				{item: "a", wantDelay: 2 * ms, wantRequeues: 2},
				{item: "a", wantDelay: 3 * ms, wantRequeues: 3},
				{item: "a", forget: true, wantRequeues: 0},
				{item: "a", wantDelay: ms, wantRequeues: 1},
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			runLimiterSteps(t, tt.limiter, tt.steps)
		})
	}
}

// Regression: client-go's exponential limiter returned a negative delay on
// the 64th failure with a 1 ns base, because 2^63 ns does not fit in a
// Duration.
func TestExponentialBackoffNeverNegativeNorAboveMax(t *testing.T) {
	bases := []time.Duration{1, 3, time.Microsecond, time.Millisecond, 5 * time.Millisecond, time.Second, time.Minute, time.Hour}
	maxes := []time.Duration{time.Hour, 1000 * time.Second, math.MaxInt64}
	for _, base := range bases {
		for _, maxDelay := range maxes {
			if maxDelay < base {
				continue // rejected at construction, tested below
			}
			t.Run(fmt.Sprintf("base=%v/max=%v", base, maxDelay), func(t *testing.T) {
				limiter := NewTypedItemExponentialFailureRateLimiter[int](base, maxDelay)
				previous := time.Duration(0)
				for failure := range 10000 {
					got := limiter.When(0)
					if got < previous || got > maxDelay {
						t.Fatalf("failure %d: got %v after %v, want a delay in [%v, %v]", failure, got, previous, previous, maxDelay)
					}
					if exact := base << failure; failure < 62 && exact <= maxDelay && exact>>failure == base && got != exact {
						t.Fatalf("failure %d: got %v, want %v", failure, got, exact)
					}
					previous = got
				}
				assert.Equal(t, maxDelay, previous)
			})
		}
	}
}

func TestExponentialBackoffFormula(t *testing.T) {
	tests := []struct {
		base, max time.Duration
		exp       int
		want      time.Duration
	}{
		{1, math.MaxInt64, 0, 1},
		{1, math.MaxInt64, 62, 1 << 62},
		{1, math.MaxInt64, 63, math.MaxInt64},
		{1, math.MaxInt64, math.MaxInt, math.MaxInt64},
		{3, math.MaxInt64, 61, 3 << 61},
		{3, math.MaxInt64, 62, math.MaxInt64},
		{math.MaxInt64, math.MaxInt64, 1, math.MaxInt64},
		{0, time.Second, 100, 0},
		{time.Second, time.Second, 0, time.Second},
		{time.Second, time.Second, 1, time.Second},
	}
	for _, tt := range tests {
		got := exponentialBackoff(tt.base, tt.max, tt.exp)
		assert.Equalf(t, tt.want, got, "exponentialBackoff(%d, %d, %d)", tt.base, tt.max, tt.exp)
	}
}

func TestForgottenLimiterKeepsNoState(t *testing.T) {
	limiter := NewTypedItemExponentialFailureRateLimiter[int](time.Millisecond, time.Second).(*TypedItemExponentialFailureRateLimiter[int])
	for i := range 2 * shrinkAfterPeak {
		limiter.When(i)
	}
	for i := range 2 * shrinkAfterPeak {
		limiter.Forget(i)
	}
	assert.Nil(t, limiter.failures.counts, "an emptied large failure map is kept")
	limiter.When(1)
	limiter.Forget(1)
	assert.Empty(t, limiter.failures.counts)
}

func TestBucketRateLimiter(t *testing.T) {
	tests := []struct {
		name   string
		limit  rate.Limit
		burst  int
		delays []time.Duration // of successive When calls at one instant
	}{
		{"burst then spaced by the rate", 10, 2, []time.Duration{0, 0, 100 * time.Millisecond, 200 * time.Millisecond}},
		{"infinite rate never delays", rate.Inf, 0, []time.Duration{0, 0, 0}},
		{"burst 0 spaces by one token interval instead of forever", 4, 0, []time.Duration{250 * time.Millisecond, 250 * time.Millisecond}},
		{"zero rate with burst spent waits the cap instead of forever", 0, 1, []time.Duration{0, maxUnreservableDelay}},
		{"tiny rate waits the cap", 0.0001, 0, []time.Duration{maxUnreservableDelay}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				limiter := &TypedBucketRateLimiter[string]{Limiter: rate.NewLimiter(tt.limit, tt.burst)}
				for i, want := range tt.delays {
					assert.Equalf(t, want, limiter.When("a"), "When call %d", i)
				}
				assert.Zero(t, limiter.NumRequeues("a"))
				limiter.Forget("a")
			})
		})
	}
}

func TestDefaultControllerRateLimiter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		limiter := DefaultTypedControllerRateLimiter[int]()
		// The burst of 100 covers the first 100 items; the backoff decides.
		for i := range 100 {
			require.Equal(t, 5*time.Millisecond, limiter.When(i))
		}
		// Then the bucket spaces items 100 ms apart.
		assert.Equal(t, 100*time.Millisecond, limiter.When(100))
		assert.Equal(t, 200*time.Millisecond, limiter.When(101))
		assert.Equal(t, 1, limiter.NumRequeues(0))
		for range 30 {
			limiter.When(0)
		}
		assert.Equal(t, 1000*time.Second, limiter.When(0), "max delay")
	})
}

func TestDefaultItemBasedRateLimiter(t *testing.T) {
	limiter := DefaultTypedItemBasedRateLimiter[string]()
	assert.Equal(t, time.Millisecond, limiter.When("a"))
	assert.Equal(t, 2*time.Millisecond, limiter.When("a"))
	for range 40 {
		limiter.When("a")
	}
	assert.Equal(t, 1000*time.Second, limiter.When("a"))
}

func TestConstructorsPanicOnBadConfiguration(t *testing.T) {
	limiter := DefaultTypedItemBasedRateLimiter[string]()
	tests := []struct {
		name      string
		construct func()
		want      string
	}{
		{"nil limiter for a queue", func() { NewTypedRateLimitingQueue[string](nil) },
			"workqueue: NewTypedRateLimitingQueue needs a rate limiter, got nil"},
		{"nil limiter for a queue with config", func() {
			NewTypedRateLimitingQueueWithConfig[string](nil, TypedRateLimitingQueueConfig[string]{})
		}, "workqueue: NewTypedRateLimitingQueue needs a rate limiter, got nil"},
		{"negative base", func() { NewTypedItemExponentialFailureRateLimiter[string](-1, time.Second) },
			"workqueue: exponential rate limiter needs non-negative delays, got base -1ns and max 1s"},
		{"negative max", func() { NewTypedItemExponentialFailureRateLimiter[string](0, -time.Second) },
			"workqueue: exponential rate limiter needs non-negative delays, got base 0s and max -1s"},
		{"max below base", func() { NewTypedItemExponentialFailureRateLimiter[string](time.Second, time.Millisecond) },
			"workqueue: exponential rate limiter needs max delay 1ms to be at least base delay 1s"},
		{"negative fast delay", func() { NewTypedItemFastSlowRateLimiter[string](-1, time.Second, 1) },
			"workqueue: fast-slow rate limiter needs non-negative delays, got fast -1ns and slow 1s"},
		{"negative slow delay", func() { NewTypedItemFastSlowRateLimiter[string](0, -1, 1) },
			"workqueue: fast-slow rate limiter needs non-negative delays, got fast 0s and slow -1ns"},
		{"negative fast attempts", func() { NewTypedItemFastSlowRateLimiter[string](0, 0, -1) },
			"workqueue: fast-slow rate limiter needs non-negative fast attempts, got -1"},
		{"nil limiter in max-of", func() { NewTypedMaxOfRateLimiter(limiter, nil) },
			"workqueue: max-of rate limiter got a nil rate limiter at position 1"},
		{"nil limiter for max wait", func() { NewTypedWithMaxWaitRateLimiter[string](nil, time.Second) },
			"workqueue: max-wait rate limiter needs a rate limiter, got nil"},
		{"negative max wait", func() { NewTypedWithMaxWaitRateLimiter(limiter, -1) },
			"workqueue: max-wait rate limiter needs a non-negative max delay, got -1ns"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.PanicsWithValue(t, tt.want, tt.construct)
		})
	}
}
