package redisqueue

import (
	"errors"
	"fmt"
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
