package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/go-workqueue/workqueue"
	"github.com/go-workqueue/workqueue/inspect"
	wqprometheus "github.com/go-workqueue/workqueue/prometheus"
	"github.com/go-workqueue/workqueue/reconcile"
)

// request asks the controller to perform an action on a queue. It is a
// value, so the work queue collapses equal requests.
type request struct {
	QueueName string
	Action    Action
}

func (r request) String() string { return r.QueueName + "/" + string(r.Action) }

// controllerConfig holds what the command line chooses.
type controllerConfig struct {
	workers       int
	maxRequeueNum int // -1: retry for ever
	failureRate   float64
	seed          uint64
	registry      *prometheus.Registry
	timeline      *timeline
	logger        *slog.Logger // the runners' log of failures and panics
	// inspector, if set, shows the work queues and their failures.
	inspector *inspect.Handler
}

// controller keeps each Queue's status in line with its PodGroups and
// carries out open and close requests, through the state machine.
type controller struct {
	store  *Store
	client *faultyClient

	queue        *workqueue.TypedRateLimitingQueue[request]
	commandQueue *workqueue.TypedRateLimitingQueue[Command]

	// The failures the runners report to the inspector; nil without one.
	requestFailures, commandFailures reconcile.ErrorObserver

	// The queues' rate limiters, which note when retries fall due.
	requestRetries *retryTracker[request]
	commandRetries *retryTracker[Command]
	// The controller's own Add calls to each queue, for the summary: those
	// the queue collapsed into an item already waiting are not in its adds.
	requestAddCalls, commandAddCalls atomic.Uint64
	// The parked requests that opened woke: each is queued again.
	requestWakes atomic.Uint64

	pgMutex   sync.RWMutex
	podGroups map[string]map[string]struct{} // queue name -> PodGroup keys
	queues    map[string]bool                // queues that exist: their gauges may be set

	metrics  *queueMetrics
	timeline *timeline
	config   controllerConfig
}

// The work queues' names: the name label of their workqueue_* metrics,
// their sections on the inspector's page and their lines in the summary.
// "request" rather than "queue": the items are requests about Queues, and
// a work queue named queue reads as one of the Queues.
const (
	requestQueueName = "request"
	commandQueueName = "command"
)

// reconcilesPerQueue is how many requests about one Queue are reconciled
// at once. The work queue never hands out a request twice at once, but
// dev/SyncQueue, dev/OpenQueue and dev/CloseQueue are three requests, and
// each reads dev and writes its status: two at once race, and the second
// to write fails on a stale version and waits out a backoff to try again.
// With the limit, the second waits in the work queue until the first is
// done, and requests about other Queues go on meanwhile.
const reconcilesPerQueue = 1

// requestQueueOf is the group of a request, for the work queue's group
// limit: the Queue it is about.
func requestQueueOf(req request) string { return req.QueueName }

func newController(store *Store, config controllerConfig) *controller {
	provider := wqprometheus.NewProvider(config.registry)
	requestConfig := workqueue.TypedRateLimitingQueueConfig[request]{
		Name: requestQueueName, MetricsProvider: provider,
		GroupLimits: &workqueue.GroupLimits[request]{Group: requestQueueOf, Default: reconcilesPerQueue},
	}
	c := &controller{
		store:          store,
		client:         newFaultyClient(store, config.failureRate, config.seed),
		podGroups:      make(map[string]map[string]struct{}),
		queues:         make(map[string]bool),
		metrics:        newQueueMetrics(config.registry),
		timeline:       config.timeline,
		config:         config,
		requestRetries: newRetryTracker(workqueue.DefaultTypedControllerRateLimiter[request]()),
		commandRetries: newRetryTracker(workqueue.DefaultTypedControllerRateLimiter[Command]()),
	}
	c.queue = workqueue.NewTypedRateLimitingQueueWithConfig(c.requestRetries, requestConfig)
	c.commandQueue = workqueue.NewTypedRateLimitingQueueWithConfig[Command](c.commandRetries,
		workqueue.TypedRateLimitingQueueConfig[Command]{Name: commandQueueName, MetricsProvider: provider})
	if config.inspector != nil {
		c.requestFailures = inspect.Register(config.inspector, requestQueueName, c.queue)
		c.commandFailures = inspect.Register(config.inspector, commandQueueName, c.commandQueue,
			inspect.FormatKeys(Command.Key))
	}
	store.Queues.watch(EventHandler[Queue]{OnAdd: c.addQueue, OnUpdate: c.updateQueue, OnDelete: c.deleteQueue})
	store.PodGroups.watch(EventHandler[PodGroup]{OnAdd: c.addPodGroup, OnUpdate: c.updatePodGroup, OnDelete: c.deletePodGroup})
	store.Commands.watch(EventHandler[Command]{OnAdd: c.addCommand}) // commands are one-shot: adds only
	return c
}

