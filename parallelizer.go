package workqueue

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
)

// DoWorkPieceFunc does one piece; [ParallelizeUntil] calls it concurrently.
type DoWorkPieceFunc func(piece int)

type options struct {
	chunkSize int
}

// Options configures [ParallelizeUntil], which panics on a nil one.
type Options func(*options)

// WithChunkSize makes each worker take c pieces at a time; below 1 means 1.
func WithChunkSize(c int) func(*options) {
	return func(o *options) {
		o.chunkSize = c
	}
}

// ParallelizeUntil calls doWorkPiece for each piece in [0, pieces) on up to
// workers goroutines, the caller's among them, none once ctx is done (a nil
// ctx never is) or a piece panicked (the panic is raised again). It panics if
// pieces < 0 or, with pieces to do, workers < 1 or a func or option is nil.
func ParallelizeUntil(ctx context.Context, workers, pieces int, doWorkPiece DoWorkPieceFunc, opts ...Options) {
	if pieces < 0 {
		panic(fmt.Sprintf("workqueue: ParallelizeUntil needs a non-negative number of pieces, got %d", pieces))
	}
	if pieces == 0 {
		return
	}
	if workers < 1 {
		panic(fmt.Sprintf("workqueue: ParallelizeUntil needs at least one worker for %d pieces, got %d", pieces, workers))
	}
	if doWorkPiece == nil {
		panic("workqueue: ParallelizeUntil needs a work function, got nil")
	}
	var o options
	for i, opt := range opts {
		if opt == nil {
			panic(fmt.Sprintf("workqueue: ParallelizeUntil got a nil option at position %d", i))
		}
		opt(&o)
	}
	chunkSize := max(o.chunkSize, 1)
	chunks := (pieces-1)/chunkSize + 1
	workers = min(workers, chunks)

	var done <-chan struct{}
	if ctx != nil {
		done = ctx.Done()
	}
	p := parallelRun{done: done, doWorkPiece: doWorkPiece, pieces: pieces, chunkSize: chunkSize, chunks: int64(chunks)}
	var wg sync.WaitGroup
	for range workers - 1 {
		wg.Go(p.work)
	}
	p.work()
	wg.Wait()
	if p.panicked.Load() {
		panic(p.panicValue)
	}
}

// parallelRun hands out chunks through an atomic counter.
type parallelRun struct {
	done        <-chan struct{}
	doWorkPiece DoWorkPieceFunc
	pieces      int
	chunkSize   int
	chunks      int64

	nextChunk  atomic.Int64
	panicked   atomic.Bool
	panicOnce  sync.Once
	panicValue any
}

func (p *parallelRun) work() {
	defer func() {
		if r := recover(); r != nil {
			p.panicOnce.Do(func() { p.panicValue = r })
			p.panicked.Store(true)
		}
	}()
	for {
		chunk := p.nextChunk.Add(1) - 1
		if chunk >= p.chunks {
			return
		}
		start := int(chunk) * p.chunkSize
		end := min(start+p.chunkSize, p.pieces)
		for piece := start; piece < end; piece++ {
			if p.stopped() {
				return
			}
			p.doWorkPiece(piece)
		}
	}
}

func (p *parallelRun) stopped() bool {
	if p.panicked.Load() {
		return true
	}
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}
