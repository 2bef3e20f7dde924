// Package bench measures go-workqueue side by side with the queues its users
// would use instead: client-go's workqueue, controller-runtime's priority
// queue, and a buffered channel as the floor (no dedup: the physical limit
// of handing a key from one goroutine to another). Every benchmark runs each
// implementation through the small [Queue] interface, so they do the same
// work. It is a module of its own so that the library never depends on
// client-go or controller-runtime.
package bench

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientgo "k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"

	"github.com/go-workqueue/workqueue"
	wqprometheus "github.com/go-workqueue/workqueue/prometheus"
)

// Queue is what the benchmarks need of a work queue.
type Queue interface {
	Add(key string)
	Get() (key string, shutdown bool)
	Done(key string)
	AddAfter(key string, delay time.Duration)
	AddRateLimited(key string)
	Forget(key string)
	Len() int
	ShutDown()
	ShutDownWithDrain()
}

// Config is what a benchmark asks of a new queue.
type Config struct {
	// Clock, if set, is a fake clock the queue must take its time from.
	Clock *clocktesting.FakeClock
	// Metrics turns on Prometheus metrics, registered on a fresh registry.
	Metrics bool
	// Fairness, if set, is the fairness key of a key: the queue shares each
	// priority level among the keys it gives, round-robin.
	Fairness func(key string) string
}

// PriorityQueue is what the priority cases need of a priority queue.
type PriorityQueue interface {
	Queue
	// AddWithPriority adds key at priority, or raises it to it.
	AddWithPriority(priority int, key string)
	GetWithPriority() (key string, priority int, shutdown bool)
}

// Impl is one implementation under test.
type Impl struct {
	Name string
	// New returns a queue for cfg, which must ask only for what the
	// implementation supports.
	New func(cfg Config) Queue
	// Delays tells whether the implementation has AddAfter and
	// AddRateLimited; FakeClock whether it can take its time from a fake
	// clock; Metrics whether it can record Prometheus metrics.
	Delays, FakeClock, Metrics bool
	// ShutDownDrained shuts q down so that its workers still process every
	// item added to it before they see the shutdown; the caller then waits
	// for them to exit. idle returns once the workers are idle.
	ShutDownDrained func(q Queue, idle func())
	// NewPriority, if set, returns a priority queue for cfg: the
	// implementation runs the priority cases.
	NewPriority func(cfg Config) PriorityQueue
	// Fairness tells whether the implementation can take Config.Fairness.
	Fairness bool
	// CoreOnly limits the implementation to the core cases (cycle, batch
	// and parallel) and the priority cases, which keeps the full run
	// short.
	CoreOnly bool
}

// Impls lists the implementations, client-go, the reference of most
// ratios, second. go-workqueue-priority is our TypedPriorityQueue through
// the same interface (every add at priority 0), so that the core cases
// compare it with controller-runtime's priority queue, the queue it
// replaces; it runs only those and the priority cases.
var Impls = []Impl{
	{Name: "go-workqueue", New: newOurs, Delays: true, FakeClock: true, Metrics: true, ShutDownDrained: drainOurs},
	{Name: "client-go", New: newClientGo, Delays: true, FakeClock: true, Metrics: true, ShutDownDrained: drainClientGo},
	{
		Name: "controller-runtime", New: newControllerRuntime, Delays: true, Metrics: true, ShutDownDrained: drainControllerRuntime,
		NewPriority: newControllerRuntimePriority,
	},
	{Name: "channel", New: newChannel, ShutDownDrained: drainChannel},
	{
		Name: "go-workqueue-priority", New: newOursPriority, Delays: true, FakeClock: true, Metrics: true, ShutDownDrained: drainOurs,
		NewPriority: newOursPriorityQueue, Fairness: true, CoreOnly: true,
	},
}

// drainOurs: ShutDownWithDrain returns once no item is queued or being
// processed, and stops the queue's goroutines.
func drainOurs(q Queue, _ func()) { q.ShutDownWithDrain() }

// drainClientGo: client-go's ShutDownWithDrain returns as soon as no item
// is being processed, even with items still queued, and leaves the delaying
// queue's goroutines running; ShutDown after it stops them. Its Get hands
// out queued items until none is left, also after ShutDown, and Done queues
// again an item added while it was processed, so the workers still process
// everything before they exit.
func drainClientGo(q Queue, _ func()) {
	q.ShutDownWithDrain()
	q.ShutDown()
}

// drainControllerRuntime: the priority queue's ShutDownWithDrain is
// ShutDown, after which Get hands out nothing, so it waits for the workers
// to be idle first.
func drainControllerRuntime(q Queue, idle func()) {
	idle()
	q.ShutDown()
}

// drainChannel closes the channel: the workers receive what is buffered,
// then see it closed.
func drainChannel(q Queue, _ func()) { q.ShutDown() }

// Reference is the implementation ratios are taken against.
const Reference = "client-go"

func newOurs(cfg Config) Queue {
	var config workqueue.TypedRateLimitingQueueConfig[string]
	config.Clock, config.Name, config.MetricsProvider = ourOptions(cfg)
	return workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](), config)
}

