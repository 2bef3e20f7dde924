package workqueue

import "github.com/go-workqueue/workqueue/metrics"

// priorityDepthMetric returns the depth-by-priority gauge of a named queue,
// or nil if it records no metrics or the provider does not offer it.
func priorityDepthMetric(provider MetricsProvider, name string) metrics.PriorityGauge {
	if p, ok := provider.(metrics.PriorityProvider); ok && name != "" {
		return p.NewDepthWithPriorityMetric(name)
	}
	return nil
}
