package main

import (
	"github.com/prometheus/client_golang/prometheus"
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

// delayedItems reads the work queue's workqueue_delayed_items gauge: the
// requests waiting for a retry or a requeue.
func (m *queueMetrics) delayedItems(workqueueName string) float64 {
	families, err := m.registry.Gather()
	if err != nil {
		return 0
	}
	for _, family := range families {
		if family.GetName() != "workqueue_delayed_items" {
			continue
		}
		for _, metric := range family.GetMetric() {
			for _, label := range metric.GetLabel() {
				if label.GetName() == "name" && label.GetValue() == workqueueName {
					return metric.GetGauge().GetValue()
				}
			}
		}
	}
	return 0
}
