package metrics

import "time"

// Gauge is a gauge that goes up and down by one. It is client-go's
// GaugeMetric. Implementations must be safe for concurrent use.
type Gauge interface {
	Inc()
	Dec()
}

// SettableGauge is a gauge set to a value. It is client-go's
// SettableGaugeMetric. Implementations must be safe for concurrent use.
type SettableGauge interface {
	Set(float64)
}

// Counter counts up by one. It is client-go's CounterMetric.
// Implementations must be safe for concurrent use.
type Counter interface {
	Inc()
}

// Summary records observations. It is client-go's SummaryMetric, which no
// queue creates: the latency and work-duration metrics are of type
// [Histogram]. Implementations must be safe for concurrent use.
type Summary interface {
	Observe(float64)
}

// Histogram records observations. It is client-go's HistogramMetric.
// Implementations must be safe for concurrent use.
type Histogram interface {
	Observe(float64)
}

// EventCounter counts by event. Implementations must be safe for concurrent
// use.
type EventCounter interface {
	Inc(event string)
}

// PriorityGauge is a gauge per priority, going up and down by one.
// Implementations must be safe for concurrent use.
type PriorityGauge interface {
	Inc(priority int)
	Dec(priority int)
}

// Provider creates the metrics of a named queue, at the queue's
// construction, once each; a nil metric disables it. It is client-go's
// MetricsProvider, method for method. Its methods must be safe for
// concurrent use.
type Provider interface {
	// NewDepthMetric returns the gauge of the items waiting to be handed
	// out.
	NewDepthMetric(name string) Gauge
	// NewAddsMetric returns the counter of the adds not collapsed into a
	// queued item.
	NewAddsMetric(name string) Counter
	// NewLatencyMetric returns the histogram of the seconds from an item's
	// first add to its Get.
	NewLatencyMetric(name string) Histogram
	// NewWorkDurationMetric returns the histogram of the seconds from Get
	// to Done.
	NewWorkDurationMetric(name string) Histogram
	// NewUnfinishedWorkSecondsMetric returns the gauge of the summed age
	// of the items being processed.
	NewUnfinishedWorkSecondsMetric(name string) SettableGauge
	// NewLongestRunningProcessorSecondsMetric returns the gauge of the age
	// of the oldest item being processed.
	NewLongestRunningProcessorSecondsMetric(name string) SettableGauge
	// NewRetriesMetric returns the counter of the AddAfter, AddRateLimited
	// and Reschedule calls accepted; a priority queue's with a positive
	// delay. Only the queues that delay (delaying, rate-limiting and
	// priority queues) create it.
	NewRetriesMetric(name string) Counter
}

// DelayedItemsProvider is a [Provider] that also reports delays. A queue
// that delays creates the gauge with its retries counter.
type DelayedItemsProvider interface {
	Provider
	// NewDelayedItemsMetric returns the gauge of the delays pending, as
	// Snapshot.Waiting counts them.
	NewDelayedItemsMetric(name string) SettableGauge
}

// ParkingProvider is a [Provider] that also reports parks; the wakes
// metric should bound its series of events.
type ParkingProvider interface {
	Provider
	// NewParkedItemsMetric returns the gauge of the items parked, from the
	// Done after their Park.
	NewParkedItemsMetric(name string) SettableGauge
	// NewWakesMetric returns the counter of the parks ended by Wake or
	// WakeFunc, by event.
	NewWakesMetric(name string) EventCounter
	// NewParkTimeoutsMetric returns the counter of the parks ended by
	// MaxParkTime.
	NewParkTimeoutsMetric(name string) Counter
}

// GroupProvider is a [Provider] that also reports a queue's GroupLimits,
// over all the groups of the queue so that series stay bounded. Only a
// queue with GroupLimits creates these metrics.
type GroupProvider interface {
	Provider
	// NewWaitingForSlotMetric returns the gauge of the queued items that
	// wait for a free slot of their group.
	NewWaitingForSlotMetric(name string) SettableGauge
	// NewGroupsAtLimitMetric returns the gauge of the groups with items
	// waiting for a slot.
	NewGroupsAtLimitMetric(name string) SettableGauge
}

// PriorityProvider is a [Provider] that reports a priority queue's depth by
// priority.
type PriorityProvider interface {
	Provider
	// NewDepthWithPriorityMetric returns the gauge of the items waiting to
	// be handed out, by priority.
	NewDepthWithPriorityMetric(name string) PriorityGauge
}

// UnfinishedWorkUpdatePeriodProvider is a [Provider] that sets how often a
// queue sets its unfinished-work gauges (those of
// NewUnfinishedWorkSecondsMetric and NewLongestRunningProcessorSecondsMetric);
// every 500 ms without it.
type UnfinishedWorkUpdatePeriodProvider interface {
	Provider
	// UnfinishedWorkUpdatePeriod returns the period, read at the
	// queue's construction; a period that is not positive means 500 ms.
	UnfinishedWorkUpdatePeriod() time.Duration
}
