package reconcile

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-workqueue/workqueue"
)

// Result tells a [Runner] what to do after a successful reconcile;
// RequeueAfter wins over Requeue, Requeue over WaitFor, and none uses up a
// retry. The zero value forgets the item's failures and does not requeue it; a
// nil Priority keeps the item's. WaitFor on a queue that cannot park is
// Requeue.
type Result struct {
	RequeueAfter time.Duration // if positive, forget the item and add it after this
	Requeue      bool          // add the item with AddRateLimited
	WaitFor      []string      // park the item until one of these events
	Priority     *int          // the requeue's priority on a [Prioritized] queue
}

// WaitFor returns a Result that parks the item until one of events.
func WaitFor(events ...string) Result { return Result{WaitFor: events} }

// Func reconciles item: an error retries it with backoff, a
// [TerminalError] gives up on it, and a [Result] may requeue it. Its context
// ends at [WithItemTimeout] or at the end of the grace period
// ([WithGracePeriod]). Workers call it concurrently, never twice at once for
// one item.
type Func[T comparable] func(ctx context.Context, item T) (Result, error)

// Runner runs a controller's worker loop: Get an item, reconcile it, Forget,
// retry or requeue it as asked, and mark it Done; a panic counts as a failure.
// Retried failures log as [WithRetryLogLevel] says, those while Run stops or
// drains at warn, panics and items given up on at error. A Get that fails with
// the queue's own error (the Redis queue's while Redis is out of reach) is
// logged, at warn on the 1st, 2nd, 4th, ... in a row, and tried again a second
// later. A Runner is safe for concurrent use; make one with [NewRunner].
type Runner[T comparable] struct {
	queue workqueue.TypedRateLimitingInterface[T]
	// prio and getter are queue as a priority queue and as a queue with
	// GetContext, nil if it is not one, found once rather than per item.
	prio   Prioritized[T]
	getter contextGetter[T]
	// plainGet makes the workers call Get: set at NewRunner over a queue
	// with neither GetContext nor priorities, or once GetContext has
	// returned an error wrapping errors.ErrUnsupported, as the queues of
	// package workqueue do over a queue of their config without one.
	plainGet atomic.Bool
	// info is queue as an InfoGetter, nil if it is not one or has no
	// GetContext; tracer is its provider if that traces reconciles, and
	// name its name.
	info       InfoGetter[T]
	tracer     TracingProvider
	name       string
	reconcile  Func[T]
	maxRetries int
	timeout    time.Duration
	deadLetter func(item T, err error)
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

	// started is set by the one Run a Runner allows, stopping when its
	// context has ended.
	started, stopping atomic.Bool

	metrics runnerMetrics

	// pool holds Run's workers, so that SetWorkers can change their number.
	pool workerPool
}

// Option configures a [Runner]; NewRunner panics on a nil one.
type Option func(*options)

type options struct {
	deadLetter any // a func(T, error) of the Runner's item type T, or nil
	maxRetries int
	timeout    time.Duration
	logger     *slog.Logger
	retryLevel slog.Level
	grace      time.Duration
	drain      bool
	observers  []ErrorObserver
}

// DefaultGracePeriod is the grace period of a Runner without
// [WithGracePeriod].
const DefaultGracePeriod = 10 * time.Second

// UnlimitedRetries, the default of [WithMaxRetries], never gives up.
const UnlimitedRetries = -1

// WithDeadLetter hands each item the Runner gives up on and its last error
// to f, on the worker before Done; nil means none. f must be safe for
// concurrent use. NewRunner panics if f's item type is not its queue's.
func WithDeadLetter[T comparable](f func(item T, err error)) Option {
	return func(o *options) {
		if f == nil {
			o.deadLetter = nil
			return
		}
		o.deadLetter = f
	}
}

// WithMaxRetries sets how many times a failing item is retried before the
// Runner gives up on it: 0 gives up at its first failure, and
// [UnlimitedRetries] never gives up. NewRunner panics if n < -1.
func WithMaxRetries(n int) Option {
	return func(o *options) { o.maxRetries = n }
}

// WithItemTimeout cancels each reconcile's context after d; 0 means never.
// NewRunner panics if d is negative.
func WithItemTimeout(d time.Duration) Option {
	return func(o *options) { o.timeout = d }
}

