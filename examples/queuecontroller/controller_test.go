package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/go-workqueue/workqueue"
)

// newTestController returns a controller watching store whose workers do
// not run: tests call its handlers and actions and look at what it queued.
func newTestController(t *testing.T, store *Store, failureRate float64) *controller {
	t.Helper()
	c := newController(store, controllerConfig{
		workers: 1, maxRequeueNum: -1, failureRate: failureRate, seed: 1,
		registry: prometheus.NewRegistry(), timeline: newTimeline(io.Discard), logger: slog.New(slog.DiscardHandler),
	})
	t.Cleanup(func() {
		c.queue.ShutDown()
		c.commandQueue.ShutDown()
	})
	return c
}

// takeQueued removes and returns everything queued in q, in order.
func takeQueued[T comparable](q workqueue.TypedRateLimitingInterface[T]) []T {
	var items []T
	for q.Len() > 0 {
		item, _ := q.Get()
		items = append(items, item)
		q.Done(item)
	}
	return items
}

func syncReq(name string) request  { return request{QueueName: name, Action: SyncQueueAction} }
func openReq(name string) request  { return request{QueueName: name, Action: OpenQueueAction} }
func closeReq(name string) request { return request{QueueName: name, Action: CloseQueueAction} }

func mustGetQueue(t *testing.T, store *Store, name string) Queue {
	t.Helper()
	q, err := store.Queues.get(name)
	require.NoError(t, err)
	return q
}

func TestQueueHandlers(t *testing.T) {
	tests := []struct {
		name   string
		change func(t *testing.T, s *Store)
		want   []request
	}{
		{"add queues a sync", func(t *testing.T, s *Store) {
			require.NoError(t, s.Queues.create(Queue{Name: "b", Parent: "root"}))
		}, []request{syncReq("b")}},
		{"a parent change queues a sync", func(t *testing.T, s *Store) {
			q := mustGetQueue(t, s, "a")
			q.Parent = "other"
			_, err := s.Queues.update(q)
			require.NoError(t, err)
		}, []request{syncReq("a")}},
		{"a status change queues nothing", func(t *testing.T, s *Store) {
			q := mustGetQueue(t, s, "a")
			q.Status.Running = 3
			_, err := s.Queues.update(q)
			require.NoError(t, err)
		}, nil},
		{"an annotation change queues nothing", func(t *testing.T, s *Store) {
			q := mustGetQueue(t, s, "a")
			q.Annotations = map[string]string{closedByParentAnnotation: "true"}
			_, err := s.Queues.update(q)
			require.NoError(t, err)
		}, nil},
		{"delete queues nothing", func(t *testing.T, s *Store) {
			require.NoError(t, s.Queues.delete("a"))
		}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := NewStore()
			require.NoError(t, store.Queues.create(Queue{Name: "root"}))
			require.NoError(t, store.Queues.create(Queue{Name: "a", Parent: "root"}))
			c := newTestController(t, store, 0)
			assert.ElementsMatch(t, []request{syncReq("root"), syncReq("a")}, takeQueued(c.queue), "existing queues are listed at start")
			tt.change(t, store)
			assert.Equal(t, tt.want, takeQueued(c.queue))
		})
	}
}

func TestDeleteQueueDropsGaugesAndTracking(t *testing.T) {
	store := NewStore()
	require.NoError(t, store.Queues.create(Queue{Name: "root"}))
	require.NoError(t, store.Queues.create(Queue{Name: "a", Parent: "root"}))
	require.NoError(t, store.PodGroups.create(PodGroup{Namespace: "ns", Name: "pg", Queue: "a", Phase: PodGroupRunning}))
	c := newTestController(t, store, 0)
	require.NoError(t, c.handleQueue(syncReq("a")))
	gauge := c.metrics.byPhase[PodGroupRunning]
	assert.Equal(t, 1.0, testutil.ToFloat64(gauge.WithLabelValues("a")))
	require.NoError(t, c.handleQueue(syncReq("root")))
	assert.Equal(t, 2, testutil.CollectAndCount(gauge), "series for root and a")

	queue := mustGetQueue(t, store, "a")
	require.NoError(t, store.Queues.delete("a"))
	assert.Equal(t, 1, testutil.CollectAndCount(gauge), "only root's series is left")
	assert.Empty(t, c.trackedPodGroups("a"))

	// A sync that read the queue before the deletion brings nothing back.
	require.Error(t, c.syncQueue(queue, setState(QueueStateOpen)))
	assert.Equal(t, 1, testutil.CollectAndCount(gauge))
}

