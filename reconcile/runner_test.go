package reconcile

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-workqueue/workqueue"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// runnerRun is what a Runner did with one item on the bubble's clock.
type runnerRun struct {
	attempts    []time.Duration // start of each reconcile, since the item was added
	deadLetters []error
	numRequeues int // after everything settled
	log         string
}

// runOneItem runs a Runner with one worker over a single item "a" in a
// synctest bubble, on a queue whose limiter waits 1 s, 2 s, 4 s, ... (at most
// a minute) between failures, until nothing has happened for an hour. It
// must be called inside synctest.Test.
func runOneItem(t *testing.T, reconcile func(ctx context.Context, attempt int) (Result, error), opts ...Option) runnerRun {
	var out runnerRun
	var logs bytes.Buffer
	q := workqueue.NewTypedRateLimitingQueue(workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Second, time.Minute))
	start := time.Now()
	opts = append(opts, WithLogger(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	opts = append(opts, WithDeadLetter(func(item string, err error) {
		assert.Equal(t, "a", item)
		out.deadLetters = append(out.deadLetters, err)
	}))
	runner := NewRunner(q, func(ctx context.Context, item string) (Result, error) {
		out.attempts = append(out.attempts, time.Since(start))
		return reconcile(ctx, len(out.attempts))
	}, opts...)

	ctx, cancel := context.WithCancel(t.Context())
	exited := make(chan struct{})
	go func() {
		runner.Run(ctx, 1)
		close(exited)
	}()
	q.Add("a")
	time.Sleep(time.Hour)
	synctest.Wait()
	out.numRequeues = q.NumRequeues("a")
	cancel()
	<-exited
	out.log = logs.String()
	return out
}

func seconds(s ...float64) []time.Duration {
	d := make([]time.Duration, len(s))
	for i, v := range s {
		d[i] = time.Duration(v * float64(time.Second))
	}
	return d
}

// failFirst returns a reconcile that fails its first n attempts with err.
func failFirst(n int, err error) func(context.Context, int) (Result, error) {
	return func(_ context.Context, attempt int) (Result, error) {
		if attempt <= n {
			return Result{}, err
		}
		return Result{}, nil
	}
}

func TestRunnerOutcomes(t *testing.T) {
	errBoom := errors.New("boom")
	tests := []struct {
		name            string
		reconcile       func(ctx context.Context, attempt int) (Result, error)
		opts            []Option
		wantAttempts    []time.Duration
		wantDeadLetters []error // matched with errors.Is
		wantLog         string
	}{
		{
			name:         "success forgets the item",
			reconcile:    failFirst(0, nil),
			wantAttempts: seconds(0),
		},
		{
			name:         "errors are retried with backoff until success",
			reconcile:    failFirst(3, errBoom),
			wantAttempts: seconds(0, 1, 3, 7),
			wantLog:      `level=DEBUG msg="workqueue: reconcile failed, will retry" item=a error=boom failures=3`,
		},
		{
			name:            "max retries 0 never retries",
			reconcile:       failFirst(100, errBoom),
			opts:            []Option{WithMaxRetries(0)},
			wantAttempts:    seconds(0),
			wantDeadLetters: []error{errBoom},
			wantLog:         `level=ERROR msg="workqueue: reconcile failed, giving up"`,
		},
		{
			name:            "max retries 2 reconciles three times, then gives up",
			reconcile:       failFirst(100, errBoom),
			opts:            []Option{WithMaxRetries(2)},
			wantAttempts:    seconds(0, 1, 3),
			wantDeadLetters: []error{errBoom},
		},
		{
			name:         "max retries 2 is enough when the third try succeeds",
			reconcile:    failFirst(2, errBoom),
			opts:         []Option{WithMaxRetries(2)},
			wantAttempts: seconds(0, 1, 3),
		},
		{
			name:         "unlimited retries keep going, backoff capped",
			reconcile:    failFirst(9, errBoom),
			opts:         []Option{WithMaxRetries(UnlimitedRetries)},
			wantAttempts: seconds(0, 1, 3, 7, 15, 31, 63, 123, 183, 243),
		},
		{
			name:            "terminal error is never retried",
			reconcile:       failFirst(100, TerminalError(fmt.Errorf("bad spec: %w", errBoom))),
			wantAttempts:    seconds(0),
			wantDeadLetters: []error{errBoom},
			wantLog:         "terminal=true",
		},
		{
			name: "panic is recovered and retried",
			reconcile: func(_ context.Context, attempt int) (Result, error) {
				if attempt == 1 {
					panic("nil map")
				}
				return Result{}, nil
			},
			wantAttempts: seconds(0, 1),
			wantLog:      `level=ERROR msg="workqueue: reconcile panicked"`,
		},
		{
			name: "panic counts towards max retries",
			reconcile: func(context.Context, int) (Result, error) {
				panic("always")
			},
			opts:         []Option{WithMaxRetries(1)},
			wantAttempts: seconds(0, 1),
			// The dead letter carries a *PanicError; checked in its own test.
			wantDeadLetters: []error{nil},
		},
		{
			name: "RequeueAfter rechecks later without counting a failure",
			reconcile: func(_ context.Context, attempt int) (Result, error) {
				if attempt <= 2 {
					return Result{RequeueAfter: 10 * time.Second}, nil
				}
				return Result{}, nil
			},
			opts:         []Option{WithMaxRetries(0)},
			wantAttempts: seconds(0, 10, 20),
		},
		{
			name: "RequeueAfter wins over Requeue",
			reconcile: func(_ context.Context, attempt int) (Result, error) {
				if attempt == 1 {
					return Result{RequeueAfter: 30 * time.Second, Requeue: true}, nil
				}
				return Result{}, nil
			},
			wantAttempts: seconds(0, 30),
		},
		{
			name: "negative RequeueAfter is no requeue",
			reconcile: func(context.Context, int) (Result, error) {
				return Result{RequeueAfter: -time.Second}, nil
			},
			wantAttempts: seconds(0),
		},
		{
			name: "Requeue backs off without using up retries",
			reconcile: func(_ context.Context, attempt int) (Result, error) {
				if attempt <= 3 {
					return Result{Requeue: true}, nil
				}
				return Result{}, nil
			},
			opts:         []Option{WithMaxRetries(0)},
			wantAttempts: seconds(0, 1, 3, 7),
		},
		{
			name: "an error after a successful poll starts its retry count afresh",
			reconcile: func(_ context.Context, attempt int) (Result, error) {
				switch attempt {
				case 1:
					return Result{}, errBoom
				case 2:
					return Result{Requeue: true}, nil
				case 3:
					return Result{}, errBoom
				}
				return Result{}, nil
			},
			opts: []Option{WithMaxRetries(1)},
			// The limiter's backoff is shared, the Runner's retry count is not.
			wantAttempts: seconds(0, 1, 3, 7),
		},
		{
			name: "item timeout cancels the reconcile's context",
			reconcile: func(ctx context.Context, attempt int) (Result, error) {
				if attempt == 1 {
					<-ctx.Done()
					return Result{}, ctx.Err()
				}
				_, hasDeadline := ctx.Deadline()
				if !hasDeadline {
					return Result{}, errors.New("no deadline")
				}
				return Result{}, nil
			},
			opts: []Option{WithItemTimeout(5 * time.Second)},
			// The first try ends at 5 s, and its retry comes 1 s later.
			wantAttempts: seconds(0, 6),
		},
		{
			name: "item timeout failure reaches the dead letter",
			reconcile: func(ctx context.Context, _ int) (Result, error) {
				<-ctx.Done()
				return Result{}, ctx.Err()
			},
			opts:            []Option{WithItemTimeout(time.Second), WithMaxRetries(0)},
			wantAttempts:    seconds(0),
			wantDeadLetters: []error{context.DeadlineExceeded},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				got := runOneItem(t, tt.reconcile, tt.opts...)
				assert.Equal(t, tt.wantAttempts, got.attempts)
				require.Len(t, got.deadLetters, len(tt.wantDeadLetters))
				for i, want := range tt.wantDeadLetters {
					if want != nil {
						assert.ErrorIs(t, got.deadLetters[i], want)
					} else {
						assert.Error(t, got.deadLetters[i])
					}
				}
				assert.Zero(t, got.numRequeues, "the item's backoff is forgotten when it settles")
				assert.Contains(t, got.log, tt.wantLog)
			})
		})
	}
}