// WithLogger sets where the Runner logs; nil means slog.Default().
func WithLogger(logger *slog.Logger) Option {
	return func(o *options) { o.logger = logger }
}

// WithRetryLogLevel sets the level of retried failures but an item's 1st, 2nd,
// 4th, ... in a row, which log at the higher of warn and level; default debug.
func WithRetryLogLevel(level slog.Level) Option {
	return func(o *options) { o.retryLevel = level }
}

// WithGracePeriod sets how long reconciles in flight when Run's context ends
// keep their context; 0 means at once. NewRunner panics if d is negative.
func WithGracePeriod(d time.Duration) Option {
	return func(o *options) { o.grace = d }
}

// WithDrain makes Run, when its context ends, reconcile the queued items
// before it returns; delayed and parked items are dropped. Reconciles then get
// a context Run's does not cancel: bound them with [WithItemTimeout].
func WithDrain() Option {
	return func(o *options) { o.drain = true }
}

// ErrorObserver is told how a [Runner]'s reconciles end, on the worker before
// Done; a panic in it is not recovered.
type ErrorObserver interface {
	ObserveError(item any, err error, failures int, retrying bool) // err may be a *PanicError
	ObserveSuccess(item any)
}

// WithErrorObserver adds o to the Runner's observers; nil adds none.
func WithErrorObserver(o ErrorObserver) Option {
	return func(opts *options) {
		if o != nil {
			opts.observers = append(opts.observers, o)
		}
	}
}

