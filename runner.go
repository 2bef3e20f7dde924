package workqueue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"
)

// Result tells a [Runner] what to do with an item whose reconcile succeeded.
// The zero value means the item is finished: its failure history is
// forgotten and it is not queued again until someone adds it.
type Result struct {
	// RequeueAfter, when positive, forgets the item's failures and adds it
	// again after this long (AddAfter): a scheduled recheck, not a retry.
	// Zero or negative means no timed requeue.
	RequeueAfter time.Duration

	// Requeue adds the item again through the rate limiter (AddRateLimited),
	// for "not ready yet" polling with backoff. It does not count towards
	// the maximum number of retries. RequeueAfter wins over Requeue.
	Requeue bool

	// WaitFor, if not empty, parks the item until one of these events
	// (see [TypedRateLimitingQueue.Park]) instead of polling: for "not
	// ready until something else changes". A park is not a failure: it
	// does not count towards the maximum number of retries, and the
	// Runner does not forget the item, so its park backoff grows until a
	// reconcile ends otherwise. RequeueAfter and Requeue win over WaitFor.
	// On a queue that cannot park (one from outside this package), it is
	// Requeue.
	WaitFor []string

	// Priority, if not nil, is the priority at which RequeueAfter or
	// Requeue adds the item again on a [TypedPriorityQueue]. Nil keeps
	// the priority the item was handed out at, as a retry of a failure
	// does. Other queues ignore it.
	Priority *int
}

// WaitFor returns a Result that parks the item until one of events; see
// [Result.WaitFor]. A ReconcileFunc returns it as
//
//	return workqueue.WaitFor("node-added", "pod-deleted"), nil
func WaitFor(events ...string) Result { return Result{WaitFor: events} }

// ReconcileFunc brings the state named by item to where it should be. It
// returns an error to have the item retried with backoff, a
// [TerminalError] to give up on it at once, or a [Result] asking for a
// requeue; with an error the Result is ignored. The context carries the
// values of the context given to [Runner.Run]; it is cancelled when the
// item's timeout (see [WithItemTimeout]) expires, and when the grace
// period after Run's context ends (see [WithGracePeriod]) runs out. A Runner with several
// workers calls it concurrently, never for one item twice at once. A nil
// ReconcileFunc is not usable: NewRunner panics on one.
type ReconcileFunc[T comparable] func(ctx context.Context, item T) (Result, error)

// Runner runs the worker loop every controller writes: Get an item,
// reconcile it, then Forget it, retry it with backoff or requeue it as the
// reconcile asked, and mark it Done. A reconcile that panics is recovered,
// logged and counted as a failure. On a [TypedPriorityQueue], a retry or
// requeue keeps the priority the item was handed out at unless
// [Result.Priority] says otherwise. A Runner runs once, and owns the
// shutdown of its queue: see [Runner.Run].
//
// A Runner logs, to slog.Default() or the [WithLogger] logger: a failure
// it will retry at debug level (see [WithRetryLogLevel]), a retry dropped
// because the queue is shutting down at warn level, and a reconcile that
// panicked and an item it gives up on at error level.
//
// A Runner is safe for concurrent use. The zero value is not usable: make a
// Runner with [NewRunner] or [NewRunnerWithDeadLetter]; Run panics on a
// zero Runner.
type Runner[T comparable] struct {
	queue      TypedRateLimitingInterface[T]
	reconcile  ReconcileFunc[T]
	maxRetries int
	timeout    time.Duration
	deadLetter DeadLetterFunc[T]
	logger     *slog.Logger
	retryLevel slog.Level
	grace      time.Duration
	drain      bool
	observers  []ErrorObserver

	// failures counts consecutive failed reconciles per item. It is kept
	// here rather than read from NumRequeues because Result.Requeue also
	// goes through the rate limiter and must not use up retries.
	mu       sync.Mutex
	failures map[T]int
	// failing is len(failures), read without the lock so that a success
	// with no failures on record, the common case, skips it. The queue
	// orders an item's reconciles, so a worker sees the count its item's
	// previous worker left.
	failing atomic.Int64

	// started is set by the one Run a Runner allows.
	started atomic.Bool
}