func TestPodGroupHandlers(t *testing.T) {
	tests := []struct {
		name        string
		change      func(t *testing.T, s *Store)
		want        []request
		wantTracked []string
	}{
		{"add tracks it and syncs its queue", func(t *testing.T, s *Store) {
			require.NoError(t, s.PodGroups.create(PodGroup{Namespace: "ns", Name: "new", Queue: "a", Phase: PodGroupPending}))
		}, []request{syncReq("a")}, []string{"ns/new", "ns/pg"}},
		{"a phase change syncs its queue", func(t *testing.T, s *Store) {
			require.NoError(t, setPhase(s, "ns/pg", PodGroupRunning))
		}, []request{syncReq("a")}, []string{"ns/pg"}},
		{"an update in the same phase queues nothing", func(t *testing.T, s *Store) {
			require.NoError(t, setPhase(s, "ns/pg", PodGroupPending))
		}, nil, []string{"ns/pg"}},
		{"delete untracks it and syncs its queue", func(t *testing.T, s *Store) {
			require.NoError(t, s.PodGroups.delete("ns/pg"))
		}, []request{syncReq("a")}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := NewStore()
			require.NoError(t, store.Queues.create(Queue{Name: "a", Parent: "root"}))
			require.NoError(t, store.PodGroups.create(PodGroup{Namespace: "ns", Name: "pg", Queue: "a", Phase: PodGroupPending}))
			c := newTestController(t, store, 0)
			assert.Equal(t, []request{syncReq("a")}, takeQueued(c.queue))
			tt.change(t, store)
			assert.Equal(t, tt.want, takeQueued(c.queue))
			assert.Equal(t, tt.wantTracked, c.trackedPodGroups("a"))
		})
	}
}

func TestSyncQueue(t *testing.T) {
	store := NewStore()
	require.NoError(t, store.Queues.create(Queue{Name: "a"}))
	for i, phase := range []PodGroupPhase{PodGroupPending, PodGroupRunning, PodGroupRunning, PodGroupUnknown, PodGroupInqueue, PodGroupCompleted} {
		require.NoError(t, store.PodGroups.create(PodGroup{Namespace: "ns", Name: string(rune('a' + i)), Queue: "a", Phase: phase}))
	}
	c := newTestController(t, store, 0)
	c.pgMutex.Lock()
	c.podGroups["a"]["ns/gone"] = struct{}{} // deleted while the controller missed the event
	c.pgMutex.Unlock()

	require.NoError(t, c.handleQueue(syncReq("a")))
	queue := mustGetQueue(t, store, "a")
	assert.Equal(t, "root", queue.Parent, "a queue without a parent gets root")
	assert.Equal(t, QueueStatus{State: QueueStateOpen, Pending: 1, Running: 2, Unknown: 1, Inqueue: 1, Completed: 1}, queue.Status)
	assert.NotContains(t, c.trackedPodGroups("a"), "ns/gone", "a PodGroup that no longer exists is dropped")
	assert.Equal(t, 2.0, testutil.ToFloat64(c.metrics.byPhase[PodGroupRunning].WithLabelValues("a")))

	require.NoError(t, c.handleQueue(syncReq("a")))
	assert.Equal(t, queue.ResourceVersion, mustGetQueue(t, store, "a").ResourceVersion, "an unchanged status is not written")

	require.NoError(t, c.handleQueue(syncReq("missing")), "a deleted queue needs nothing")
}

func TestInvalidStateIsAnError(t *testing.T) {
	store := NewStore()
	require.NoError(t, store.Queues.create(Queue{Name: "a", Parent: "root", Status: QueueStatus{State: "Paused"}}))
	c := newTestController(t, store, 0)
	assert.EqualError(t, c.handleQueue(syncReq("a")), `queue "a" has invalid state "Paused"`)
}

// hierarchy creates root > team-a > dev, prod in the given states.
func hierarchy(t *testing.T, states map[string]QueueState, annotated ...string) *Store {
	t.Helper()
	store := NewStore()
	for _, q := range []Queue{{Name: "root"}, {Name: "team-a", Parent: "root"}, {Name: "dev", Parent: "team-a"}, {Name: "prod", Parent: "team-a"}} {
		q.Status.State = states[q.Name]
		require.NoError(t, store.Queues.create(q))
	}
	for _, name := range annotated {
		q := mustGetQueue(t, store, name)
		q.Annotations = map[string]string{closedByParentAnnotation: "true"}
		_, err := store.Queues.update(q)
		require.NoError(t, err)
	}
	return store
}