// run reconciles requests and commands, each queue with its own workers,
// until ctx is cancelled; then both queues drain and run returns.
func (c *controller) run(ctx context.Context) {
	opts := func(failures reconcile.ErrorObserver) []reconcile.Option {
		return []reconcile.Option{
			reconcile.WithMaxRetries(c.config.maxRequeueNum),
			reconcile.WithLogger(c.config.logger),
			reconcile.WithErrorObserver(failures), // none without an inspector
		}
	}
	requests := reconcile.NewRunner(c.queue, c.reconcileRequest, append(opts(c.requestFailures), reconcile.WithDeadLetter(c.requestGivenUp))...)
	commands := reconcile.NewRunner(c.commandQueue, c.reconcileCommand, append(opts(c.commandFailures), reconcile.WithDeadLetter(c.commandGivenUp))...)
	var wg sync.WaitGroup
	wg.Go(func() { requests.Run(ctx, c.config.workers) })
	wg.Go(func() { commands.Run(ctx, c.config.workers) })
	wg.Wait()
}

func (c *controller) reconcileRequest(_ context.Context, req request) (reconcile.Result, error) {
	err := c.handleQueue(req)
	var closed *parentClosedError
	if errors.As(err, &closed) {
		// Not a failure: nothing changes until the parent opens, and
		// opening it wakes the request (see opened).
		c.timeline.parked(req.String(), closed.parent, err)
		return reconcile.WaitFor(openedEvent(closed.parent)), nil
	}
	return c.result(req.String(), err)
}

func (c *controller) reconcileCommand(_ context.Context, cmd Command) (reconcile.Result, error) {
	return c.result(commandName(cmd), c.handleCommand(cmd))
}

// result tells the runner what to do after a reconcile of what: a write
// the API server throttled is tried again after the time it asked for,
// without counting as a failure; any other error is a failure, retried
// with backoff.
func (c *controller) result(what string, err error) (reconcile.Result, error) {
	var throttled *throttledError
	switch {
	case errors.As(err, &throttled):
		c.timeline.throttled(what, err)
		return reconcile.Result{RequeueAfter: throttled.retryAfter}, nil
	case err != nil:
		c.timeline.failure(what, err)
	}
	return reconcile.Result{}, err
}

// opened wakes the opens parked until queue opens.
func (c *controller) opened(queue string) {
	c.requestWakes.Add(uint64(c.queue.Wake(openedEvent(queue))))
}

// requestGivenUp records the warning the seed's controller records when a
// request has failed more than maxRequeueNum times.
func (c *controller) requestGivenUp(req request, err error) {
	c.timeline.event(req.QueueName, eventWarning, string(req.Action),
		fmt.Sprintf("gave up after %d retries: %v", c.config.maxRequeueNum, err))
	c.timeline.gaveUp(req.String())
}

// commandGivenUp drops the command; as in the seed, no event is recorded,
// but the timeline shows it.
func (c *controller) commandGivenUp(cmd Command, err error) {
	c.config.logger.Warn("dropping command", "command", cmd.Key(), "error", err)
	c.timeline.commandGivenUp(commandName(cmd), c.config.maxRequeueNum, err)
}

// commandName spells a command as the timeline does.
func commandName(cmd Command) string { return "command " + cmd.Key() }