// ourOptions returns what our queues' configs take from cfg: a nil clock
// unless cfg has one, and a name and a provider only with metrics on.
func ourOptions(cfg Config) (clk clock.WithTicker, name string, provider workqueue.MetricsProvider) {
	if cfg.Clock != nil {
		clk = cfg.Clock
	}
	if cfg.Metrics {
		name = "bench"
		provider = wqprometheus.NewProvider(prometheus.NewRegistry())
	}
	return clk, name, provider
}

// oursPriority gives our priority queue the benchmarks' interface.
type oursPriority struct {
	*workqueue.TypedPriorityQueue[string]
}

func (q oursPriority) AddWithPriority(priority int, key string) {
	q.AddWithOpts(workqueue.AddOpts{Priority: &priority}, key)
}

// newOursPriority returns the queue itself, not the wrapper, so that the
// core cases measure it as they measure the others.
func newOursPriority(cfg Config) Queue { return newPriorityQueue(cfg) }

func newOursPriorityQueue(cfg Config) PriorityQueue { return oursPriority{newPriorityQueue(cfg)} }

func newPriorityQueue(cfg Config) *workqueue.TypedPriorityQueue[string] {
	var config workqueue.TypedPriorityQueueConfig[string]
	config.Clock, config.Name, config.MetricsProvider = ourOptions(cfg)
	if cfg.Fairness != nil {
		config.Fairness = []func(string) string{cfg.Fairness}
	}
	return workqueue.NewTypedPriorityQueue(workqueue.DefaultTypedControllerRateLimiter[string](), config)
}

// Each queue gets a name only with metrics on: without a name none of them
// records metrics.
func newClientGo(cfg Config) Queue {
	var config clientgo.TypedRateLimitingQueueConfig[string]
	if cfg.Clock != nil {
		config.Clock = cfg.Clock
	}
	if cfg.Metrics {
		config.Name = "bench"
		config.MetricsProvider = clientGoProvider{wqprometheus.NewProvider(prometheus.NewRegistry())}
	}
	return clientgo.NewTypedRateLimitingQueueWithConfig(clientgo.DefaultTypedControllerRateLimiter[string](), config)
}

// newControllerRuntime has no fake clock: the priority queue reads the
// time with time.Now.
func newControllerRuntime(cfg Config) Queue { return newCRQueue(cfg) }

// crPriority gives controller-runtime's priority queue the benchmarks'
// interface.
type crPriority struct {
	priorityqueue.PriorityQueue[string]
}

func (q crPriority) AddWithPriority(priority int, key string) {
	q.AddWithOpts(priorityqueue.AddOpts{Priority: &priority}, key)
}

// newControllerRuntimePriority ignores cfg.Fairness: the priority queue
// has no fairness.
func newControllerRuntimePriority(cfg Config) PriorityQueue { return crPriority{newCRQueue(cfg)} }

func newCRQueue(cfg Config) priorityqueue.PriorityQueue[string] {
	name := ""
	var provider clientgo.MetricsProvider
	if cfg.Metrics {
		name = "bench"
		provider = clientGoProvider{wqprometheus.NewProvider(prometheus.NewRegistry())}
	}
	return priorityqueue.New(name, func(o *priorityqueue.Opts[string]) {
		o.RateLimiter = clientgo.DefaultTypedControllerRateLimiter[string]()
		o.MetricProvider = provider
	})
}

// channel is a buffered channel: the floor of a hand-off, with no dedup, no
// delays and no metrics.
type channel chan string

func newChannel(Config) Queue {
	return make(channel, 1<<21)
}

func (c channel) Add(key string) { c <- key }
func (c channel) Get() (string, bool) {
	key, ok := <-c
	return key, !ok
}
func (c channel) Done(string)                    {}
func (c channel) AddAfter(string, time.Duration) { panic("bench: a channel has no delays") }
func (c channel) AddRateLimited(string)          { panic("bench: a channel has no delays") }
func (c channel) Forget(string)                  {}
func (c channel) Len() int                       { return len(c) }
func (c channel) ShutDown()                      { close(c) }
func (c channel) ShutDownWithDrain()             { close(c) }

// clientGoProvider gives client-go and controller-runtime the same
// Prometheus metrics our queue uses, so that "metrics on" measures the
// queues and not different metric libraries.
type clientGoProvider struct{ p *wqprometheus.Provider }

func (c clientGoProvider) NewDepthMetric(name string) clientgo.GaugeMetric {
	return c.p.NewDepthMetric(name)
}
func (c clientGoProvider) NewAddsMetric(name string) clientgo.CounterMetric {
	return c.p.NewAddsMetric(name)
}
func (c clientGoProvider) NewLatencyMetric(name string) clientgo.HistogramMetric {
	return c.p.NewLatencyMetric(name)
}
func (c clientGoProvider) NewWorkDurationMetric(name string) clientgo.HistogramMetric {
	return c.p.NewWorkDurationMetric(name)
}
func (c clientGoProvider) NewUnfinishedWorkSecondsMetric(name string) clientgo.SettableGaugeMetric {
	return c.p.NewUnfinishedWorkSecondsMetric(name)
}
func (c clientGoProvider) NewLongestRunningProcessorSecondsMetric(name string) clientgo.SettableGaugeMetric {
	return c.p.NewLongestRunningProcessorSecondsMetric(name)
}
func (c clientGoProvider) NewRetriesMetric(name string) clientgo.CounterMetric {
	return c.p.NewRetriesMetric(name)
}
