package main

import (
	"slices"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// queueMetrics are the per-queue gauges of PodGroups by phase, labelled by
// queue name, set on every sync and deleted with the queue.
type queueMetrics struct {
	registry *prometheus.Registry
	byPhase  map[PodGroupPhase]*prometheus.GaugeVec
}

func newQueueMetrics(registry *prometheus.Registry) *queueMetrics {
	m := &queueMetrics{registry: registry, byPhase: make(map[PodGroupPhase]*prometheus.GaugeVec)}
	for phase, name := range map[PodGroupPhase]string{
		PodGroupInqueue:   "queue_pod_group_inqueue_count",
		PodGroupPending:   "queue_pod_group_pending_count",
		PodGroupRunning:   "queue_pod_group_running_count",
		PodGroupUnknown:   "queue_pod_group_unknown_count",
		PodGroupCompleted: "queue_pod_group_completed_count",
	} {
		m.byPhase[phase] = prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: name,
			Help: "PodGroups of the queue in phase " + string(phase) + ", as of the queue's last sync.",
		}, []string{"queue_name"})
		registry.MustRegister(m.byPhase[phase])
	}
	return m
}

func (m *queueMetrics) update(queueName string, status QueueStatus) {
	for phase, count := range map[PodGroupPhase]int32{
		PodGroupInqueue:   status.Inqueue,
		PodGroupPending:   status.Pending,
		PodGroupRunning:   status.Running,
		PodGroupUnknown:   status.Unknown,
		PodGroupCompleted: status.Completed,
	} {
		m.byPhase[phase].WithLabelValues(queueName).Set(float64(count))
	}
}

func (m *queueMetrics) delete(queueName string) {
	for _, gauge := range m.byPhase {
		gauge.DeleteLabelValues(queueName)
	}
}

// workqueueActivity reads, in one gather, the workqueue metrics of the
// named work queues: whether any of them has an item queued, waiting for a
// retry or being processed, and how many items they have handed out so far.
// Every one of these figures changes under the work queue's own lock as an
// item moves, so no item is ever missing from all of them; gets, which only
// grows, tells two readings with no hand-out between them apart.
func (m *queueMetrics) workqueueActivity(names ...string) (busy bool, gets uint64, err error) {
	families, err := m.registry.Gather()
	if err != nil {
		return false, 0, err
	}
	var dones uint64
	for _, family := range families {
		for _, metric := range family.GetMetric() {
			if !slices.ContainsFunc(metric.GetLabel(), func(l *dto.LabelPair) bool {
				return l.GetName() == "name" && slices.Contains(names, l.GetValue())
			}) {
				continue
			}
			switch family.GetName() {
			case "workqueue_depth", "workqueue_delayed_items":
				busy = busy || metric.GetGauge().GetValue() != 0
			case "workqueue_queue_duration_seconds": // observed by every Get
				gets += metric.GetHistogram().GetSampleCount()
			case "workqueue_work_duration_seconds": // observed by every Done
				dones += metric.GetHistogram().GetSampleCount()
			}
		}
	}
	return busy || gets != dones, gets, nil
}