func TestRunnerPanicErrorCarriesValueAndStack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		got := runOneItem(t, func(context.Context, int) (Result, error) {
			panic("index out of range")
		}, WithMaxRetries(0))
		require.Len(t, got.deadLetters, 1)
		var panicErr *PanicError
		require.ErrorAs(t, got.deadLetters[0], &panicErr)
		assert.Equal(t, "index out of range", panicErr.Value)
		assert.Contains(t, string(panicErr.Stack), "runner_test.go")
		assert.Equal(t, "reconcile panicked: index out of range", panicErr.Error())
		assert.Contains(t, got.log, "level=ERROR msg=\"workqueue: reconcile panicked\" item=a panic=\"index out of range\"")
	})
}

func TestTerminalError(t *testing.T) {
	cause := errors.New("cause")
	tests := []struct {
		name         string
		err          error
		wantTerminal bool
	}{
		{"nil", nil, false},
		{"plain", cause, false},
		{"marked", TerminalError(cause), true},
		{"marked, then wrapped", fmt.Errorf("sync: %w", TerminalError(cause)), true},
		{"joined", errors.Join(cause, TerminalError(cause)), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.wantTerminal, IsTerminal(tt.err))
			if tt.err != nil {
				assert.ErrorIs(t, tt.err, cause)
			}
		})
	}
	assert.NoError(t, TerminalError(nil))
	assert.Equal(t, "cause", TerminalError(cause).Error())
}

// startRunner runs runner in a goroutine and returns a channel closed when
// Run returns.
func startRunner[T comparable](ctx context.Context, runner *Runner[T], workers int) <-chan struct{} {
	exited := make(chan struct{})
	go func() {
		runner.Run(ctx, workers)
		close(exited)
	}()
	return exited
}

// TestRunnerWithDrainReconcilesTheBacklog checks WithDrain: cancelling Run
// reconciles every queued item first, under contexts that stay alive.
func TestRunnerWithDrainReconcilesTheBacklog(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[int]())
		var reconciled atomic.Int32
		var cancelledSeen atomic.Bool
		runner := NewRunner(q, func(ctx context.Context, item int) (Result, error) {
			time.Sleep(time.Second)
			if ctx.Err() != nil {
				cancelledSeen.Store(true)
			}
			reconciled.Add(1)
			return Result{}, nil
		}, WithDrain())
		ctx, cancel := context.WithCancel(t.Context())
		exited := startRunner(ctx, runner, 4)
		for i := range 100 {
			q.Add(i)
		}
		start := time.Now()
		cancel()
		<-exited
		assert.Equal(t, int32(100), reconciled.Load(), "every queued item is reconciled before Run returns")
		assert.Equal(t, 25*time.Second, time.Since(start), "4 workers, 100 items of 1 s")
		assert.False(t, cancelledSeen.Load(), "cancelling Run does not cancel the work in progress")
		assert.True(t, q.ShuttingDown())
	})
}

func TestRunnerReturnsWhenQueueShutsDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())
		runner := NewRunner(q, func(context.Context, string) (Result, error) { return Result{}, nil })
		exited := startRunner(t.Context(), runner, 3)
		q.ShutDown()
		<-exited
	})
}

func TestRunnerDropsRetriesDuringDrain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs bytes.Buffer
		q := workqueue.NewTypedRateLimitingQueue(workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Second, time.Minute))
		var attempts atomic.Int32
		deadLetters := 0
		runner := NewRunner(q, func(context.Context, string) (Result, error) {
			attempts.Add(1)
			time.Sleep(time.Second)
			return Result{}, errors.New("boom")
		}, WithDeadLetter(func(string, error) { deadLetters++ }),
			WithDrain(), WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
		ctx, cancel := context.WithCancel(t.Context())
		exited := startRunner(ctx, runner, 1)
		q.Add("a")
		synctest.Wait() // "a" is being reconciled
		cancel()
		<-exited
		assert.Equal(t, int32(1), attempts.Load())
		assert.Zero(t, deadLetters, "a dropped retry is not a dead letter")
		assert.Contains(t, logs.String(), "retry dropped")
		assert.Empty(t, runner.failures, "the Runner forgets the dropped item")
	})
}

func TestRunnerNeverReconcilesAnItemTwiceAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := workqueue.NewTypedRateLimitingQueue(workqueue.NewTypedItemExponentialFailureRateLimiter[int](time.Millisecond, time.Second))
		var mu sync.Mutex
		inFlight := map[int]bool{}
		reconciles := map[int]int{}
		runner := NewRunner(q, func(_ context.Context, item int) (Result, error) {
			mu.Lock()
			assert.False(t, inFlight[item], "item %d reconciled by two workers at once", item)
			inFlight[item] = true
			reconciles[item]++
			n := reconciles[item]
			mu.Unlock()
			time.Sleep(time.Duration(item%7) * time.Millisecond)
			mu.Lock()
			inFlight[item] = false
			mu.Unlock()
			if n%3 == 0 {
				return Result{}, errors.New("every third try fails")
			}
			return Result{}, nil
		}, WithLogger(slog.New(slog.DiscardHandler)))
		ctx, cancel := context.WithCancel(t.Context())
		exited := startRunner(ctx, runner, 8)
		var producers sync.WaitGroup
		for p := range 4 {
			producers.Go(func() {
				for i := range 1000 {
					q.Add((p*1000 + i) % 50)
					if i%10 == 0 {
						time.Sleep(time.Millisecond)
					}
				}
			})
		}
		producers.Wait()
		time.Sleep(time.Minute)
		cancel()
		<-exited
		for item := range 50 {
			assert.Positive(t, reconciles[item], "item %d", item)
			assert.NotZero(t, reconciles[item]%3, "item %d ended on a failure that was never retried", item)
		}
	})
}

func TestRunnerMisuse(t *testing.T) {
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())
	defer q.ShutDown()
	ok := func(context.Context, string) (Result, error) { return Result{}, nil }
	tests := []struct {
		name      string
		construct func()
		want      string
	}{
		{"nil queue", func() { NewRunner(nil, ok) }, "workqueue: NewRunner needs a queue, got nil"},
		{"nil reconcile", func() { NewRunner(q, nil) }, "workqueue: NewRunner needs a reconcile function, got nil"},
		{"max retries -2", func() { NewRunner(q, ok, WithMaxRetries(-2)) }, "workqueue: WithMaxRetries(-2): want -1 (unlimited) or more"},
		{"negative timeout", func() { NewRunner(q, ok, WithItemTimeout(-time.Second)) }, "workqueue: WithItemTimeout(-1s): negative timeout"},
		{"negative grace period", func() { NewRunner(q, ok, WithGracePeriod(-time.Second)) }, "workqueue: WithGracePeriod(-1s): negative grace period"},
		{"dead letter of another item type", func() { NewRunner(q, ok, WithDeadLetter(func(int, error) {})) },
			"workqueue: WithDeadLetter: a func(int, error) for a Runner of string items"},
		{"zero workers", func() { NewRunner(q, ok).Run(context.Background(), 0) }, "workqueue: Run needs at least one worker, got 0"},
		{"nil option", func() { NewRunner(q, ok, WithMaxRetries(1), nil) }, "workqueue: NewRunner got a nil option at position 1"},
		{"Run on a zero Runner", func() { new(Runner[string]).Run(context.Background(), 1) },
			"workqueue: Run on a zero Runner; make one with NewRunner"},
		{"Run on a nil Runner", func() { (*Runner[string])(nil).Run(context.Background(), 1) },
			"workqueue: Run on a zero Runner; make one with NewRunner"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.PanicsWithValue(t, tt.want, tt.construct)
		})
	}
	assert.NotPanics(t, func() { NewRunner(q, ok, WithLogger(nil), WithMaxRetries(0), WithItemTimeout(0)) })
	assert.NotPanics(t, func() { NewRunner(q, ok, WithDeadLetter[string](nil), WithMaxRetries(0)) }, "a nil dead letter means none")
}

