package main

import (
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// queueMetrics are the per-queue gauges of PodGroups by phase, labelled by
// queue name: the counts of the queue's status as last written, set on
// every sync and deleted with the queue.
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
			Help: "PodGroups of the queue in phase " + string(phase) + ", as of the queue's status last written.",
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

// workqueueFigures are one work queue's workqueue_* metrics, as a scrape
// of /metrics shows them.
type workqueueFigures struct {
	depth   int           // items waiting to be handed out
	delayed int           // items waiting for a retry's backoff
	adds    uint64        // items that entered the queue
	retries uint64        // AddRateLimited and AddAfter calls: adds after a delay
	gets    uint64        // items handed out: one queue_duration observation each
	dones   uint64        // items marked done: one work_duration observation each
	waited  time.Duration // summed time from an item's add to its Get
}

// workqueueFigures reads, in one gather, the workqueue metrics of every
// work queue, by name.
func (m *queueMetrics) workqueueFigures() (map[string]workqueueFigures, error) {
	families, err := m.registry.Gather()
	if err != nil {
		return nil, err
	}
	figures := make(map[string]workqueueFigures)
	for _, family := range families {
		for _, metric := range family.GetMetric() {
			i := slices.IndexFunc(metric.GetLabel(), func(l *dto.LabelPair) bool { return l.GetName() == "name" })
			if i < 0 {
				continue
			}
			name := metric.GetLabel()[i].GetValue()
			f := figures[name]
			switch family.GetName() {
			case "workqueue_depth":
				f.depth = int(metric.GetGauge().GetValue())
			case "workqueue_delayed_items":
				f.delayed = int(metric.GetGauge().GetValue())
			case "workqueue_adds_total":
				f.adds = uint64(metric.GetCounter().GetValue())
			case "workqueue_retries_total":
				f.retries = uint64(metric.GetCounter().GetValue())
			case "workqueue_queue_duration_seconds": // observed by every Get
				f.gets = metric.GetHistogram().GetSampleCount()
				f.waited = time.Duration(metric.GetHistogram().GetSampleSum() * float64(time.Second))
			case "workqueue_work_duration_seconds": // observed by every Done
				f.dones = metric.GetHistogram().GetSampleCount()
			default:
				continue
			}
			figures[name] = f
		}
	}
	return figures, nil
}

// workqueueActivity is what the controller's work queues are doing, summed
// over them.
type workqueueActivity struct {
	queued   int    // items waiting to be handed out
	delayed  int    // items waiting for a retry's backoff
	inFlight int    // items handed out and not yet done
	gets     uint64 // items handed out so far; it only grows
}

// busy reports whether an item is queued, waiting for a retry or being
// processed.
func (a workqueueActivity) busy() bool { return a.queued > 0 || a.delayed > 0 || a.inFlight > 0 }

// workqueueActivity reads, in one gather, what the named work queues are
// doing. Every one of these figures changes under the work queue's own lock
// as an item moves, so no item is ever missing from all of them; gets, which
// only grows, tells two readings with no hand-out between them apart.
func (m *queueMetrics) workqueueActivity(names ...string) (workqueueActivity, error) {
	figures, err := m.workqueueFigures()
	if err != nil {
		return workqueueActivity{}, err
	}
	var a workqueueActivity
	for _, name := range names {
		f := figures[name]
		a.queued += f.depth
		a.delayed += f.delayed
		a.inFlight += int(f.gets - f.dones)
		a.gets += f.gets
	}
	return a, nil
}
