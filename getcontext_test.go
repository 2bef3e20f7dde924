package workqueue

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// contextQueue is what the GetContext tests need of each layer.
type contextQueue interface {
	TypedInterface[string]
	GetContext(ctx context.Context) (string, error)
}

// contextLayers builds each layer of this package, so that every test runs
// on all of them.
var contextLayers = []struct {
	name string
	new  func() contextQueue
}{
	{"queue", func() contextQueue { return NewTyped[string]() }},
	{"delaying", func() contextQueue { return NewTypedDelayingQueue[string]() }},
	{"rate-limiting", func() contextQueue {
		return NewTypedRateLimitingQueue(DefaultTypedControllerRateLimiter[string]())
	}},
}

// getResult is what a GetContext call returned.
type getResult struct {
	item string
	err  error
}

// goGetContext calls q.GetContext(ctx) in a new goroutine, which sends the
// result on the returned channel.
func goGetContext(q contextGetter[string], ctx context.Context) <-chan getResult {
	out := make(chan getResult, 1)
	go func() {
		item, err := q.GetContext(ctx)
		out <- getResult{item, err}
	}()
	return out
}

func TestGetContext(t *testing.T) {
	tests := []struct {
		name string
		// setup prepares the queue and returns the context to call with,
		// and what to do once the call is asleep.
		setup    func(q contextQueue) (context.Context, func())
		wantItem string
		wantErr  error
		wantLen  int
	}{
		{"an item is queued", func(q contextQueue) (context.Context, func()) {
			q.Add("a")
			return context.Background(), func() {}
		}, "a", nil, 0},
		{"an item is added while it waits", func(q contextQueue) (context.Context, func()) {
			return context.Background(), func() { q.Add("a") }
		}, "a", nil, 0},
		{"the context has ended already, with an item queued", func(q contextQueue) (context.Context, func()) {
			q.Add("a")
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			return ctx, func() {}
		}, "", context.Canceled, 1},
		{"the context is cancelled while it waits", func(q contextQueue) (context.Context, func()) {
			ctx, cancel := context.WithCancel(context.Background())
			return ctx, cancel
		}, "", context.Canceled, 0},
		{"the deadline passes while it waits", func(q contextQueue) (context.Context, func()) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			return ctx, func() {
				time.Sleep(time.Second)
				synctest.Wait() // the call has returned
				cancel()
			}
		}, "", context.DeadlineExceeded, 0},
		{"shut down while it waits", func(q contextQueue) (context.Context, func()) {
			return context.Background(), q.ShutDown
		}, "", ErrShutDown, 0},
		{"shut down with an item queued", func(q contextQueue) (context.Context, func()) {
			q.Add("a")
			q.ShutDown()
			return context.Background(), func() {}
		}, "a", nil, 0},
	}
	for _, layer := range contextLayers {
		for _, tt := range tests {
			t.Run(layer.name+"/"+tt.name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					q := layer.new()
					defer q.ShutDown()
					ctx, whileAsleep := tt.setup(q)
					out := goGetContext(q, ctx)
					synctest.Wait()
					whileAsleep()
					got := <-out
					assert.Equal(t, tt.wantItem, got.item)
					assert.ErrorIs(t, got.err, tt.wantErr)
					assert.Equal(t, tt.wantLen, q.Len())
				})
			})
		}
	}
}

// TestGetContextPassesOnItsWakeup wakes a GetContext caller with an add
// and ends its context, both while the test holds the queue's lock, so the
// caller sees both when it gets the lock. Whichever its select chose, the
// item is handed out once, and never left queued while a Get caller
// sleeps: a caller whose context won passes the wakeup on.
func TestGetContextPassesOnItsWakeup(t *testing.T) {
	tests := []struct {
		name string
		// cancelFirst ends the context before the add; the select of the
		// sleeping caller then picks the context.
		cancelFirst bool
		wantFirst   error
	}{
		{"woken, then the context ends", false, nil},
		{"the context ends, then woken", true, context.Canceled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				q := NewTyped[string]()
				defer q.ShutDown()
				ctx, cancel := context.WithCancel(context.Background())
				first := make(chan error, 1)
				go func() {
					item, err := q.GetContext(ctx)
					if err == nil {
						q.Done(item)
					}
					first <- err
				}()
				synctest.Wait()
				second := make(chan string, 1)
				go func() {
					item, _ := q.Get()
					second <- item
				}()
				synctest.Wait()
				q.core.mu.Lock()
				if tt.cancelFirst {
					cancel()
				}
				q.addLocked("x", q.core.items.Hash("x")) // wakes the first caller
				cancel()
				q.core.mu.Unlock()
				synctest.Wait()
				require.ErrorIs(t, <-first, tt.wantFirst)
				select {
				case item := <-second:
					require.NotNil(t, tt.wantFirst, "both callers got %q", item)
					require.Equal(t, "x", item)
				default:
					require.Nil(t, tt.wantFirst, "x left queued (Len %d) while a Get caller sleeps", q.Len())
				}
				require.NoError(t, verifyQueue(q))
			})
		})
	}
}

// TestGetContextStress runs producers of distinct items against consumers
// whose contexts end at random, then drains: every item must be handed out
// exactly once, and the queue's invariant hold at the end.
func TestGetContextStress(t *testing.T) {
	const producers, consumers, perProducer = 4, 6, 2000
	for _, layer := range contextLayers {
		t.Run(layer.name, func(t *testing.T) {
			q := layer.new()
			var mu sync.Mutex
			got := map[int]int{}
			var consumersDone sync.WaitGroup
			for c := range consumers {
				consumersDone.Go(func() {
					rng := rand.New(rand.NewPCG(uint64(c), 1))
					for {
						ctx, cancel := context.WithTimeout(context.Background(), time.Duration(rng.IntN(20))*time.Microsecond)
						item, err := q.GetContext(ctx)
						cancel()
						switch {
						case errors.Is(err, ErrShutDown):
							return
						case err != nil:
							continue
						}
						n, _ := strconv.Atoi(item)
						mu.Lock()
						got[n]++
						mu.Unlock()
						q.Done(item)
					}
				})
			}
			var producersDone sync.WaitGroup
			for p := range producers {
				producersDone.Go(func() {
					for i := p * perProducer; i < (p+1)*perProducer; i++ {
						q.Add(strconv.Itoa(i))
					}
				})
			}
			producersDone.Wait()
			q.ShutDownWithDrain()
			consumersDone.Wait()
			require.Len(t, got, producers*perProducer)
			for n, times := range got {
				require.Equalf(t, 1, times, "item %d handed out %d times", n, times)
			}
			if typed, ok := q.(*Typed[string]); ok {
				require.NoError(t, verifyQueue(typed))
			}
		})
	}
}

// TestGetContextUnsupported checks the outcome on a layer over a queue from
// outside this package that has no GetContext: an error, not a hang.
func TestGetContextUnsupported(t *testing.T) {
	q := NewTypedDelayingQueueWithConfig(TypedDelayingQueueConfig[string]{Queue: foreignQueue{NewTyped[string]()}})
	defer q.ShutDown()
	q.Add("a")
	_, err := q.GetContext(context.Background())
	assert.ErrorIs(t, err, errors.ErrUnsupported)
	assert.Equal(t, 1, q.Len(), "the item stays queued")
	assert.False(t, q.Remove("a"), "a foreign queue without Remove keeps its items")
}

// foreignQueue hides every method of the queue it wraps beyond
// TypedInterface, as a queue from outside this package would.
type foreignQueue struct{ TypedInterface[string] }
