package noop

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/go-workqueue/workqueue/metrics"
)

// countingGauge is a gauge a provider could give.
type countingGauge struct{ n *int }

func (g countingGauge) Inc() { *g.n++ }
func (g countingGauge) Dec() { *g.n-- }

func TestOr(t *testing.T) {
	n := 0
	given := countingGauge{&n}
	assert.Equal(t, metrics.Gauge(given), Or[metrics.Gauge](given), "a metric given is kept")
	assert.Equal(t, metrics.Gauge(Metric{}), Or[metrics.Gauge](nil))
	assert.Equal(t, metrics.SettableGauge(Metric{}), Or[metrics.SettableGauge](nil))
	assert.Equal(t, metrics.Histogram(Metric{}), Or[metrics.Histogram](nil))
	assert.Equal(t, metrics.Counter(Metric{}), Or[metrics.Counter](nil))
	assert.Equal(t, metrics.EventCounter(ByLabel{}), Or[metrics.EventCounter](nil))
	assert.NotPanics(t, func() { Or[metrics.EventCounter](nil).Inc("event") })
}
