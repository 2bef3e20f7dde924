package redisqueue

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCoalescer checks that calls made while a batch runs wait for it and
// then run together, at most max to a batch, in arrival order, each with
// its own result, and that a batch's error is every call's of that batch
// and no other's.
func TestCoalescer(t *testing.T) {
	tests := []struct {
		name    string
		calls   int // the first, then the others while it runs
		max     int
		fail    int // the batch, counted from 0, whose run fails; -1 none
		batches []int
	}{
		{name: "one call", calls: 1, max: 256, fail: -1, batches: []int{1}},
		{name: "callers during a batch run together", calls: 10, max: 256, fail: -1, batches: []int{1, 9}},
		{name: "at most max to a batch", calls: 10, max: 4, fail: -1, batches: []int{1, 4, 4, 1}},
		{name: "an error is its batch's", calls: 10, max: 4, fail: 2, batches: []int{1, 4, 4, 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var mu sync.Mutex
				var batches [][]int
				release := make(chan struct{})
				failure := errors.New("batch failed")
				c := newCoalescer(tt.max, func(ins []int) ([]string, error) {
					mu.Lock()
					n := len(batches)
					batches = append(batches, ins)
					mu.Unlock()
					if n == 0 {
						<-release // the others arrive meanwhile
					}
					if n == tt.fail {
						return nil, failure
					}
					outs := make([]string, len(ins))
					for i, in := range ins {
						outs[i] = fmt.Sprint("out", in)
					}
					return outs, nil
				})
				type result struct {
					out string
					err error
				}
				results := make([]result, tt.calls)
				var wg sync.WaitGroup
				call := func(i int) {
					wg.Go(func() {
						out, err := c.do(i)
						results[i] = result{out, err}
					})
				}
				call(0)
				synctest.Wait()
				for i := 1; i < tt.calls; i++ {
					call(i)
					synctest.Wait() // in arrival order
				}
				close(release)
				wg.Wait()

				var sizes []int
				next := 0
				for b, batch := range batches {
					sizes = append(sizes, len(batch))
					for _, in := range batch {
						assert.Equal(t, next, in, "calls in arrival order")
						next++
						if b == tt.fail {
							assert.ErrorIs(t, results[in].err, failure, "call %d of the failed batch", in)
						} else {
							assert.NoError(t, results[in].err, "call %d", in)
							assert.Equal(t, fmt.Sprint("out", in), results[in].out, "call %d", in)
						}
					}
				}
				assert.Equal(t, tt.batches, sizes, "batch sizes")
				assert.False(t, c.running, "a batch still marked running")
				assert.Empty(t, c.waiting)
			})
		})
	}
}

// TestCoalescerConcurrent runs many goroutines of calls at once and checks
// that every call gets its own result.
func TestCoalescerConcurrent(t *testing.T) {
	c := newCoalescer(7, func(ins []int) ([]int, error) {
		outs := make([]int, len(ins))
		for i, in := range ins {
			outs[i] = -in
		}
		return outs, nil
	})
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			for i := range 500 {
				in := g*1000 + i
				out, err := c.do(in)
				require.NoError(t, err)
				require.Equal(t, -in, out)
			}
		})
	}
	wg.Wait()
}

// TestCoalescerAwaitsReturns checks that the calls of a batch that come
// back at once (Dones, whose workers call Get next) run together in the
// next batch instead of the first of them alone, that a returning call
// that does not come back delays the next batch by returnYields yields
// only, and that without returning calls no batch yields.
func TestCoalescerAwaitsReturns(t *testing.T) {
	tests := []struct {
		name string
		// Call 0 runs the first batch alone; waiting come meanwhile.
		waiting []int
		// returning are the calls the coalescer expects back; back those
		// that come back, as call id+10 (not returning), at once.
		returning, back []int
		batches         [][]int // each sorted
		yields          int
	}{
		{name: "returning calls come back to one batch", waiting: []int{1, 2, 3}, returning: []int{2, 3}, back: []int{2, 3},
			batches: [][]int{{0}, {1, 2, 3}, {12, 13}}, yields: 1},
		{name: "a returning call that does not come back", waiting: []int{1, 2}, returning: []int{2},
			batches: [][]int{{0}, {1, 2}}, yields: returnYields},
		{name: "no returning calls", waiting: []int{1, 2}, back: []int{2},
			batches: [][]int{{0}, {1, 2}, {12}}, yields: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var mu sync.Mutex
				var batches [][]int
				release := make(chan struct{})
				c := newCoalescer(maxBatch, func(ins []int) ([]int, error) {
					mu.Lock()
					first := len(batches) == 0
					batches = append(batches, slices.Sorted(slices.Values(ins)))
					mu.Unlock()
					if first {
						<-release
					}
					return ins, nil
				})
				c.returns = func(in int) bool { return slices.Contains(tt.returning, in) }
				yields := 0
				c.yield = func() {
					yields++
					synctest.Wait() // every other call has come back, or never will
				}
				var wg sync.WaitGroup
				call := func(in int) {
					wg.Go(func() {
						out, err := c.do(in)
						require.NoError(t, err)
						require.Equal(t, in, out)
						if slices.Contains(tt.back, in) {
							out, err = c.do(in + 10)
							require.NoError(t, err)
							require.Equal(t, in+10, out)
						}
					})
				}
				call(0)
				synctest.Wait()
				for _, in := range tt.waiting {
					call(in)
					synctest.Wait()
				}
				close(release)
				wg.Wait()
				assert.Equal(t, tt.batches, batches)
				assert.Equal(t, tt.yields, yields, "yields")
				assert.False(t, c.running, "a batch still marked running")
				assert.Empty(t, c.waiting)
			})
		})
	}
}
