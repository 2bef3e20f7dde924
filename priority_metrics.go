package workqueue

// PriorityGaugeMetric, a gauge per priority, must be safe for concurrent use.
type PriorityGaugeMetric interface {
	Inc(priority int)
	Dec(priority int)
}

// PriorityMetricsProvider is a [MetricsProvider] that reports depth by
// priority.
type PriorityMetricsProvider interface {
	MetricsProvider
	NewDepthWithPriorityMetric(name string) PriorityGaugeMetric // items waiting to be handed out, by priority
}

// priorityDepthMetric returns the depth-by-priority gauge of a named queue,
// or nil if it records no metrics or the provider does not offer it.
func priorityDepthMetric(provider MetricsProvider, name string) PriorityGaugeMetric {
	if p, ok := provider.(PriorityMetricsProvider); ok && name != "" {
		return p.NewDepthWithPriorityMetric(name)
	}
	return nil
}