// DeadLetterFunc receives an item that a [Runner] made by
// [NewRunnerWithDeadLetter] gives up on: after the maximum number of retries
// (see [WithMaxRetries]), or at once for a [TerminalError]. It gets the item
// and the last error, runs on the worker before the item is marked Done (so
// an Add from it queues the item again after Done), and must be safe for
// concurrent use when there are several workers. A panic in it is not
// recovered. A nil DeadLetterFunc means no callback.
type DeadLetterFunc[T comparable] func(item T, err error)

// RunnerOption configures a [Runner] made by [NewRunner] or
// [NewRunnerWithDeadLetter]. Options do not depend on the item type, so one
// option value can configure Runners of different item types. A nil
// RunnerOption is not usable: NewRunner panics on one.
type RunnerOption func(*runnerOptions)

type runnerOptions struct {
	maxRetries int
	timeout    time.Duration
	logger     *slog.Logger
	retryLevel slog.Level
	grace      time.Duration
	drain      bool
	observers  []ErrorObserver
}

// DefaultGracePeriod is how long the reconciles in flight when [Runner.Run]'s
// context ends have before their context is cancelled, unless
// [WithGracePeriod] says otherwise.
const DefaultGracePeriod = 10 * time.Second

// UnlimitedRetries passed to [WithMaxRetries] retries a failing item for as
// long as the Runner runs.
const UnlimitedRetries = -1

// WithMaxRetries sets how many times a failing item is retried before the
// Runner gives up on it, forgets it and hands it to the dead-letter callback,
// if it has one (see [NewRunnerWithDeadLetter]): an item is reconciled at
// most n+1 times in a row without success. 0 means never retry;
// [UnlimitedRetries] (-1), the default, means retry for as long as the
// Runner runs. NewRunner panics if n is below -1.
func WithMaxRetries(n int) RunnerOption {
	return func(o *runnerOptions) { o.maxRetries = n }
}

// WithItemTimeout bounds each reconcile: its context is cancelled with
// context.DeadlineExceeded after d. The Runner still waits for the reconcile
// to return; a reconcile that ignores its context is not stopped. 0, the
// default, means no timeout. NewRunner panics if d is negative.
func WithItemTimeout(d time.Duration) RunnerOption {
	return func(o *runnerOptions) { o.timeout = d }
}

// WithLogger sets where the Runner logs; see [Runner] for what it logs at
// which level. Nil or unset means slog.Default().
func WithLogger(logger *slog.Logger) RunnerOption {
	return func(o *runnerOptions) { o.logger = logger }
}

// WithRetryLogLevel sets the level at which the Runner logs a failed
// reconcile that it will retry. The default, slog.LevelDebug, keeps
// transient failures out of the logs; the retries still show in the
// queue's metrics and in an [ErrorObserver].
func WithRetryLogLevel(level slog.Level) RunnerOption {
	return func(o *runnerOptions) { o.retryLevel = level }
}

// WithGracePeriod sets how long the reconciles in flight when Run's
// context ends may go on before their context is cancelled: 0 cancels it
// at once. The default is [DefaultGracePeriod]. Run waits for them to
// return either way. NewRunner panics if d is negative.
func WithGracePeriod(d time.Duration) RunnerOption {
	return func(o *runnerOptions) { o.grace = d }
}

// WithDrain makes Run reconcile every item already queued when its context
// ends before it returns, as [TypedInterface.ShutDownWithDrain] drains a
// queue: items waiting for a delay or parked are dropped, and so are
// retries that fall due during the drain. Reconciles then get a context
// that Run's does not cancel; bound them with [WithItemTimeout].
func WithDrain() RunnerOption {
	return func(o *runnerOptions) { o.drain = true }
}

