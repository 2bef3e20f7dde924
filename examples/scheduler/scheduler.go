package main

import (
	"cmp"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"

	"github.com/go-workqueue/workqueue"
)

// The events a parked pod waits for.
const (
	nodeAdded  = "node-added"
	podDeleted = "pod-deleted"
)

type pod struct {
	name     string
	priority int
	cpu      int
	node     string // "" while pending
}

type node struct {
	name string
	cpu  int
	used int
}

func (n *node) free() int { return n.cpu - n.used }

// scheduler holds the cluster and the scheduling queue of pod names. It is
// used from one goroutine: the scenario's steps and the scheduling loop
// take turns, so that the timeline is the same on every run.
type scheduler struct {
	out   io.Writer
	tick  int
	queue *workqueue.TypedPriorityQueue[string]
	pods  map[string]*pod
	nodes map[string]*node

	attempts, binds, parks, wakes int
}

func newScheduler(out io.Writer) *scheduler {
	// No park backoff: the scenario has no clock, so a woken pod is queued
	// at once. kube-scheduler backs a pod off 1 s, doubling to 10 s, after
	// each failed attempt; ParkBackoff with those delays gives the same
	// here, on a real clock.
	noBackoff := workqueue.NewTypedItemExponentialFailureRateLimiter[string](0, 0)
	config := workqueue.TypedPriorityQueueConfig[string]{
		ParkBackoff: noBackoff,
		// The placement lists the pods still parked at the end; the
		// shutdown that drops them need not log them too.
		Logger: slog.New(slog.DiscardHandler),
	}
	return &scheduler{
		out:   out,
		queue: workqueue.NewTypedPriorityQueue(workqueue.DefaultTypedControllerRateLimiter[string](), config),
		pods:  map[string]*pod{},
		nodes: map[string]*node{},
	}
}

func (s *scheduler) logf(format string, args ...any) {
	fmt.Fprintf(s.out, "t=%-3d %s\n", s.tick, fmt.Sprintf(format, args...))
}

// scheduleAll runs the scheduling loop until no pod is queued: the highest
// priority first, first come first served within one.
func (s *scheduler) scheduleAll() {
	for s.queue.Len() > 0 {
		name, _, _ := s.queue.GetWithPriority()
		s.schedule(name)
		s.queue.Done(name)
	}
}

// schedule binds the pod to the node it fits best, the one it leaves the
// least CPU free on, or parks it until a node joins or a pod is deleted.
func (s *scheduler) schedule(name string) {
	p := s.pods[name]
	if p == nil || p.node != "" {
		s.queue.Forget(name) // finished or bound meanwhile
		return
	}
	s.attempts++
	var best *node
	for _, n := range s.sortedNodes() {
		if n.free() >= p.cpu && (best == nil || n.free() < best.free()) {
			best = n
		}
	}
	if best == nil {
		s.parks++
		s.queue.Park(name, nodeAdded, podDeleted)
		s.logf("%s (priority %d, %d cpu) fits no node: parked until %s or %s", name, p.priority, p.cpu, nodeAdded, podDeleted)
		return
	}
	best.used += p.cpu
	p.node = best.name
	s.binds++
	s.queue.Forget(name)
	s.logf("%s (priority %d, %d cpu) bound to %s, %d of %d cpu used", name, p.priority, p.cpu, best.name, best.used, best.cpu)
}

// wake wakes the pods parked until event that fit n now.
func (s *scheduler) wake(event string, n *node) {
	woken := s.queue.WakeFunc(event, func(name string) bool { return s.pods[name].cpu <= n.free() })
	s.wakes += woken
	if woken > 0 {
		s.logf("%s: woke %d parked pod(s) that fit %s (%d cpu free)", event, woken, n.name, n.free())
	}
}

func (s *scheduler) sortedNodes() []*node {
	return slices.SortedFunc(maps.Values(s.nodes), func(a, b *node) int { return cmp.Compare(a.name, b.name) })
}

func (s *scheduler) boundPods() []*pod {
	var bound []*pod
	for _, p := range s.pods {
		if p.node != "" {
			bound = append(bound, p)
		}
	}
	slices.SortFunc(bound, func(a, b *pod) int { return cmp.Compare(a.name, b.name) })
	return bound
}

// event is one step of a scenario. pick chooses the pod that finishes or
// the node that leaves among those there are at that point.
type event struct {
	kind     string
	name     string
	cpu      int
	priority int
	pick     uint64
}

const (
	podAdded    = "pod added"
	podFinished = "pod finished"
	nodeRemoved = "node removed"
)

func (e event) apply(s *scheduler) {
	switch e.kind {
	case podAdded:
		s.pods[e.name] = &pod{name: e.name, priority: e.priority, cpu: e.cpu}
		s.logf("%s arrives: priority %d, %d cpu", e.name, e.priority, e.cpu)
		s.queue.AddWithOpts(workqueue.AddOpts{Priority: &e.priority}, e.name)
	case podFinished:
		bound := s.boundPods()
		if len(bound) == 0 {
			s.logf("no pod running to finish")
			return
		}
		p := bound[e.pick%uint64(len(bound))]
		n := s.nodes[p.node]
		n.used -= p.cpu
		delete(s.pods, p.name)
		s.logf("%s finishes on %s: %d cpu free", p.name, n.name, n.free())
		s.wake(podDeleted, n)
	case nodeAdded:
		n := &node{name: e.name, cpu: e.cpu}
		s.nodes[n.name] = n
		s.logf("%s joins with %d cpu", n.name, n.cpu)
		s.wake(nodeAdded, n)
	case nodeRemoved:
		nodes := s.sortedNodes()
		if len(nodes) < 2 {
			s.logf("the last node stays")
			return
		}
		n := nodes[e.pick%uint64(len(nodes))]
		delete(s.nodes, n.name)
		s.logf("%s leaves", n.name)
		for _, p := range s.boundPods() {
			if p.node == n.name {
				p.node = ""
				s.logf("%s evicted from %s", p.name, n.name)
				s.queue.AddWithOpts(workqueue.AddOpts{Priority: &p.priority}, p.name)
			}
		}
	}
}

// printPlacement prints the nodes with their pods, the pods still pending,
// and what the scheduling loop did.
func (s *scheduler) printPlacement() {
	fmt.Fprintln(s.out, "\nplacement:")
	for _, n := range s.sortedNodes() {
		var names []string
		for _, p := range s.boundPods() {
			if p.node == n.name {
				names = append(names, p.name)
			}
		}
		fmt.Fprintf(s.out, "  %-7s %d/%d cpu  %s\n", n.name, n.used, n.cpu, strings.Join(names, " "))
	}
	snapshot := s.queue.Snapshot(len(s.pods))
	var pending []string
	for _, p := range snapshot.ParkedItems {
		pending = append(pending, fmt.Sprintf("%s (priority %d, %d cpu)", p.Item, s.pods[p.Item].priority, s.pods[p.Item].cpu))
	}
	if len(pending) == 0 {
		pending = []string{"none"}
	}
	fmt.Fprintf(s.out, "  parked  %s\n", strings.Join(pending, ", "))
	fmt.Fprintf(s.out, "\n%d scheduling attempts: %d bound, %d parked; %d pods woken by events\n", s.attempts, s.binds, s.parks, s.wakes)
}