// TestRunnerOptionsCompileForEveryItemType type-checks small programs
// against this package: a dead letter of the queue's item type compiles,
// and one option value configures Runners of different item types. A dead
// letter of another item type panics at construction (TestRunnerMisuse).
func TestRunnerOptionsCompileForEveryItemType(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the go command for this package's export data")
	}
	tests := []struct {
		name    string
		body    string
		wantErr string // a substring of the type error, or "" to compile
	}{
		{
			name: "dead letter of the queue's type",
			body: `reconcile.NewRunner(strings, ok, reconcile.WithDeadLetter(func(key string, err error) {}), reconcile.WithMaxRetries(10))`,
		},
		{
			name: "one option value for Runners of two item types",
			body: `opts := []reconcile.Option{reconcile.WithMaxRetries(10), reconcile.WithItemTimeout(time.Minute)}
	reconcile.NewRunner(strings, ok, opts...)
	reconcile.NewRunner(ints, func(context.Context, int) (reconcile.Result, error) { return reconcile.Result{}, nil }, append(opts, reconcile.WithDeadLetter(func(int, error) {}))...)`,
		},
	}
	const header = `package p

import (
	"context"
	"time"

	"github.com/go-workqueue/workqueue"
	"github.com/go-workqueue/workqueue/reconcile"
)

var _ = time.Minute

func f(strings workqueue.TypedRateLimitingInterface[string], ints workqueue.TypedRateLimitingInterface[int]) {
	ok := func(context.Context, string) (reconcile.Result, error) { return reconcile.Result{}, nil }
	_ = ok
	`
	// The export data of this package and of what the programs import, as
	// the go command builds them.
	list, err := exec.Command("go", "list", "-export", "-deps", "-f", "{{.ImportPath}} {{.Export}}", ".", "context", "time").Output()
	require.NoError(t, err)
	exports := map[string]string{}
	for line := range strings.Lines(string(list)) {
		path, file, _ := strings.Cut(strings.TrimSpace(line), " ")
		exports[path] = file
	}
	lookup := func(path string) (io.ReadCloser, error) {
		if exports[path] == "" {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(exports[path])
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fset := token.NewFileSet()
			file, err := parser.ParseFile(fset, "p.go", header+tt.body+"\n}\n", 0)
			require.NoError(t, err)
			conf := types.Config{Importer: importer.ForCompiler(fset, "gc", lookup)}
			_, err = conf.Check("p", fset, []*ast.File{file}, nil)
			if tt.wantErr == "" {
				assert.NoError(t, err)
			} else {
				assert.ErrorContains(t, err, tt.wantErr)
			}
		})
	}
}

// TestRunnerRunsOnce pins that a Runner runs once: a second Run panics,
// whether the first is still running or has returned, and a Run that
// panicked on its workers argument does not use up the one run. Each case
// gets a Runner over a queue holding "a" and a context whose cancel stops
// the Run that runs; the item must be reconciled once, by that Run.
func TestRunnerRunsOnce(t *testing.T) {
	const twice = "workqueue: Run called twice on one Runner; start all its workers in one Run"
	tests := []struct {
		name string
		run  func(t *testing.T, ctx context.Context, cancel context.CancelFunc, runner *Runner[string])
	}{
		{
			name: "second Run after the first returned",
			run: func(t *testing.T, ctx context.Context, cancel context.CancelFunc, runner *Runner[string]) {
				cancel()
				runner.Run(ctx, 1)
				assert.PanicsWithValue(t, twice, func() { runner.Run(t.Context(), 1) })
			},
		},
		{
			name: "two Runs at once",
			run: func(t *testing.T, ctx context.Context, cancel context.CancelFunc, runner *Runner[string]) {
				var twices atomic.Int32
				// Should both Runs run, end them anyway: the case then
				// fails instead of hanging.
				defer time.AfterFunc(time.Hour, cancel).Stop()
				var callers sync.WaitGroup
				for range 2 {
					callers.Go(func() {
						defer func() {
							if v := recover(); v != nil {
								assert.Equal(t, twice, v)
								twices.Add(1)
								cancel() // the Run that won may stop now
							}
						}()
						runner.Run(ctx, 2)
					})
				}
				callers.Wait()
				assert.Equal(t, int32(1), twices.Load(), "exactly one of the two Runs panics")
			},
		},
		{
			name: "a Run with no workers does not count",
			run: func(t *testing.T, ctx context.Context, cancel context.CancelFunc, runner *Runner[string]) {
				assert.PanicsWithValue(t, "workqueue: Run needs at least one worker, got 0", func() { runner.Run(ctx, 0) })
				cancel()
				assert.NotPanics(t, func() { runner.Run(ctx, 1) })
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())
				var reconciled atomic.Int32
				runner := NewRunner(q, func(context.Context, string) (Result, error) {
					reconciled.Add(1)
					return Result{}, nil
				}, WithDrain())
				q.Add("a")
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				tt.run(t, ctx, cancel, runner)
				assert.Equal(t, int32(1), reconciled.Load(), "the Run that ran drained the queue")
				assert.True(t, q.ShuttingDown(), "the Run that ran shut the queue down")
			})
		})
	}
}

// observerLog records an ErrorObserver's calls, one line each.
type observerLog struct {
	mu    sync.Mutex
	calls []string
}

func (l *observerLog) record(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls = append(l.calls, fmt.Sprintf(format, args...))
}

func (l *observerLog) ObserveError(item any, err error, failures int, retrying bool) {
	l.record("error %v: %v, failures %d, retrying %t", item, err, failures, retrying)
}

func (l *observerLog) ObserveSuccess(item any) { l.record("success %v", item) }

func (l *observerLog) recorded() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.calls)
}