func TestHierarchicalQueues(t *testing.T) {
	tests := []struct {
		name          string
		states        map[string]QueueState
		annotated     []string
		podGroupsIn   string
		handle        request
		wantErr       string
		wantStates    map[string]QueueState
		wantAnnotated []string
		wantQueued    []request
		wantEvent     string
	}{
		{
			name:          "closing a parent marks its open children and closes them",
			states:        map[string]QueueState{"root": "Open", "team-a": "Open", "dev": "Open", "prod": "Closed"},
			handle:        closeReq("team-a"),
			wantStates:    map[string]QueueState{"team-a": QueueStateClosed, "dev": QueueStateOpen, "prod": QueueStateClosed},
			wantAnnotated: []string{"dev"},
			wantQueued:    []request{closeReq("dev")},
		},
		{
			name:        "a parent with PodGroups is Closing",
			states:      map[string]QueueState{"root": "Open", "team-a": "Open", "dev": "Closed", "prod": "Closed"},
			podGroupsIn: "team-a",
			handle:      closeReq("team-a"),
			wantStates:  map[string]QueueState{"team-a": QueueStateClosing},
		},
		{
			name:       "root cannot be closed",
			states:     map[string]QueueState{"root": "Open", "team-a": "Open"},
			handle:     closeReq("root"),
			wantStates: map[string]QueueState{"root": QueueStateOpen, "team-a": QueueStateOpen},
			wantEvent:  "the root queue cannot be closed",
		},
		{
			name:       "opening under a closed parent is refused",
			states:     map[string]QueueState{"root": "Open", "team-a": "Closed", "dev": "Closed"},
			annotated:  []string{"dev"},
			handle:     openReq("dev"),
			wantErr:    "open dev: parent team-a is Closed",
			wantStates: map[string]QueueState{"dev": QueueStateClosed},
			// The mark stays until the open succeeds.
			wantAnnotated: []string{"dev"},
		},
		{
			name:       "opening under a closing parent is refused",
			states:     map[string]QueueState{"root": "Open", "team-a": "Closing", "dev": "Closed"},
			handle:     openReq("dev"),
			wantErr:    "open dev: parent team-a is Closing",
			wantStates: map[string]QueueState{"dev": QueueStateClosed},
		},
		{
			name:       "opening a parent opens the children it closed, not the others",
			states:     map[string]QueueState{"root": "Open", "team-a": "Closed", "dev": "Closed", "prod": "Closed"},
			annotated:  []string{"team-a", "dev"},
			handle:     openReq("team-a"),
			wantStates: map[string]QueueState{"team-a": QueueStateOpen, "dev": QueueStateClosed, "prod": QueueStateClosed},
			// team-a's own mark is cleared by its opening.
			wantAnnotated: []string{"dev"},
			wantQueued:    []request{openReq("dev")},
		},
		{
			name:          "a child closed by its parent opens when the parent is open",
			states:        map[string]QueueState{"root": "Open", "team-a": "Open", "dev": "Closed"},
			annotated:     []string{"dev"},
			handle:        syncReq("dev"),
			wantStates:    map[string]QueueState{"dev": QueueStateClosed},
			wantAnnotated: []string{"dev"},
			wantQueued:    []request{openReq("dev")},
		},
		{
			name:       "a child closed on its own stays closed under an open parent",
			states:     map[string]QueueState{"root": "Open", "team-a": "Open", "dev": "Closed"},
			handle:     syncReq("dev"),
			wantStates: map[string]QueueState{"dev": QueueStateClosed},
		},
		{
			name:          "an open child under a closing parent is closed",
			states:        map[string]QueueState{"root": "Open", "team-a": "Closing", "dev": "Open"},
			handle:        syncReq("dev"),
			wantStates:    map[string]QueueState{"dev": QueueStateOpen},
			wantAnnotated: []string{"dev"},
			wantQueued:    []request{closeReq("dev")},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := hierarchy(t, tt.states, tt.annotated...)
			if tt.podGroupsIn != "" {
				require.NoError(t, store.PodGroups.create(PodGroup{Namespace: "ns", Name: "pg", Queue: tt.podGroupsIn, Phase: PodGroupRunning}))
			}
			var timeline bytes.Buffer
			c := newTestController(t, store, 0)
			c.timeline = newTimeline(&timeline)
			takeQueued(c.queue)

			err := c.handleQueue(tt.handle)
			if tt.wantErr != "" {
				assert.EqualError(t, err, tt.wantErr)
			} else {
				assert.NoError(t, err)
			}
			for name, want := range tt.wantStates {
				assert.Equal(t, want, mustGetQueue(t, store, name).Status.State, name)
			}
			var annotated []string
			for _, q := range store.Queues.list() {
				if q.closedByParent() {
					annotated = append(annotated, q.Name)
				}
			}
			assert.Equal(t, tt.wantAnnotated, annotated, "queues marked closed-by-parent")
			assert.Equal(t, tt.wantQueued, takeQueued(c.queue))
			assert.Contains(t, timeline.String(), tt.wantEvent)
		})
	}
}

