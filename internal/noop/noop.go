// Package noop holds the metrics that record nothing, which the queues and
// the Runner use in place of a metric their provider does not give.
package noop

// Metric is a gauge, counter, histogram or summary that records nothing.
type Metric struct{}

func (Metric) Inc()            {}
func (Metric) Dec()            {}
func (Metric) Set(float64)     {}
func (Metric) Observe(float64) {}

// ByLabel is a counter by label value that records nothing.
type ByLabel struct{}

func (ByLabel) Inc(string) {}

// Or returns metric, or one that records nothing if it is nil. M is one of
// the metric interfaces of package metrics, or a counter by label.
func Or[M any](metric M) M {
	if any(metric) != nil {
		return metric
	}
	if m, ok := any(Metric{}).(M); ok {
		return m
	}
	return any(ByLabel{}).(M)
}
