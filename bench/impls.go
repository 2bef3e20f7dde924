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
}

// Impls lists the implementations, client-go, the reference of every ratio,
// second.
var Impls = []Impl{
	{Name: "go-workqueue", New: newOurs, Delays: true, FakeClock: true, Metrics: true, ShutDownDrained: drainOurs},
	{Name: "client-go", New: newClientGo, Delays: true, FakeClock: true, Metrics: true, ShutDownDrained: drainClientGo},
	{Name: "controller-runtime", New: newControllerRuntime, Delays: true, Metrics: true, ShutDownDrained: drainControllerRuntime},
	{Name: "channel", New: newChannel, ShutDownDrained: drainChannel},
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
	if cfg.Clock != nil {
		config.Clock = cfg.Clock
	}
	if cfg.Metrics {
		config.Name = "bench"
		config.MetricsProvider = wqprometheus.NewProvider(prometheus.NewRegistry())
	}
	return workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](), config)
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
func newControllerRuntime(cfg Config) Queue {
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