// ErrorObserver is told how a [Runner]'s reconciles end, to show which
// items keep failing and why: the inspect package's registrations are
// ErrorObservers. Pass one to a Runner with [WithErrorObserver]. Its methods
// are called on the worker that ran the reconcile, before the item is
// retried, handed to the dead-letter callback or marked Done, so the calls
// for one item come one at a time in the order of its reconciles; calls
// for different items come concurrently when the Runner has several
// workers. A panic in them is not recovered.
type ErrorObserver interface {
	// ObserveError is called after a reconcile of item failed. err is its
	// error (a *PanicError for a panic), failures the number of failed
	// reconciles of item in a row, this one included, as [WithMaxRetries]
	// counts them, and retrying whether the Runner retries the item:
	// false when it gives up on it or drops the retry at shutdown.
	ObserveError(item any, err error, failures int, retrying bool)
	// ObserveSuccess is called after each reconcile of item that returned
	// no error, whatever the Result.
	ObserveSuccess(item any)
}

// WithErrorObserver has the Runner tell o how each reconcile ends; see
// [ErrorObserver]. Each WithErrorObserver adds one observer, and the Runner
// calls them in the order given. A nil o adds none.
func WithErrorObserver(o ErrorObserver) RunnerOption {
	return func(opts *runnerOptions) {
		if o != nil {
			opts.observers = append(opts.observers, o)
		}
	}
}

// NewRunner returns a Runner that reconciles the items of queue with
// reconcile, configured by opts. An item it gives up on is logged and
// forgotten; [NewRunnerWithDeadLetter] also hands it to a callback. It
// panics with a "workqueue:" message if queue, reconcile or an option is nil,
// or an option is invalid.
func NewRunner[T comparable](queue TypedRateLimitingInterface[T], reconcile ReconcileFunc[T], opts ...RunnerOption) *Runner[T] {
	return newRunner("NewRunner", queue, reconcile, nil, opts)
}

// NewRunnerWithDeadLetter is [NewRunner] with a callback, deadLetter, for
// the items the Runner gives up on; see [DeadLetterFunc]. The callback takes
// the queue's item type, so a mismatch is a compile error. A nil deadLetter
// means none, as with NewRunner. It may be called concurrently, and it
// panics as NewRunner does.
func NewRunnerWithDeadLetter[T comparable](queue TypedRateLimitingInterface[T], reconcile ReconcileFunc[T], deadLetter DeadLetterFunc[T], opts ...RunnerOption) *Runner[T] {
	return newRunner("NewRunnerWithDeadLetter", queue, reconcile, deadLetter, opts)
}

// newRunner is NewRunner and NewRunnerWithDeadLetter; name is the one called,
// for the panic messages.
func newRunner[T comparable](name string, queue TypedRateLimitingInterface[T], reconcile ReconcileFunc[T], deadLetter DeadLetterFunc[T], opts []RunnerOption) *Runner[T] {
	if queue == nil {
		panic("workqueue: " + name + " needs a queue, got nil")
	}
	if reconcile == nil {
		panic("workqueue: " + name + " needs a reconcile function, got nil")
	}
	o := runnerOptions{maxRetries: UnlimitedRetries, retryLevel: slog.LevelDebug, grace: DefaultGracePeriod}
	for i, opt := range opts {
		if opt == nil {
			panic(fmt.Sprintf("workqueue: %s got a nil option at position %d", name, i))
		}
		opt(&o)
	}
	if o.maxRetries < UnlimitedRetries {
		panic(fmt.Sprintf("workqueue: WithMaxRetries(%d): want -1 (unlimited) or more", o.maxRetries))
	}
	if o.timeout < 0 {
		panic(fmt.Sprintf("workqueue: WithItemTimeout(%v): negative timeout", o.timeout))
	}
	if o.grace < 0 {
		panic(fmt.Sprintf("workqueue: WithGracePeriod(%v): negative grace period", o.grace))
	}
	r := &Runner[T]{
		queue:      queue,
		reconcile:  reconcile,
		maxRetries: o.maxRetries,
		timeout:    o.timeout,
		deadLetter: deadLetter,
		logger:     o.logger,
		retryLevel: o.retryLevel,
		grace:      o.grace,
		drain:      o.drain,
		observers:  o.observers,
		failures:   make(map[T]int),
	}
	if r.logger == nil {
		r.logger = slog.Default()
	}
	return r
}