// NewRunner returns a Runner that reconciles queue's items with reconcile. It
// panics if queue, reconcile or an option is nil or invalid.
func NewRunner[T comparable](queue workqueue.TypedRateLimitingInterface[T], reconcile Func[T], opts ...Option) *Runner[T] {
	const name = "NewRunner"
	if queue == nil {
		panic("workqueue: " + name + " needs a queue, got nil")
	}
	if reconcile == nil {
		panic("workqueue: " + name + " needs a reconcile function, got nil")
	}
	o := options{maxRetries: UnlimitedRetries, retryLevel: slog.LevelDebug, grace: DefaultGracePeriod}
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
	var deadLetter func(item T, err error)
	if o.deadLetter != nil {
		f, ok := o.deadLetter.(func(item T, err error))
		if !ok {
			panic(fmt.Sprintf("workqueue: WithDeadLetter: a %T for a Runner of %v items", o.deadLetter, reflect.TypeFor[T]()))
		}
		deadLetter = f
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
	r.prio, _ = queue.(Prioritized[T])
	r.getter, _ = queue.(contextGetter[T])
	if r.getter != nil && !embedsInfoGetter[T](queue) {
		r.info, _ = queue.(InfoGetter[T])
	}
	r.plainGet.Store(r.getter == nil && r.prio == nil)
	r.metrics = newRunnerMetrics(queue)
	if src, ok := queue.(MetricsSource); ok {
		var provider workqueue.MetricsProvider
		provider, r.name = src.MetricsConfig()
		r.tracer, _ = provider.(TracingProvider)
	}
	return r
}

// Run reconciles items on workers goroutines until ctx ends or the queue is
// shut down and empty, returning once every worker has exited. When ctx ends,
// it stops handing out items, waits for the reconciles in flight (cancelled
// after the grace period) and their retries and requeues, then shuts the queue
// down, leaving queued items unreconciled unless [WithDrain]; a queue that
// cannot get with a context it shuts down at once, dropping those, but for one
// per worker already calling Get. Give each Runner its own queue.
// It panics on a zero Runner, if workers < 1, or on a second call.
func (r *Runner[T]) Run(ctx context.Context, workers int) {
	if r == nil || r.queue == nil {
		panic("workqueue: Run on a zero Runner; make one with NewRunner")
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
	allExited := r.pool.start(ctx, getCtx, workers, r.metrics.workers, func(leave context.Context) {
		for r.processNext(getCtx, leave, workCtx) {
		}
	})
	defer r.pool.stopped()
	select {
	case <-ctx.Done():
		r.stopping.Store(true)
		r.pool.freeze()
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
	// A worker loads plainGet (after storing it, if it does) before it
	// checks getCtx and calls Get, so either Run sees it set here or the
	// worker sees getCtx ended.
	if r.plainGet.Load() {
		r.queue.ShutDown() // the one way to end a Get without a context
	}
	<-allExited
	// Only now: the retries and requeues of the reconciles that were in
	// flight reach the queue, which on a queue shared between processes
	// (Redis) hands them to the others.
	r.queue.ShutDown()
}

// processNext reconciles one item and reports whether the worker goes on:
// getCtx ending, leave ending (SetWorkers told the worker to leave), or the
// queue's shutdown ends it.
func (r *Runner[T]) processNext(getCtx, leave, workCtx context.Context) bool {
	item, info, ok := r.next(getCtx, leave)
	if !ok {
		return false
	}
	defer r.queue.Done(item)
	priority := info.Priority
	var start time.Time
	var queued time.Duration
	if r.metrics.on || r.tracer != nil {
		start = time.Now()
		if !info.Added.IsZero() {
			queued = max(start.Sub(info.Added), 0)
		}
	}
	if r.metrics.on {
		r.metrics.active.Inc()
		if !info.Added.IsZero() {
			r.metrics.wait.Observe(queued.Seconds())
		}
	}
	ctx := workCtx
	var end func(Result, error)
	if r.tracer != nil {
		span := Span{Queue: r.name, Attempt: r.queue.NumRequeues(item) + 1, Queued: queued, Info: info}
		ctx, end = r.tracer.StartReconcile(workCtx, span)
	}
	result, err := r.reconcileRecovered(ctx, item)
	if end != nil {
		end(result, err)
	}
	if r.metrics.on {
		r.metrics.duration.Observe(time.Since(start).Seconds())
		r.metrics.active.Dec()
	}
	if err != nil {
		r.metrics.errors.Inc()
		r.metrics.reconciles.Inc(r.handleFailure(item, priority, err))
		return true
	}
	r.clearFailures(item)
	for _, o := range r.observers {
		o.ObserveSuccess(item)
	}
	if result.Priority != nil {
		priority = *result.Priority
	}
	outcome := ResultSuccess
	switch {
	case result.RequeueAfter > 0:
		outcome = ResultRequeueAfter
		r.queue.Forget(item)
		r.requeue(item, priority, workqueue.AddOpts{After: result.RequeueAfter})
	case result.Requeue:
		outcome = ResultRequeue
		r.requeue(item, priority, workqueue.AddOpts{RateLimited: true})
	case len(result.WaitFor) > 0:
		if p, ok := r.queue.(parker[T]); ok {
			outcome = ResultParked
			p.Park(item, result.WaitFor...)
		} else {
			outcome = ResultRequeue
			r.requeue(item, priority, workqueue.AddOpts{RateLimited: true})
		}
	default:
		r.queue.Forget(item)
	}
	r.metrics.reconciles.Inc(outcome)
	return true
}

// next gets the next item, with its priority on a priority queue, or
// reports that the worker should stop. leave is a child of getCtx, but a
// child learns of its parent's end only after the parent's Done is closed:
// getCtx is checked itself, so that once Run has seen its context end no
// worker takes another item.
//
// An error other than the end of a context or workqueue.ErrShutDown, such as the
// Redis queue's when Redis is out of reach, does not end the worker: it is
// logged at warn on the 1st, 2nd, 4th, ... in a row, and the worker tries
// again a second later.
func (r *Runner[T]) next(getCtx, leave context.Context) (item T, info workqueue.ItemInfo, ok bool) {
	for failures := 1; ; failures++ {
		// plainGet is loaded before getCtx is checked: see Run's stop.
		plain := r.plainGet.Load()
		if getCtx.Err() != nil || leave.Err() != nil {
			return item, info, false
		}
		var err error
		switch {
		case plain:
			item, shutdown := r.queue.Get()
			return item, info, !shutdown
		case r.info != nil:
			item, info, err = r.info.GetWithInfoContext(leave)
		case r.prio != nil:
			item, info.Priority, err = r.prio.GetWithPriorityContext(leave)
		default: // not plain: the queue has GetContext
			item, err = r.getter.GetContext(leave)
		}
		if err == nil {
			return item, info, true
		}
		if r.prio == nil && errors.Is(err, errors.ErrUnsupported) {
			r.plainGet.Store(true)
			failures--
			continue
		}
		if leave.Err() != nil || errors.Is(err, workqueue.ErrShutDown) || r.queue.ShuttingDown() {
			return item, workqueue.ItemInfo{}, false
		}
		level := slog.LevelDebug
		if failures&(failures-1) == 0 {
			level = slog.LevelWarn
		}
		r.logger.Log(context.Background(), level, "workqueue: getting an item failed, trying again in 1s", "error", err, "failures", failures)
		wait := time.NewTimer(time.Second)
		select {
		case <-leave.Done():
		case <-wait.C:
		}
		wait.Stop()
	}
}

// embedsInfoGetter reports whether q is a struct, or a pointer to one,
// with an embedded InfoGetter other than a Base: its GetWithInfoContext
// may be promoted from a queue it wraps, bypassing a GetContext or
// GetWithPriorityContext of its own. A Base is the same layer as the
// queue that embeds it.
func embedsInfoGetter[T comparable](q any) bool {
	t := reflect.TypeOf(q)
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return false
	}
	getter := reflect.TypeFor[InfoGetter[T]]()
	base := reflect.TypeFor[workqueue.Base[T]]()
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Anonymous && f.Type != base && (f.Type.Implements(getter) || reflect.PointerTo(f.Type).Implements(getter)) {
			return true
		}
	}
	return false
}

// requeue adds item again as opts says, at priority on a priority queue.
func (r *Runner[T]) requeue(item T, priority int, opts workqueue.AddOpts) {
	if r.prio != nil {
		opts.Priority = &priority
		r.prio.AddWithOpts(opts, item)
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

// handleFailure retries item, or gives up on it, and returns the result
// the metrics count.
func (r *Runner[T]) handleFailure(item T, priority int, err error) string {
	terminal := IsTerminal(err)
	var panicked *PanicError
	outcome := ResultError
	if errors.As(err, &panicked) {
		outcome = ResultPanic
	}
	failures := r.addFailure(item)
	if !terminal && (r.maxRetries == UnlimitedRetries || failures <= r.maxRetries) {
		if r.queue.ShuttingDown() {
			r.logger.Warn("workqueue: reconcile failed during shutdown, retry dropped", "item", item, "error", err, "failures", failures)
			r.observeError(item, err, failures, false)
			r.clearFailures(item)
			return outcome
		}
		if r.stopping.Load() {
			r.logger.Warn("workqueue: reconcile failed as the Runner stops; its retry goes to the queue before the shutdown", "item", item, "error", err, "failures", failures)
			r.observeError(item, err, failures, true)
			r.requeue(item, priority, workqueue.AddOpts{RateLimited: true})
			return outcome
		}
		level := r.retryLevel
		if failures&(failures-1) == 0 { // 1, 2, 4, 8, ...
			level = max(level, slog.LevelWarn)
		}
		r.logger.Log(context.Background(), level, "workqueue: reconcile failed, will retry", "item", item, "error", err, "failures", failures)
		r.observeError(item, err, failures, true)
		r.requeue(item, priority, workqueue.AddOpts{RateLimited: true})
		return outcome
	}
	r.logger.Error("workqueue: reconcile failed, giving up", "item", item, "error", err, "failures", failures, "terminal", terminal)
	r.observeError(item, err, failures, false)
	r.clearFailures(item)
	r.queue.Forget(item)
	if r.deadLetter != nil {
		r.deadLetter(item, err)
	}
	switch {
	case outcome == ResultPanic:
		return ResultPanic
	case terminal:
		return ResultTerminal
	default:
		return ResultGivenUp
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

// TerminalError marks err so that a [Runner] gives up on the item at once;
// errors.Is and errors.As see through the mark. TerminalError(nil) is nil.
func TerminalError(err error) error {
	if err == nil {
		return nil
	}
	return &terminalError{err: err}
}

// IsTerminal reports whether err or an error it wraps is a [TerminalError].
func IsTerminal(err error) bool {
	var terminal *terminalError
	return errors.As(err, &terminal)
}

// PanicError is a reconcile's panic as a [Runner] records and retries it.
type PanicError struct {
	Value any
	Stack []byte
}

// Error returns "reconcile panicked: " and the panic value as text.
func (e *PanicError) Error() string { return fmt.Sprintf("reconcile panicked: %v", e.Value) }
