// Package metrics is the contract between the queues of package workqueue
// and a metrics backend: the [Provider] a queue records its metrics with,
// the metrics its methods return, and the optional providers a queue uses
// when its provider also implements them.
//
// Packages github.com/go-workqueue/workqueue/prometheus and
// github.com/go-workqueue/workqueue/otelworkqueue implement all of them, and
// the one crqueue.NewMetricsProvider returns (module
// github.com/go-workqueue/workqueue/controllerruntime) implements [Provider]
// and [PriorityProvider]. Write one of your own to
// send the queues' metrics elsewhere; package workqueue knows [Provider] by
// client-go's name, MetricsProvider.
//
// How a queue of package workqueue uses a provider:
//   - It records metrics only if it has both a provider (its config's, or
//     the one workqueue.SetProvider set) and a name.
//   - It creates its metrics at construction, once each, with its name.
//   - A method that returns nil disables that metric for the queue.
//   - The optional providers ([DelayedItemsProvider], [ParkingProvider],
//     [GroupProvider], [PriorityProvider],
//     [UnfinishedWorkUpdatePeriodProvider]) are used when the provider has
//     their methods, found by a type assertion; a provider without them
//     records the metrics of [Provider] alone.
//   - A provider's methods and the metrics it returns are called from many
//     goroutines at once, and must be safe for concurrent use. A queue may
//     call a metric while it holds its lock: a metric must not call the
//     queue.
//
// The package holds interfaces only; nothing in it panics.
package metrics
