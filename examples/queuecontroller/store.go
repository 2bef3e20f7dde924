package main

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// The objects the controller watches: the fields of Volcano's Queue,
// PodGroup and Command that the queue controller reads or writes.

// QueueState is the state of a Queue.
type QueueState string

// The four queue states. A new queue has state "", which is treated as Open.
const (
	QueueStateOpen    QueueState = "Open"
	QueueStateClosed  QueueState = "Closed"
	QueueStateClosing QueueState = "Closing"
	QueueStateUnknown QueueState = "Unknown"
)

// Action is what a request asks of a queue.
type Action string

// The actions a request or a Command can carry.
const (
	SyncQueueAction  Action = "SyncQueue"
	OpenQueueAction  Action = "OpenQueue"
	CloseQueueAction Action = "CloseQueue"
)

// rootQueue is the top of the hierarchy: the default parent, never closed.
const rootQueue = "root"

// closedByParentAnnotation marks a queue that was closed because its parent
// was, so that opening the parent opens it again.
const closedByParentAnnotation = "volcano.sh/closed-by-parent"

// Queue is a queue object: its spec (parent), annotations and status.
type Queue struct {
	Name            string
	Parent          string
	Annotations     map[string]string
	Status          QueueStatus
	ResourceVersion int64
}

// QueueStatus is what the controller writes: the state and how many of the
// queue's PodGroups are in each phase.
type QueueStatus struct {
	State     QueueState
	Unknown   int32
	Pending   int32
	Running   int32
	Inqueue   int32
	Completed int32
}

// closedByParent reports whether the queue carries the closed-by-parent mark.
func (q Queue) closedByParent() bool { return q.Annotations[closedByParentAnnotation] == "true" }

// PodGroupPhase is the phase of a PodGroup.
type PodGroupPhase string

// The PodGroup phases the controller counts.
const (
	PodGroupPending   PodGroupPhase = "Pending"
	PodGroupRunning   PodGroupPhase = "Running"
	PodGroupUnknown   PodGroupPhase = "Unknown"
	PodGroupInqueue   PodGroupPhase = "Inqueue"
	PodGroupCompleted PodGroupPhase = "Completed"
)

// PodGroup is a group of pods scheduled together, submitted to a queue.
type PodGroup struct {
	Namespace, Name string
	Queue           string
	Phase           PodGroupPhase
	ResourceVersion int64
}

// Key returns the PodGroup's namespace/name.
func (pg PodGroup) Key() string { return pg.Namespace + "/" + pg.Name }

// Command is a one-shot instruction to act on an object: here, to open,
// close or sync a queue.
type Command struct {
	Namespace, Name string
	TargetKind      string // "Queue" for the commands this controller handles
	TargetName      string
	Action          Action
}

// Key returns the Command's namespace/name.
func (c Command) Key() string { return c.Namespace + "/" + c.Name }

var (
	errNotFound      = errors.New("not found")
	errAlreadyExists = errors.New("already exists")
	errConflict      = errors.New("the object has been modified; apply the change to the latest version")
	errInjected      = errors.New("injected transient error")
)

// EventHandler receives a kind's watch events, like an informer's handler.
// Nil functions are skipped.
type EventHandler[O any] struct {
	OnAdd    func(obj O)
	OnUpdate func(oldObj, newObj O)
	OnDelete func(obj O)
}

// kindStore holds the objects of one kind, keyed by key, and delivers watch
// events. Events are delivered synchronously, in the order of the writes,
// while the store's lock is held: handlers must not call the store.
type kindStore[O any] struct {
	kind     string
	key      func(O) string
	clone    func(O) O
	version  func(*O) *int64 // nil for kinds without optimistic concurrency
	revision *atomic.Int64   // the store-wide write counter

	mu       sync.Mutex
	objects  map[string]O
	handlers []EventHandler[O]
}

func (s *kindStore[O]) get(key string) (O, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	obj, ok := s.objects[key]
	if !ok {
		var zero O
		return zero, fmt.Errorf("%s %q: %w", s.kind, key, errNotFound)
	}
	return s.clone(obj), nil
}

// list returns copies of every object, sorted by key.
func (s *kindStore[O]) list() []O {
	s.mu.Lock()
	defer s.mu.Unlock()
	keys := slices.Sorted(maps.Keys(s.objects))
	out := make([]O, len(keys))
	for i, key := range keys {
		out[i] = s.clone(s.objects[key])
	}
	return out
}

func (s *kindStore[O]) create(obj O) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := s.key(obj)
	if _, ok := s.objects[key]; ok {
		return fmt.Errorf("%s %q: %w", s.kind, key, errAlreadyExists)
	}
	obj = s.clone(obj)
	s.bump(&obj)
	s.objects[key] = obj
	for _, h := range s.handlers {
		if h.OnAdd != nil {
			h.OnAdd(s.clone(obj))
		}
	}
	return nil
}

