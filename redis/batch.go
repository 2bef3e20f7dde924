package redisqueue

import "sync"

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
// A batch runs on the goroutine of one of its calls: no goroutine waits
// for work, and a call runs at most one batch, its own.
type coalescer[In, Out any] struct {
	max int
	// run runs one batch; on success it returns one Out for each In, in
	// order. Its error is every call's.
	run func(ins []In) ([]Out, error)

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
	return &coalescer[In, Out]{max: max, run: run}
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
	if len(c.waiting) > 0 {
		c.waiting[0].turn <- true
	} else {
		c.running = false
	}
	c.mu.Unlock()
	return call.out, call.err
}
