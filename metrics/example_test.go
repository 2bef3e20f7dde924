package metrics_test

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/go-workqueue/workqueue"
	"github.com/go-workqueue/workqueue/metrics"
)

// addCounter is a Counter safe for concurrent use.
type addCounter struct{ n atomic.Int64 }

func (c *addCounter) Inc() { c.n.Add(1) }

// addsProvider counts the adds of each named queue and disables every
// other metric by returning nil for it.
type addsProvider struct {
	mu   sync.Mutex
	adds map[string]*addCounter
}

var _ metrics.Provider = (*addsProvider)(nil)

func (p *addsProvider) NewAddsMetric(name string) metrics.Counter {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := &addCounter{}
	p.adds[name] = c
	return c
}

// count returns the adds of the queue name.
func (p *addsProvider) count(name string) int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.adds[name].n.Load()
}

func (p *addsProvider) NewDepthMetric(string) metrics.Gauge                         { return nil }
func (p *addsProvider) NewLatencyMetric(string) metrics.Histogram                   { return nil }
func (p *addsProvider) NewWorkDurationMetric(string) metrics.Histogram              { return nil }
func (p *addsProvider) NewUnfinishedWorkSecondsMetric(string) metrics.SettableGauge { return nil }
func (p *addsProvider) NewLongestRunningProcessorSecondsMetric(string) metrics.SettableGauge {
	return nil
}
func (p *addsProvider) NewRetriesMetric(string) metrics.Counter { return nil }

// A provider of one's own: a named queue creates its adds counter at
// construction, and counts each add not collapsed into a queued item.
func Example() {
	provider := &addsProvider{adds: map[string]*addCounter{}}
	queue := workqueue.NewTypedWithConfig(workqueue.TypedQueueConfig[string]{
		Name:            "jobs",
		MetricsProvider: provider,
	})
	defer queue.ShutDown()

	queue.Add("a")
	queue.Add("b")
	queue.Add("a") // collapsed into the queued "a"
	item, _ := queue.Get()
	queue.Done(item)

	fmt.Println("adds:", provider.count("jobs"))
	// Output: adds: 2
}
