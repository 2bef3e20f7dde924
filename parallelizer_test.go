package workqueue

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestParallelizeUntilDoesEveryPieceOnce(t *testing.T) {
	tests := []struct {
		workers, pieces, chunkSize int
	}{
		{1, 1, 0}, {1, 100, 1}, {4, 100, 1}, {4, 100, 7}, {16, 3, 1}, {3, 1000, 1000}, {8, 1001, 10}, {2, 5, -3},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("workers=%d/pieces=%d/chunk=%d", tt.workers, tt.pieces, tt.chunkSize), func(t *testing.T) {
			counts := make([]atomic.Int32, tt.pieces)
			ParallelizeUntil(context.Background(), tt.workers, tt.pieces, func(piece int) {
				counts[piece].Add(1)
			}, WithChunkSize(tt.chunkSize))
			for piece := range counts {
				assert.Equalf(t, int32(1), counts[piece].Load(), "piece %d", piece)
			}
		})
	}
}

func TestParallelizeUntilUsesAtMostWorkersGoroutines(t *testing.T) {
	var running, most atomic.Int32
	var mu sync.Mutex
	ParallelizeUntil(context.Background(), 3, 300, func(int) {
		n := running.Add(1)
		mu.Lock()
		most.Store(max(most.Load(), n))
		mu.Unlock()
		running.Add(-1)
	})
	assert.LessOrEqual(t, most.Load(), int32(3))
}

func TestParallelizeUntilStopsWhenContextIsDone(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var calls atomic.Int32
	ParallelizeUntil(ctx, 4, 100, func(int) { calls.Add(1) })
	assert.Zero(t, calls.Load(), "pieces ran after the context was done")

	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	calls.Store(0)
	ParallelizeUntil(ctx, 1, 100, func(piece int) {
		calls.Add(1)
		if piece == 9 {
			cancel()
		}
	})
	assert.Equal(t, int32(10), calls.Load(), "one worker stops right after the cancelling piece")
}

func TestParallelizeUntilNilContext(t *testing.T) {
	var calls atomic.Int32
	//lint:ignore SA1012 a nil context is accepted, as in client-go
	ParallelizeUntil(nil, 2, 10, func(int) { calls.Add(1) }) //nolint:staticcheck
	assert.Equal(t, int32(10), calls.Load())
}

func TestParallelizeUntilBadInput(t *testing.T) {
	never := func(int) { t.Error("a piece ran") }
	assert.NotPanics(t, func() { ParallelizeUntil(context.Background(), 0, 0, never) }, "no pieces need no workers")
	assert.NotPanics(t, func() { ParallelizeUntil(context.Background(), -1, 0, never) })
	assert.PanicsWithValue(t, "workqueue: ParallelizeUntil needs at least one worker for 5 pieces, got 0",
		func() { ParallelizeUntil(context.Background(), 0, 5, never) })
	assert.PanicsWithValue(t, "workqueue: ParallelizeUntil needs at least one worker for 5 pieces, got -2",
		func() { ParallelizeUntil(context.Background(), -2, 5, never) })
	assert.PanicsWithValue(t, "workqueue: ParallelizeUntil needs a non-negative number of pieces, got -1",
		func() { ParallelizeUntil(context.Background(), 1, -1, never) })
}

func TestParallelizeUntilPanicReachesCaller(t *testing.T) {
	tests := []struct {
		name    string
		workers int
		panicAt int
		// waits: every other piece waits for the panicking one to start,
		// then sleeps a millisecond of the bubble's time, which passes
		// only once every other goroutine is blocked: the panic has been
		// recorded by then, so no further piece may start.
		waits bool
		// calls is how many pieces may start at most.
		calls int32
	}{
		{name: "one worker runs the pieces before the panic", workers: 1, panicAt: 3, calls: 4},
		{name: "the other workers stop", workers: 2, panicAt: 0, waits: true, calls: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var calls atomic.Int32
				panicking := make(chan struct{})
				assert.PanicsWithValue(t, "boom", func() {
					ParallelizeUntil(context.Background(), tt.workers, 1000, func(piece int) {
						calls.Add(1)
						if piece == tt.panicAt {
							close(panicking)
							panic("boom")
						}
						if tt.waits {
							<-panicking
							time.Sleep(time.Millisecond)
						}
					})
				})
				assert.LessOrEqual(t, calls.Load(), tt.calls, "pieces started")
				if tt.workers == 1 {
					assert.Equal(t, tt.calls, calls.Load(), "pieces started")
				}
			})
		})
	}
}
