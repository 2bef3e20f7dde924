package redisqueue

import (
	"runtime"
	"sync"
)

// maxBatch bounds the calls one call serves, so that one call stays
// short (Redis runs nothing else meanwhile) and its reply small.
const maxBatch = 256

// coalescer runs concurrent calls of one kind in batches, one call a
// batch, as go-redis's pipelines do for commands: a call that finds no
// batch running runs one at once; calls that come while a batch runs wait
// for it to end, and the first of them then runs the next batch with all
// of them, up to max. So a caller alone sends one call, and n callers
// at once send about two instead of n. Each call returns only
// when its own batch has run, with that batch's result: a caller is never
// acknowledged before Redis has its call.
//
// With returns set, a batch that ends with calls that come back at once
// waits for them a little before the next batch starts (see
// awaitReturns), so that they join it rather than run in a batch of
// their own.
//
// A batch runs on the goroutine of one of its calls: no goroutine waits
// for work, and a call runs at most one batch, its own.
type coalescer[In, Out any] struct {
	max int
	// run runs one batch; on success it returns one Out for each In, in
	// order. Its error is every call's.
	run func(ins []In) ([]Out, error)

	// returns, if set, tells the calls that come back at once when they
	// return (a worker's Done, followed by its next Get); yield lets
	// other goroutines run (runtime.Gosched). See awaitReturns.
	returns func(In) bool
	yield   func()

	mu      sync.Mutex
	running bool                      // a batch runs; its calls are out of waiting
	waiting []*coalescedCall[In, Out] // calls for the next batches, in arrival order
}

type coalescedCall[In, Out any] struct {
	in  In
	out Out
	err error
	// turn receives true when this call is to run the next batch, false
	// when another call's batch ran this one (out and err are set).
	turn chan bool
}

func newCoalescer[In, Out any](max int, run func([]In) ([]Out, error)) *coalescer[In, Out] {
	return &coalescer[In, Out]{max: max, run: run, yield: runtime.Gosched}
}

// returnYields bounds how many times the call that ran a batch yields
// for the batch's returning calls to come back (see awaitReturns).
const returnYields = 20

// awaitReturns is called by call, which ran batch, with c.mu held, before
// the next batch starts. Without it, the first of the batch's returning
// calls to come back finds no batch running and runs one alone, while
// the others come back behind it. So while fewer calls wait than those
// waiting before plus the batch's returning calls other than call
// (which cannot be back before this returns), up to max, it yields, at
// most returnYields times: a returning call is usually runnable already
// and joins the waiting calls within a yield or two. A returning call
// that does not come back delays the next batch by the yields only.
func (c *coalescer[In, Out]) awaitReturns(batch []*coalescedCall[In, Out], call *coalescedCall[In, Out]) {
	if c.returns == nil {
		return
	}
	want := len(c.waiting)
	for _, b := range batch {
		if b != call && c.returns(b.in) {
			want++
		}
	}
	want = min(want, c.max)
	for range returnYields {
		if len(c.waiting) >= want {
			return
		}
		c.mu.Unlock()
		c.yield()
		c.mu.Lock()
	}
}

// do runs in with the next batch and returns its result.
func (c *coalescer[In, Out]) do(in In) (Out, error) {
	call := &coalescedCall[In, Out]{in: in, turn: make(chan bool, 1)}
	c.mu.Lock()
	c.waiting = append(c.waiting, call)
	if c.running {
		c.mu.Unlock()
		if !<-call.turn {
			return call.out, call.err
		}
		c.mu.Lock()
	}
	// This call is first in waiting: the batch is the first max calls.
	c.running = true
	n := min(len(c.waiting), c.max)
	batch := make([]*coalescedCall[In, Out], n)
	copy(batch, c.waiting)
	c.waiting = append(c.waiting[:0], c.waiting[n:]...)
	c.mu.Unlock()

	ins := make([]In, n)
	for i, b := range batch {
		ins[i] = b.in
	}
	outs, err := c.run(ins)
	for i, b := range batch {
		if err == nil {
			b.out = outs[i]
		}
		b.err = err
		if b != call {
			b.turn <- false
		}
	}

	c.mu.Lock()
	c.awaitReturns(batch, call)
	if len(c.waiting) > 0 {
		c.waiting[0].turn <- true
	} else {
		c.running = false
	}
	c.mu.Unlock()
	return call.out, call.err
}