// Run starts workers goroutines that reconcile items until ctx ends or the
// queue is shut down and empty, and returns when every worker has exited.
//
// When ctx ends, Run stops handing out items and waits for the reconciles
// in flight, whose context is cancelled after the grace period (see
// [WithGracePeriod]); then it shuts the queue down, which drops what this
// package's queues still hold. The retries and requeues those reconciles
// ask for reach the queue before its shutdown: a queue shared with other
// processes keeps them. [WithDrain] reconciles the queued items first
// instead. A shutdown of the queue by someone else ends Run once the queue
// has handed out what it holds.
//
// A Runner runs once, as a controller starts its workers once: start them
// all with one Run, whose workers argument says how many. Run owns the
// queue's shutdown, so give each Runner a queue of its own: a second Runner
// reading the same queue would stop when the first does. Run may be called
// from any goroutine. It panics on a Runner not made by NewRunner or
// NewRunnerWithDeadLetter, if workers is less than 1, or if Run was called
// on this Runner before, even if that call has returned; a call that
// panicked on its workers argument does not count.
func (r *Runner[T]) Run(ctx context.Context, workers int) {
	if r == nil || r.queue == nil {
		panic("workqueue: Run on a zero Runner; make one with NewRunner or NewRunnerWithDeadLetter")
	}
	if workers < 1 {
		panic(fmt.Sprintf("workqueue: Run needs at least one worker, got %d", workers))
	}
	if !r.started.CompareAndSwap(false, true) {
		panic("workqueue: Run called twice on one Runner; start all its workers in one Run")
	}
	// Workers stop taking items when getCtx ends; reconciles run under
	// workCtx, which keeps ctx's values and ends only after the grace.
	getCtx := ctx
	if r.drain {
		getCtx = context.WithoutCancel(ctx)
	}
	workCtx, cancelWork := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelWork()
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for r.processNext(getCtx, workCtx) {
			}
		})
	}
	allExited := make(chan struct{})
	go func() {
		wg.Wait()
		close(allExited)
	}()
	select {
	case <-ctx.Done():
	case <-allExited: // the queue was shut down by someone else
		r.queue.ShutDown()
		return
	}
	if r.drain {
		r.queue.ShutDownWithDrain()
		<-allExited
		return
	}
	grace := time.AfterFunc(r.grace, cancelWork)
	defer grace.Stop()
	if !r.getsWithContext() {
		r.queue.ShutDown() // the one way to end a Get without a context
	}
	<-allExited
	// Only now: the retries and requeues of the reconciles that were in
	// flight reach the queue, which on a queue shared between processes
	// (Redis) hands them to the others.
	r.queue.ShutDown()
}

// getsWithContext reports whether next can end a Get with its context.
func (r *Runner[T]) getsWithContext() bool {
	switch r.queue.(type) {
	case prioritized[T], contextGetter[T]:
		return true
	}
	return false
}

// processNext reconciles one item and reports whether the worker goes on:
// getCtx ending or the queue's shutdown ends it.
func (r *Runner[T]) processNext(getCtx, workCtx context.Context) bool {
	item, priority, ok := r.next(getCtx)
	if !ok {
		return false
	}
	defer r.queue.Done(item)
	result, err := r.reconcileRecovered(workCtx, item)
	if err != nil {
		r.handleFailure(item, priority, err)
		return true
	}
	r.clearFailures(item)
	for _, o := range r.observers {
		o.ObserveSuccess(item)
	}
	if result.Priority != nil {
		priority = result.Priority
	}
	switch {
	case result.RequeueAfter > 0:
		r.queue.Forget(item)
		r.requeue(item, priority, AddOpts{After: result.RequeueAfter})
	case result.Requeue:
		r.requeue(item, priority, AddOpts{RateLimited: true})
	case len(result.WaitFor) > 0:
		if p, ok := r.queue.(parker[T]); ok {
			p.Park(item, result.WaitFor...)
		} else {
			r.queue.AddRateLimited(item)
		}
	default:
		r.queue.Forget(item)
	}
	return true
}

