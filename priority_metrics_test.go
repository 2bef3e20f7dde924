package workqueue

import (
	"maps"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-workqueue/workqueue/metrics"
	"github.com/stretchr/testify/assert"
)

// priorityRecordingProvider is a recordingProvider that also offers the
// depth by priority.
type priorityRecordingProvider struct {
	recordingProvider
	mu    sync.Mutex
	depth map[int]int
}

var _ metrics.PriorityProvider = (*priorityRecordingProvider)(nil)

func (p *priorityRecordingProvider) NewDepthWithPriorityMetric(string) metrics.PriorityGauge {
	return p
}
func (p *priorityRecordingProvider) Inc(priority int) { p.add(priority, 1) }
func (p *priorityRecordingProvider) Dec(priority int) { p.add(priority, -1) }
func (p *priorityRecordingProvider) add(priority, d int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.depth == nil {
		p.depth = map[int]int{}
	}
	p.depth[priority] += d
	if p.depth[priority] == 0 {
		delete(p.depth, priority)
	}
}

func (p *priorityRecordingProvider) depths() map[int]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.depth)
}

func TestPriorityQueueMetrics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		provider := &priorityRecordingProvider{}
		q := NewTypedPriorityQueue(NewTypedItemExponentialFailureRateLimiter[string](time.Second, time.Minute),
			TypedPriorityQueueConfig[string]{Name: "test", MetricsProvider: provider})
		defer q.ShutDown()
		value := func(kind string) float64 { return provider.Value("test", kind) }

		q.AddWithOpts(AddOpts{Priority: new(1)}, "a", "b")
		q.Add("c")
		q.Add("a") // collapsed: not counted
		assert.Equal(t, 3.0, value("adds"))
		assert.Equal(t, 3.0, value("depth"))
		assert.Equal(t, map[int]int{0: 1, 1: 2}, provider.depths())

		q.AddWithOpts(AddOpts{Priority: new(2)}, "c") // raised
		assert.Equal(t, map[int]int{1: 2, 2: 1}, provider.depths())
		assert.Equal(t, 3.0, value("adds"), "a raise is no add")

		time.Sleep(300 * time.Millisecond)
		item, priority, _ := q.GetWithPriority()
		assert.Equal(t, "c", item)
		assert.Equal(t, 2, priority)
		assert.Equal(t, []float64{0.3}, provider.Observations("test", "latency"))
		assert.Equal(t, map[int]int{1: 2}, provider.depths())

		q.AddWithOpts(AddOpts{Priority: new(5)}, "c") // while processing
		assert.Equal(t, 4.0, value("adds"))
		assert.Equal(t, 3.0, value("depth"), "a pending re-add counts, as in Typed")
		assert.Equal(t, map[int]int{1: 2, 5: 1}, provider.depths())
		time.Sleep(time.Second)
		q.Done("c")
		assert.Equal(t, []float64{1.0}, provider.Observations("test", "work"))
		assert.Equal(t, map[int]int{1: 2, 5: 1}, provider.depths())

		q.AddRateLimited("d")
		q.AddAfter("e", time.Hour)
		assert.Equal(t, 2.0, value("retries"))
		assert.Equal(t, 2.0, value("delayed"))
		time.Sleep(time.Second)
		synctest.Wait()
		assert.Equal(t, 1.0, value("delayed"))
		assert.Equal(t, 4.0, value("depth"))
		assert.Equal(t, map[int]int{0: 1, 1: 2, 5: 1}, provider.depths())

		assert.True(t, q.Remove("d"))
		assert.True(t, q.Remove("e"))
		assert.Equal(t, 0.0, value("delayed"))
		assert.Equal(t, 3.0, value("depth"))
		assert.Equal(t, map[int]int{1: 2, 5: 1}, provider.depths())
	})
}