// handleQueue performs req's action in the state the queue is in. A queue
// that no longer exists needs nothing.
func (c *controller) handleQueue(req request) error {
	queue, err := c.store.Queues.get(req.QueueName)
	if errors.Is(err, errNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	state, err := newState(queue, queueActions{sync: c.syncQueue, open: c.openQueue, close: c.closeQueue})
	if err != nil {
		return err
	}
	return state.execute(req.Action)
}

// handleCommand deletes the command first, so that it is consumed once,
// then queues the request it carries. A command already deleted was
// consumed by an earlier attempt.
func (c *controller) handleCommand(cmd Command) error {
	if err := c.client.deleteCommand(cmd.Key()); err != nil {
		if errors.Is(err, errNotFound) {
			return nil
		}
		return err
	}
	c.timeline.event(cmd.TargetName, eventNormal, "Command", fmt.Sprintf("%s consumed: %s", cmd.Key(), cmd.Action))
	c.enqueue(request{QueueName: cmd.TargetName, Action: cmd.Action})
	return nil
}

func (c *controller) enqueue(req request) {
	c.requestAddCalls.Add(1)
	c.queue.Add(req)
}

// Event handlers. They run while the store delivers a watch event, so they
// only record what they need and queue work.

func (c *controller) addQueue(queue Queue) {
	c.pgMutex.Lock()
	c.queues[queue.Name] = true
	c.pgMutex.Unlock()
	c.enqueue(request{QueueName: queue.Name, Action: SyncQueueAction})
}

// updateQueue resyncs only when the parent changed: the controller's own
// status writes also arrive here and must not start a loop.
func (c *controller) updateQueue(oldQueue, newQueue Queue) {
	if oldQueue.Parent == newQueue.Parent {
		return
	}
	c.enqueue(request{QueueName: newQueue.Name, Action: SyncQueueAction})
}

func (c *controller) deleteQueue(queue Queue) {
	c.pgMutex.Lock()
	defer c.pgMutex.Unlock()
	c.metrics.delete(queue.Name)
	delete(c.podGroups, queue.Name)
	delete(c.queues, queue.Name)
}

// updateMetrics sets a queue's gauges unless the queue has been deleted: a
// sync that read the queue just before its deletion must not bring back the
// gauges the deletion removed.
func (c *controller) updateMetrics(queueName string, status QueueStatus) {
	c.pgMutex.Lock()
	defer c.pgMutex.Unlock()
	if c.queues[queueName] {
		c.metrics.update(queueName, status)
	}
}

func (c *controller) addPodGroup(pg PodGroup) {
	c.pgMutex.Lock()
	if c.podGroups[pg.Queue] == nil {
		c.podGroups[pg.Queue] = make(map[string]struct{})
	}
	c.podGroups[pg.Queue][pg.Key()] = struct{}{}
	c.pgMutex.Unlock()
	c.enqueue(request{QueueName: pg.Queue, Action: SyncQueueAction})
}

// updatePodGroup counts only phase changes.
func (c *controller) updatePodGroup(oldPG, newPG PodGroup) {
	if oldPG.Phase == newPG.Phase {
		return
	}
	c.addPodGroup(newPG)
}

func (c *controller) deletePodGroup(pg PodGroup) {
	c.untrackPodGroup(pg.Queue, pg.Key())
	c.enqueue(request{QueueName: pg.Queue, Action: SyncQueueAction})
}

// addCommand takes the commands aimed at queues; the seed's informer
// filters the others out before they reach a handler.
func (c *controller) addCommand(cmd Command) {
	if cmd.TargetKind != "Queue" {
		return
	}
	c.commandAddCalls.Add(1)
	c.commandQueue.Add(cmd)
}

// trackedPodGroups returns the keys of the PodGroups tracked for a queue,
// sorted.
func (c *controller) trackedPodGroups(queueName string) []string {
	c.pgMutex.RLock()
	defer c.pgMutex.RUnlock()
	return slices.Sorted(maps.Keys(c.podGroups[queueName]))
}

func (c *controller) untrackPodGroup(queueName, key string) {
	c.pgMutex.Lock()
	defer c.pgMutex.Unlock()
	delete(c.podGroups[queueName], key)
}

// activity reads what the controller's work queues hold and have handed
// out so far.
func (c *controller) activity() (workqueueActivity, error) {
	return c.metrics.workqueueActivity(requestQueueName, commandQueueName)
}

// waitingRetries returns how many retries the work queues hold for later
// than now, and the first of them.
func (c *controller) waitingRetries(now time.Time) (n int, first pendingRetry) {
	n, first = c.requestRetries.waiting(now, request.String)
	nc, firstCommand := c.commandRetries.waiting(now, commandName)
	if nc > 0 && (n == 0 || firstCommand.in < first.in) {
		first = firstCommand
	}
	return n + nc, first
}