func TestRunnerErrorObserver(t *testing.T) {
	errBoom := errors.New("boom")
	tests := []struct {
		name      string
		reconcile func(ctx context.Context, attempt int) (Result, error)
		opts      []Option
		want      []string
	}{
		{
			name:      "a success",
			reconcile: func(context.Context, int) (Result, error) { return Result{}, nil },
			want:      []string{"success a"},
		},
		{
			name: "failures counted in a row, then a success",
			reconcile: func(_ context.Context, attempt int) (Result, error) {
				if attempt <= 2 {
					return Result{}, errBoom
				}
				return Result{}, nil
			},
			want: []string{"error a: boom, failures 1, retrying true", "error a: boom, failures 2, retrying true", "success a"},
		},
		{
			name:      "the last failure before giving up is not retried",
			reconcile: func(context.Context, int) (Result, error) { return Result{}, errBoom },
			opts:      []Option{WithMaxRetries(1)},
			want:      []string{"error a: boom, failures 1, retrying true", "error a: boom, failures 2, retrying false"},
		},
		{
			name:      "a terminal error is not retried",
			reconcile: func(context.Context, int) (Result, error) { return Result{}, TerminalError(errBoom) },
			want:      []string{"error a: boom, failures 1, retrying false"},
		},
		{
			name: "a panic is an error",
			reconcile: func(_ context.Context, attempt int) (Result, error) {
				if attempt == 1 {
					panic("nil map")
				}
				return Result{}, nil
			},
			want: []string{"error a: reconcile panicked: nil map, failures 1, retrying true", "success a"},
		},
		{
			name: "a requested requeue is a success",
			reconcile: func(_ context.Context, attempt int) (Result, error) {
				return Result{Requeue: attempt == 1}, nil
			},
			want: []string{"success a", "success a"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var first, second observerLog
				opts := append(slices.Clone(tt.opts), WithErrorObserver(&first), WithErrorObserver(nil), WithErrorObserver(&second))
				runOneItem(t, tt.reconcile, opts...)
				assert.Equal(t, tt.want, first.recorded())
				assert.Equal(t, tt.want, second.recorded(), "every observer is told")
			})
		})
	}
}

// TestRunnerErrorObserverOrder checks that an observer hears of a failure
// before the dead letter, and of a retry dropped at shutdown.
func TestRunnerErrorObserverOrder(t *testing.T) {
	for _, tt := range []struct {
		name       string
		maxRetries int
		want       []string
	}{
		{"before the dead letter", 0, []string{"error a: boom, failures 1, retrying false", "dead letter a"}},
		{"a retry dropped at shutdown", UnlimitedRetries, []string{"error a: boom, failures 1, retrying false"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var calls observerLog
				q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())
				runner := NewRunner(q, func(context.Context, string) (Result, error) {
					time.Sleep(time.Second)
					return Result{}, errors.New("boom")
				}, WithDeadLetter(func(item string, _ error) { calls.record("dead letter %s", item) }),
					WithMaxRetries(tt.maxRetries), WithDrain(), WithErrorObserver(&calls), WithLogger(slog.New(slog.DiscardHandler)))
				ctx, cancel := context.WithCancel(t.Context())
				exited := startRunner(ctx, runner, 1)
				q.Add("a")
				synctest.Wait() // "a" is being reconciled
				cancel()        // so its retry falls in the drain
				<-exited
				assert.Equal(t, tt.want, calls.recorded())
			})
		})
	}
}

// TestRunnerStopsOnCancel checks the default stop: cancelling Run's
// context hands out no more items, Run returns once the reconciles in
// flight end, and their context is cancelled when the grace period runs
// out.
func TestRunnerStopsOnCancel(t *testing.T) {
	tests := []struct {
		name     string
		opts     []Option
		work     time.Duration // how long a reconcile runs unless cancelled
		wantStop time.Duration // from the cancel to Run's return
		wantDone int32         // reconciles that ran to their end
	}{
		{"reconciles in flight finish within the grace", nil, 10 * time.Millisecond, 10 * time.Millisecond, 2},
		{"the default grace period is 10 s", nil, time.Minute, DefaultGracePeriod, 0},
		{"a grace period of 3 s", []Option{WithGracePeriod(3 * time.Second)}, time.Minute, 3 * time.Second, 0},
		{"a grace period of 0 cancels at once", []Option{WithGracePeriod(0)}, time.Minute, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[int]())
				var started, finished, cancelled atomic.Int32
				runner := NewRunner(q, func(ctx context.Context, item int) (Result, error) {
					started.Add(1)
					select {
					case <-time.After(tt.work):
						finished.Add(1)
					case <-ctx.Done():
						cancelled.Add(1)
					}
					return Result{}, nil
				}, append(tt.opts, WithLogger(slog.New(slog.DiscardHandler)))...)
				for i := range 300 {
					q.Add(i)
				}
				ctx, cancel := context.WithCancel(t.Context())
				exited := startRunner(ctx, runner, 2)
				synctest.Wait() // both workers are reconciling
				start := time.Now()
				cancel()
				<-exited
				assert.Equal(t, tt.wantStop, time.Since(start), "time to stop")
				assert.Equal(t, int32(2), started.Load(), "items handed out: those in flight at the cancel")
				assert.Equal(t, tt.wantDone, finished.Load(), "reconciles that ran to their end")
				assert.Equal(t, 2-tt.wantDone, cancelled.Load(), "reconciles whose context was cancelled")
				assert.True(t, q.ShuttingDown())
			})
		})
	}
}

// requeueRecorder is a priority queue that records the priority of each
// AddWithOpts.
type requeueRecorder struct {
	*workqueue.TypedPriorityQueue[string]
	mu         sync.Mutex
	priorities []int
}