// update replaces the stored object with obj. For kinds with versions, obj
// must carry the stored version, as the API server's optimistic concurrency
// demands; it returns the object as stored.
func (s *kindStore[O]) update(obj O) (O, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := s.key(obj)
	old, ok := s.objects[key]
	if !ok {
		var zero O
		return zero, fmt.Errorf("%s %q: %w", s.kind, key, errNotFound)
	}
	if s.version != nil && *s.version(&obj) != *s.version(&old) {
		var zero O
		return zero, fmt.Errorf("%s %q: %w", s.kind, key, errConflict)
	}
	obj = s.clone(obj)
	s.bump(&obj)
	s.objects[key] = obj
	for _, h := range s.handlers {
		if h.OnUpdate != nil {
			h.OnUpdate(s.clone(old), s.clone(obj))
		}
	}
	return s.clone(obj), nil
}

func (s *kindStore[O]) delete(key string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	obj, ok := s.objects[key]
	if !ok {
		return fmt.Errorf("%s %q: %w", s.kind, key, errNotFound)
	}
	delete(s.objects, key)
	s.revision.Add(1)
	for _, h := range s.handlers {
		if h.OnDelete != nil {
			h.OnDelete(s.clone(obj))
		}
	}
	return nil
}

// watch registers h and, like an informer's initial list, delivers an add
// event for every object already stored.
func (s *kindStore[O]) watch(h EventHandler[O]) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.handlers = append(s.handlers, h)
	if h.OnAdd == nil {
		return
	}
	for _, key := range slices.Sorted(maps.Keys(s.objects)) {
		h.OnAdd(s.clone(s.objects[key]))
	}
}

func (s *kindStore[O]) bump(obj *O) {
	revision := s.revision.Add(1)
	if s.version != nil {
		*s.version(obj) = revision
	}
}

// Store stands in for the API server and the informer caches: it holds the
// Queue, PodGroup and Command objects, delivers watch events and takes the
// controller's writes. All methods are safe for concurrent use.
type Store struct {
	revision atomic.Int64

	Queues    *kindStore[Queue]
	PodGroups *kindStore[PodGroup]
	Commands  *kindStore[Command]
}

// NewStore returns an empty store.
func NewStore() *Store {
	s := &Store{}
	s.Queues = &kindStore[Queue]{
		kind: "queue", key: func(q Queue) string { return q.Name },
		clone: func(q Queue) Queue {
			q.Annotations = maps.Clone(q.Annotations)
			return q
		},
		version: func(q *Queue) *int64 { return &q.ResourceVersion },
	}
	s.PodGroups = &kindStore[PodGroup]{
		kind: "podgroup", key: PodGroup.Key, clone: func(pg PodGroup) PodGroup { return pg },
		version: func(pg *PodGroup) *int64 { return &pg.ResourceVersion },
	}
	s.Commands = &kindStore[Command]{
		kind: "command", key: Command.Key, clone: func(c Command) Command { return c },
	}
	s.Queues.init(s)
	s.PodGroups.init(s)
	s.Commands.init(s)
	return s
}

// Revision counts the writes so far; it changes whenever an object does.
func (s *Store) Revision() int64 { return s.revision.Load() }

func (s *kindStore[O]) init(store *Store) {
	s.objects = make(map[string]O)
	s.revision = &store.revision
}

// faultyClient is the controller's view of the store: reads come from the
// cache and always work; each write fails with errInjected at the given rate,
// standing in for a flaky API server. For the live demo it can also be slow
// (each write takes a latency) and throttle (each write in a window is
// refused with a time to retry after), as a loaded API server is.
type faultyClient struct {
	store *Store

	mu        sync.Mutex
	rng       *rand.Rand
	rate      float64
	latency   time.Duration
	throttled time.Time     // writes before this are refused
	retry     time.Duration // the refusals' retry-after
}

func newFaultyClient(store *Store, failureRate float64, seed uint64) *faultyClient {
	return &faultyClient{store: store, rng: rand.New(rand.NewPCG(seed, seed)), rate: failureRate}
}

// slow makes every later write take latency.
func (c *faultyClient) slow(latency time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.latency = latency
}

// throttle refuses the writes of the next d with a throttledError that asks
// to retry after retryAfter.
func (c *faultyClient) throttle(d, retryAfter time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.throttled = time.Now().Add(d)
	c.retry = retryAfter
}

// write waits out the latency and tells whether the write of what fails.
func (c *faultyClient) write(what string) error {
	c.mu.Lock()
	latency, throttled, retry := c.latency, time.Now().Before(c.throttled), c.retry
	fail := c.rate > 0 && c.rng.Float64() < c.rate
	c.mu.Unlock()
	time.Sleep(latency)
	switch {
	case throttled:
		return &throttledError{what: what, retryAfter: retry}
	case fail:
		return fmt.Errorf("%s: %w", what, errInjected)
	}
	return nil
}

func (c *faultyClient) updateQueue(q Queue) (Queue, error) {
	if err := c.write(fmt.Sprintf("update queue %q", q.Name)); err != nil {
		return Queue{}, err
	}
	return c.store.Queues.update(q)
}

func (c *faultyClient) deleteCommand(key string) error {
	if err := c.write(fmt.Sprintf("delete command %q", key)); err != nil {
		return err
	}
	return c.store.Commands.delete(key)
}

// throttledError is a write the API server refused for now, as one under
// load answers 429 Too Many Requests with a Retry-After.
type throttledError struct {
	what       string
	retryAfter time.Duration
}

func (e *throttledError) Error() string {
	return fmt.Sprintf("%s: too many requests, retry after %v", e.what, e.retryAfter)
}