// next gets the next item, with its priority on a priority queue, or
// reports that the worker should stop.
func (r *Runner[T]) next(ctx context.Context) (item T, priority *int, ok bool) {
	if ctx.Err() != nil {
		return item, nil, false
	}
	switch q := r.queue.(type) {
	case prioritized[T]:
		item, p, err := q.get(ctx)
		return item, &p, err == nil
	case contextGetter[T]:
		item, err := q.GetContext(ctx)
		return item, nil, err == nil
	default:
		item, shutdown := r.queue.Get()
		return item, nil, !shutdown
	}
}

// requeue adds item again as opts says, at priority on a priority queue.
func (r *Runner[T]) requeue(item T, priority *int, opts AddOpts) {
	if q, ok := r.queue.(prioritized[T]); ok {
		opts.Priority = priority
		q.AddWithOpts(opts, item)
		return
	}
	if opts.RateLimited {
		r.queue.AddRateLimited(item)
	} else {
		r.queue.AddAfter(item, opts.After)
	}
}

func (r *Runner[T]) reconcileRecovered(ctx context.Context, item T) (result Result, err error) {
	if r.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, r.timeout)
		defer cancel()
	}
	defer func() {
		if value := recover(); value != nil {
			panicErr := &PanicError{Value: value, Stack: debug.Stack()}
			r.logger.Error("workqueue: reconcile panicked", "item", item, "panic", value, "stack", string(panicErr.Stack))
			result, err = Result{}, panicErr
		}
	}()
	return r.reconcile(ctx, item)
}

func (r *Runner[T]) handleFailure(item T, priority *int, err error) {
	terminal := IsTerminal(err)
	failures := r.addFailure(item)
	if !terminal && (r.maxRetries == UnlimitedRetries || failures <= r.maxRetries) {
		if r.queue.ShuttingDown() {
			r.logger.Warn("workqueue: reconcile failed during shutdown, retry dropped", "item", item, "error", err, "failures", failures)
			r.observeError(item, err, failures, false)
			r.clearFailures(item)
			return
		}
		r.logger.Log(context.Background(), r.retryLevel, "workqueue: reconcile failed, will retry", "item", item, "error", err, "failures", failures)
		r.observeError(item, err, failures, true)
		r.requeue(item, priority, AddOpts{RateLimited: true})
		return
	}
	r.logger.Error("workqueue: reconcile failed, giving up", "item", item, "error", err, "failures", failures, "terminal", terminal)
	r.observeError(item, err, failures, false)
	r.clearFailures(item)
	r.queue.Forget(item)
	if r.deadLetter != nil {
		r.deadLetter(item, err)
	}
}

func (r *Runner[T]) observeError(item T, err error, failures int, retrying bool) {
	for _, o := range r.observers {
		o.ObserveError(item, err, failures, retrying)
	}
}

func (r *Runner[T]) addFailure(item T) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := r.failures[item] + 1
	r.failures[item] = n
	if n == 1 {
		r.failing.Add(1)
	}
	return n
}

func (r *Runner[T]) clearFailures(item T) {
	if r.failing.Load() == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.failures[item]; ok {
		delete(r.failures, item)
		r.failing.Add(-1)
	}
}

// terminalError marks an error that retrying cannot fix.
type terminalError struct{ err error }

func (e *terminalError) Error() string { return e.err.Error() }
func (e *terminalError) Unwrap() error { return e.err }

// TerminalError marks err as one that retrying cannot fix: a [Runner] that
// gets it from a reconcile gives up on the item at once, without retries.
// errors.Is and errors.As see through the mark. TerminalError(nil) returns
// nil. It is safe for concurrent use.
func TerminalError(err error) error {
	if err == nil {
		return nil
	}
	return &terminalError{err: err}
}

// IsTerminal reports whether err, or any error it wraps, was marked with
// [TerminalError]. It is safe for concurrent use.
func IsTerminal(err error) bool {
	var terminal *terminalError
	return errors.As(err, &terminal)
}

// PanicError is the failure a [Runner] records when a reconcile panics: the
// value passed to panic and the stack of the panicking goroutine. It counts
// as an ordinary failure, so the item is retried.
type PanicError struct {
	Value any
	Stack []byte
}

// Error returns the panic value as text.
func (e *PanicError) Error() string { return fmt.Sprintf("reconcile panicked: %v", e.Value) }