func (r *requeueRecorder) AddWithOpts(opts workqueue.AddOpts, items ...string) {
	r.mu.Lock()
	r.priorities = append(r.priorities, *opts.Priority)
	r.mu.Unlock()
	r.TypedPriorityQueue.AddWithOpts(opts, items...)
}

// outsidePriorityQueue is a priority queue as one from outside this package
// would be (the Redis queue, say): a rate-limiting queue with the methods of
// Prioritized, which keeps each item's priority from its last AddWithOpts
// and records the priority of each.
type outsidePriorityQueue struct {
	*workqueue.TypedRateLimitingQueue[string]
	mu         sync.Mutex
	priority   map[string]int
	priorities []int
}

var _ Prioritized[string] = (*outsidePriorityQueue)(nil)

func (q *outsidePriorityQueue) AddWithOpts(opts workqueue.AddOpts, items ...string) {
	q.mu.Lock()
	for _, item := range items {
		q.priority[item] = *opts.Priority
		q.priorities = append(q.priorities, *opts.Priority)
	}
	q.mu.Unlock()
	for _, item := range items {
		switch {
		case opts.RateLimited:
			q.AddRateLimited(item)
		default:
			q.AddAfter(item, opts.After)
		}
	}
}

func (q *outsidePriorityQueue) GetWithPriorityContext(ctx context.Context) (string, int, error) {
	item, err := q.GetContext(ctx)
	q.mu.Lock()
	defer q.mu.Unlock()
	return item, q.priority[item], err
}

// TestRunnerKeepsThePriority checks that on a priority queue, this
// package's or one from outside it, a retry and a requeue keep the priority
// the item was handed out at, and that Result.Priority changes a
// requeue's.
func TestRunnerKeepsThePriority(t *testing.T) {
	low, high := -100, 7
	tests := []struct {
		name   string
		result Result
		err    error
		want   int
	}{
		{"a retry keeps the priority", Result{}, errors.New("boom"), low},
		{"a requeue keeps the priority", Result{Requeue: true}, nil, low},
		{"a timed requeue keeps the priority", Result{RequeueAfter: time.Second}, nil, low},
		{"Result.Priority sets a requeue's", Result{Requeue: true, Priority: &high}, nil, high},
		{"Result.Priority is ignored with an error", Result{Priority: &high}, errors.New("boom"), low},
	}
	limiter := func() workqueue.TypedRateLimiter[string] {
		return workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Second, time.Second)
	}
	queues := []struct {
		name string
		// make returns the queue with "a" added at priority, and the
		// priorities of the adds since.
		make func(priority int) (workqueue.TypedRateLimitingInterface[string], func() []int)
	}{
		{"TypedPriorityQueue", func(priority int) (workqueue.TypedRateLimitingInterface[string], func() []int) {
			q := &requeueRecorder{TypedPriorityQueue: workqueue.NewTypedPriorityQueue(limiter(), workqueue.TypedPriorityQueueConfig[string]{})}
			q.TypedPriorityQueue.AddWithOpts(workqueue.AddOpts{Priority: &priority}, "a")
			return q, func() []int { return q.priorities }
		}},
		{"a queue from outside the package", func(priority int) (workqueue.TypedRateLimitingInterface[string], func() []int) {
			q := &outsidePriorityQueue{TypedRateLimitingQueue: workqueue.NewTypedRateLimitingQueue(limiter()), priority: map[string]int{"a": priority}}
			q.Add("a")
			return q, func() []int { return q.priorities }
		}},
	}
	for _, queue := range queues {
		for _, tt := range tests {
			t.Run(queue.name+"/"+tt.name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					q, priorities := queue.make(low)
					var reconciles atomic.Int32
					runner := NewRunner(q, func(context.Context, string) (Result, error) {
						if reconciles.Add(1) == 1 {
							return tt.result, tt.err
						}
						return Result{}, nil
					}, WithLogger(slog.New(slog.DiscardHandler)))
					ctx, cancel := context.WithCancel(t.Context())
					exited := startRunner(ctx, runner, 1)
					time.Sleep(time.Minute)
					cancel()
					<-exited
					assert.Equal(t, int32(2), reconciles.Load(), "the requeued item is reconciled again")
					assert.Equal(t, []int{tt.want}, priorities(), "the requeue's priority")
				})
			})
		}
	}
}

// TestRunnerLogLevels checks the level of each line the Runner logs, on a
// handler at info level, as slog.Default() is.
func TestRunnerLogLevels(t *testing.T) {
	errBoom := errors.New("boom")
	const retryWarn = `level=WARN msg="workqueue: reconcile failed, will retry"`
	tests := []struct {
		name      string
		reconcile func(ctx context.Context, attempt int) (Result, error)
		opts      []Option
		want      []string // the level and message of each line
	}{
		{"a retried failure logs at warn the first time", failFirst(1, errBoom), nil, []string{retryWarn}},
		{"then each time an item's failures double", failFirst(9, errBoom), nil,
			[]string{retryWarn, retryWarn, retryWarn, retryWarn}}, // failures 1, 2, 4 and 8
		{"WithRetryLogLevel sets the others' level", failFirst(3, errBoom), []Option{WithRetryLogLevel(slog.LevelInfo)},
			[]string{retryWarn, retryWarn, `level=INFO msg="workqueue: reconcile failed, will retry"`}},
		{"giving up is an error", failFirst(1, errBoom), []Option{WithMaxRetries(0)},
			[]string{`level=ERROR msg="workqueue: reconcile failed, giving up"`}},
		{"a panic is an error", func(_ context.Context, attempt int) (Result, error) {
			if attempt == 1 {
				panic("nil map")
			}
			return Result{}, nil
		}, nil, []string{`level=ERROR msg="workqueue: reconcile panicked"`, retryWarn}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var logs bytes.Buffer
				q := workqueue.NewTypedRateLimitingQueue(workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Second, time.Minute))
				var attempts int
				runner := NewRunner(q, func(ctx context.Context, _ string) (Result, error) {
					attempts++
					return tt.reconcile(ctx, attempts)
				}, append(tt.opts, WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))...)
				q.Add("a")
				ctx, cancel := context.WithCancel(t.Context())
				exited := startRunner(ctx, runner, 1)
				time.Sleep(time.Hour)
				cancel()
				<-exited
				var got []string
				for line := range strings.Lines(logs.String()) {
					_, rest, _ := strings.Cut(line, " level=")
					level, msg, _ := strings.Cut(rest, " ")
					msg, _, _ = strings.Cut(msg, `" `)
					got = append(got, "level="+level+" "+msg+`"`)
				}
				assert.Equal(t, tt.want, got)
			})
		})
	}
}