func TestCommands(t *testing.T) {
	closeA := Command{Namespace: "admin", Name: "close-a", TargetKind: "Queue", TargetName: "a", Action: CloseQueueAction}
	tests := []struct {
		name          string
		failureRate   float64
		deleteFirst   bool
		wantErr       bool
		wantQueued    []request
		wantRemaining int
	}{
		{name: "the command is deleted, then its request queued", wantQueued: []request{closeReq("a")}},
		{name: "a command deleted already was handled", deleteFirst: true},
		{name: "a failed delete is retried and queues nothing", failureRate: 0.999, wantErr: true, wantRemaining: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := NewStore()
			c := newTestController(t, store, tt.failureRate)
			require.NoError(t, store.Commands.create(closeA))
			require.NoError(t, store.Commands.create(Command{Namespace: "admin", Name: "abort", TargetKind: "Job", TargetName: "a", Action: "AbortJob"}))
			assert.Equal(t, []Command{closeA}, takeQueued(c.commandQueue), "only commands for queues are queued")
			if tt.deleteFirst {
				require.NoError(t, store.Commands.delete(closeA.Key()))
			}
			err := c.handleCommand(closeA)
			assert.Equal(t, tt.wantErr, err != nil, "error: %v", err)
			assert.Equal(t, tt.wantQueued, takeQueued(c.queue))
			_, getErr := store.Commands.get(closeA.Key())
			assert.Equal(t, tt.wantRemaining == 1, getErr == nil, "command still stored")
		})
	}
}

// TestRetryLimits runs the controller against a store whose writes always
// fail and counts the attempts of one request.
func TestRetryLimits(t *testing.T) {
	tests := []struct {
		name          string
		maxRequeueNum int
		wantAttempts  int // 0: at least 10, still going
		wantWarning   bool
	}{
		{"no retries", 0, 1, true},
		{"three retries", 3, 4, true},
		{"unlimited", -1, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				store := NewStore()
				require.NoError(t, store.Queues.create(Queue{Name: "a"})) // no parent: syncing writes one
				var timeline bytes.Buffer
				tl := newTimeline(&timeline)
				c := newController(store, controllerConfig{
					workers: 2, maxRequeueNum: tt.maxRequeueNum, failureRate: 1, seed: 1,
					registry: prometheus.NewRegistry(), timeline: tl, logger: slog.New(slog.DiscardHandler),
				})
				ctx, cancel := context.WithCancel(t.Context())
				stopped := make(chan struct{})
				go func() {
					c.run(ctx)
					close(stopped)
				}()
				time.Sleep(10 * time.Minute)
				cancel()
				<-stopped

				attempts := tl.failureCount()
				if tt.wantAttempts > 0 {
					assert.Equal(t, tt.wantAttempts, attempts)
				} else {
					assert.GreaterOrEqual(t, attempts, 10)
				}
				var warnings []recordedEvent
				for _, e := range tl.recorded() {
					if e.Type == eventWarning {
						warnings = append(warnings, e)
					}
				}
				if tt.wantWarning {
					require.Len(t, warnings, 1)
					assert.Equal(t, "a", warnings[0].Object)
					assert.Contains(t, warnings[0].Message, "injected transient error")
				} else {
					assert.Empty(t, warnings)
				}
			})
		})
	}
}

// TestOneReconcilePerQueue checks the request queue's group limit: while a
// request about a Queue is in flight, the other requests about it wait,
// and requests about other Queues are handed out past them.
func TestOneReconcilePerQueue(t *testing.T) {
	c := newTestController(t, NewStore(), 0)
	for _, req := range []request{syncReq("dev"), openReq("dev"), closeReq("dev"), syncReq("prod")} {
		c.queue.Add(req)
	}
	first, _ := c.queue.Get()
	second, _ := c.queue.Get()
	assert.Equal(t, []request{syncReq("dev"), syncReq("prod")}, []request{first, second}, "prod's request passes dev's")
	snapshot := c.queue.Snapshot(10)
	assert.Equal(t, 2, snapshot.WaitingForSlot, "dev's open and close wait for its sync")
	assert.Equal(t, []workqueue.GroupState{
		{Group: "dev", Limit: reconcilesPerQueue, InFlight: 1, Queued: 2, Waiting: 2},
		{Group: "prod", Limit: reconcilesPerQueue, InFlight: 1},
	}, snapshot.Groups)

	c.queue.Done(first)
	third, _ := c.queue.Get()
	assert.Equal(t, openReq("dev"), third, "dev's sync done, its open goes next")
	c.queue.Done(second)
	c.queue.Done(third)
	assert.Equal(t, []request{closeReq("dev")}, takeQueued(c.queue))
}
