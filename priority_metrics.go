package workqueue

// PriorityGaugeMetric is a gauge with one value per priority, such as the
// depth of a priority queue at each priority. Implementations must be safe
// for concurrent use, and should bound the number of series they keep:
// priorities are chosen by the queue's callers.
type PriorityGaugeMetric interface {
	Inc(priority int)
	Dec(priority int)
}

// PriorityMetricsProvider is a [MetricsProvider] that also reports the
// depth of a [TypedPriorityQueue] at each priority, as controller-runtime's
// workqueue_depth does with its priority label. Priority queues look for
// it with a type assertion; the depth metric of MetricsProvider is kept
// up to date either way.
type PriorityMetricsProvider interface {
	MetricsProvider
	// NewDepthWithPriorityMetric: items waiting to be handed out, by the
	// priority they will be handed out at; an item added again while it
	// is processed counts from the add, as in the depth metric.
	NewDepthWithPriorityMetric(name string) PriorityGaugeMetric
}

// priorityDepthMetric returns the depth-by-priority gauge of a named queue,
// or nil if it records no metrics or the provider does not offer it.
func priorityDepthMetric(provider MetricsProvider, name string) PriorityGaugeMetric {
	if p, ok := provider.(PriorityMetricsProvider); ok && name != "" {
		return p.NewDepthWithPriorityMetric(name)
	}
	return nil
}