// TestRunnerWarnsOfAFailureAsItStops checks that a reconcile that fails
// while Run stops is logged at warn level, whatever the retry level, as its
// retry goes to a queue that is about to shut down.
func TestRunnerWarnsOfAFailureAsItStops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs bytes.Buffer
		q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())
		runner := NewRunner(q, func(context.Context, string) (Result, error) {
			time.Sleep(time.Second)
			return Result{}, errors.New("boom")
		}, WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
		ctx, cancel := context.WithCancel(t.Context())
		exited := startRunner(ctx, runner, 1)
		q.Add("a")
		synctest.Wait() // "a" is being reconciled
		cancel()
		<-exited
		assert.Contains(t, logs.String(), `level=WARN msg="workqueue: reconcile failed as the Runner stops; its retry goes to the queue before the shutdown"`)
	})
}

// flakyGetQueue is a queue from outside this package whose GetContext
// fails its first failures calls, as the Redis queue's does while Redis is
// out of reach.
type flakyGetQueue struct {
	*workqueue.TypedRateLimitingQueue[string]
	failures int64
	calls    atomic.Int64
}

func (q *flakyGetQueue) GetContext(ctx context.Context) (string, error) {
	if q.calls.Add(1) <= q.failures {
		return "", errors.New("connection reset")
	}
	return q.TypedRateLimitingQueue.GetContext(ctx)
}

// TestRunnerGetErrorsEndNoWorker pins that a queue's own Get errors end
// no worker, and so not Run: the worker logs them, at warn on the 1st,
// 2nd and 4th in a row, and tries again a second later.
func TestRunnerGetErrorsEndNoWorker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := &flakyGetQueue{TypedRateLimitingQueue: workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]()), failures: 5}
		var logs bytes.Buffer
		var reconciled atomic.Int32
		runner := NewRunner[string](q, func(context.Context, string) (Result, error) {
			reconciled.Add(1)
			return Result{}, nil
		}, WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
		q.Add("a")
		ctx, cancel := context.WithCancel(t.Context())
		exited := startRunner(ctx, runner, 1)
		time.Sleep(4500 * time.Millisecond)
		synctest.Wait()
		assert.Zero(t, reconciled.Load(), "reconciled while Get fails")
		time.Sleep(time.Second)
		synctest.Wait()
		assert.Equal(t, int32(1), reconciled.Load(), "reconciled once Get works again")
		select {
		case <-exited:
			t.Fatal("Run returned on Get errors")
		default:
		}
		cancel()
		<-exited
		assert.Equal(t, 3, strings.Count(logs.String(), `level=WARN msg="workqueue: getting an item failed, trying again in 1s"`), "logs: %s", logs.String())
	})
}

// outsideQueue is a queue from outside this package, without GetContext.
type outsideQueue struct {
	workqueue.TypedInterface[string]
}

// TestRunnerOverALayerOverAnOutsideQueue checks that a Runner over this
// package's rate-limiting queue over a queue without GetContext, whose
// GetContext can only fail, uses Get: it reconciles, and stops on cancel.
func TestRunnerOverALayerOverAnOutsideQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		delaying := workqueue.NewTypedDelayingQueueWithConfig(workqueue.TypedDelayingQueueConfig[string]{Queue: outsideQueue{workqueue.NewTyped[string]()}})
		q := workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](), workqueue.TypedRateLimitingQueueConfig[string]{DelayingQueue: delaying})
		var reconciled atomic.Int32
		runner := NewRunner[string](q, func(context.Context, string) (Result, error) {
			reconciled.Add(1)
			return Result{}, nil
		})
		q.Add("a")
		q.Add("b")
		ctx, cancel := context.WithCancel(t.Context())
		exited := startRunner(ctx, runner, 2)
		synctest.Wait()
		assert.Equal(t, int32(2), reconciled.Load())
		cancel()
		<-exited
		assert.True(t, q.ShuttingDown())
	})
}

// TestRunnerSetWorkersAfterCancel pins SetWorkers' doc: once Run's context
// has ended it does nothing and returns false, even before Run has seen
// the end.
func TestRunnerSetWorkersAfterCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[int]())
		runner := NewRunner(q, func(context.Context, int) (Result, error) { return Result{}, nil })
		ctx, cancel := context.WithCancel(t.Context())
		exited := startRunner(ctx, runner, 1)
		synctest.Wait()
		require.True(t, runner.SetWorkers(2))
		cancel()
		assert.False(t, runner.SetWorkers(3), "SetWorkers right after the cancel")
		<-exited
	})
}

// parklessPriorityQueue is a priority queue from outside this package
// that cannot park.
type parklessPriorityQueue struct {
	workqueue.TypedRateLimitingInterface[string]
	Prioritized[string]
}

// TestRunnerWaitForOnAQueueThatCannotParkKeepsThePriority checks that
// WaitFor on a Prioritized queue without Park requeues at the item's
// priority.
func TestRunnerWaitForOnAQueueThatCannotParkKeepsThePriority(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pq := workqueue.NewTypedPriorityQueue(workqueue.DefaultTypedControllerRateLimiter[string](), workqueue.TypedPriorityQueueConfig[string]{})
		rec := &requeueRecorder{TypedPriorityQueue: pq}
		q := parklessPriorityQueue{rec, rec}
		var reconciles atomic.Int32
		runner := NewRunner[string](q, func(context.Context, string) (Result, error) {
			if reconciles.Add(1) == 1 {
				return WaitFor("event"), nil
			}
			return Result{}, nil
		})
		seven := 7
		pq.AddWithOpts(workqueue.AddOpts{Priority: &seven}, "a")
		ctx, cancel := context.WithCancel(t.Context())
		exited := startRunner(ctx, runner, 1)
		time.Sleep(time.Second)
		synctest.Wait()
		cancel()
		<-exited
		assert.Equal(t, int32(2), reconciles.Load(), "the requeued item is reconciled again")
		rec.mu.Lock()
		defer rec.mu.Unlock()
		assert.Equal(t, []int{7}, rec.priorities, "the requeue's priority")
	})
}

// clientGoQueue hides every method of a queue but client-go's: a queue
// without GetContext.
type clientGoQueue struct {
	workqueue.TypedRateLimitingInterface[string]
}

// TestRunnerStopShutsDownAQueueWithoutGetContextAtOnce pins Run's doc:
// when its context ends, a queue with GetContext is shut down after the
// retries of the reconciles in flight reached it (so that a queue shared
// with other processes keeps them), one without at once, the one way to
// end a Get, so that those retries are dropped.
func TestRunnerStopShutsDownAQueueWithoutGetContextAtOnce(t *testing.T) {
	tests := []struct {
		name         string
		wrap         func(q *workqueue.TypedRateLimitingQueue[string]) workqueue.TypedRateLimitingInterface[string]
		wantShutDown bool // seen by the reconcile in flight
		wantRequeues int
	}{
		{"with GetContext", func(q *workqueue.TypedRateLimitingQueue[string]) workqueue.TypedRateLimitingInterface[string] {
			return q
		}, false, 1},
		{"without GetContext", func(q *workqueue.TypedRateLimitingQueue[string]) workqueue.TypedRateLimitingInterface[string] {
			return clientGoQueue{q}
		}, true, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				q := workqueue.NewTypedRateLimitingQueue(workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Second, time.Minute))
				var shutDown atomic.Bool
				runner := NewRunner(tt.wrap(q), func(context.Context, string) (Result, error) {
					time.Sleep(time.Second)
					shutDown.Store(q.ShuttingDown())
					return Result{}, errors.New("boom")
				}, WithLogger(slog.New(slog.DiscardHandler)))
				ctx, cancel := context.WithCancel(t.Context())
				exited := startRunner(ctx, runner, 1)
				q.Add("a")
				synctest.Wait() // "a" is being reconciled
				cancel()
				<-exited
				assert.Equal(t, tt.wantShutDown, shutDown.Load(), "shut down during the reconcile in flight")
				assert.Equal(t, tt.wantRequeues, q.NumRequeues("a"), "NumRequeues: the retry reached the queue")
				assert.True(t, q.ShuttingDown(), "shut down once Run returned")
			})
		})
	}
}

// TestRunnerSetWorkersEndsAWaitingWorker pins SetWorkers' doc: a worker
// told to leave while it waits for an item leaves at once on a queue that
// can get with a context, and otherwise takes its next item first.
func TestRunnerSetWorkersEndsAWaitingWorker(t *testing.T) {
	tests := []struct {
		name           string
		make           func() workqueue.TypedRateLimitingInterface[string]
		wantConcurrent int32 // reconciles at once of two items added after SetWorkers(1)
	}{
		{"GetContext", func() workqueue.TypedRateLimitingInterface[string] {
			return workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())
		}, 1},
		{"GetWithPriorityContext alone", func() workqueue.TypedRateLimitingInterface[string] {
			pq := workqueue.NewTypedPriorityQueue(workqueue.DefaultTypedControllerRateLimiter[string](), workqueue.TypedPriorityQueueConfig[string]{})
			return parklessPriorityQueue{pq, pq}
		}, 1},
		{"neither", func() workqueue.TypedRateLimitingInterface[string] {
			return clientGoQueue{workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())}
		}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				q := tt.make()
				var running, most atomic.Int32
				runner := NewRunner(q, func(context.Context, string) (Result, error) {
					n := running.Add(1)
					for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
					}
					time.Sleep(time.Second)
					running.Add(-1)
					return Result{}, nil
				})
				ctx, cancel := context.WithCancel(t.Context())
				exited := startRunner(ctx, runner, 2)
				synctest.Wait() // both workers wait for an item
				require.True(t, runner.SetWorkers(1), "SetWorkers while Run runs")
				synctest.Wait()
				q.Add("a")
				q.Add("b")
				time.Sleep(3 * time.Second)
				synctest.Wait()
				cancel()
				<-exited
				assert.Equal(t, tt.wantConcurrent, most.Load(), "reconciles at once")
			})
		})
	}
}
