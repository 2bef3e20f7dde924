package main

import (
	"errors"
	"fmt"
	"maps"
)

// effectiveState reads "" (a queue not synced yet) as Open.
func effectiveState(queue Queue) QueueState {
	if queue.Status.State == "" {
		return QueueStateOpen
	}
	return queue.Status.State
}

func closedOrClosing(state QueueState) bool {
	return state == QueueStateClosed || state == QueueStateClosing
}

// parentOf returns the queue's parent, root for a queue that names none.
func parentOf(queue Queue) string {
	if queue.Parent == "" {
		return rootQueue
	}
	return queue.Parent
}

// syncQueue counts the queue's PodGroups by phase, lets updateStatus decide
// the state, writes the status if anything changed and then repairs the
// queue's state against its parent's.
func (c *controller) syncQueue(queue Queue, updateStatus updateStatusFn) error {
	queue, err := c.updateQueueParent(queue)
	if err != nil {
		return err
	}

	var status QueueStatus
	var present []string
	for _, key := range c.trackedPodGroups(queue.Name) {
		pg, err := c.store.PodGroups.get(key)
		if errors.Is(err, errNotFound) {
			c.untrackPodGroup(queue.Name, key)
			continue
		}
		if err != nil {
			return err
		}
		present = append(present, key)
		switch pg.Phase {
		case PodGroupPending:
			status.Pending++
		case PodGroupRunning:
			status.Running++
		case PodGroupUnknown:
			status.Unknown++
		case PodGroupInqueue:
			status.Inqueue++
		case PodGroupCompleted:
			status.Completed++
		}
	}
	if updateStatus != nil {
		updateStatus(&status, present)
	} else {
		status.State = queue.Status.State
	}
	if status != queue.Status {
		from := effectiveState(queue)
		queue.Status = status
		if queue, err = c.client.updateQueue(queue); err != nil {
			return err
		}
		c.recordStateChange(queue.Name, SyncQueueAction, from, effectiveState(queue))
	}
	// The gauges show the status as written, so that they agree with it
	// even when this write fails and is given up.
	c.updateMetrics(queue.Name, queue.Status)
	return c.syncHierarchicalQueue(queue)
}

// updateQueueParent gives a queue without a parent the root as its parent.
func (c *controller) updateQueueParent(queue Queue) (Queue, error) {
	if queue.Name == rootQueue || queue.Parent != "" {
		return queue, nil
	}
	queue.Parent = rootQueue
	updated, err := c.client.updateQueue(queue)
	if err != nil {
		return Queue{}, err
	}
	c.timeline.event(queue.Name, eventNormal, "SetParent", "parent defaulted to root")
	return updated, nil
}

// openQueue opens a queue whose parent is open, clears its closed-by-parent
// mark and then asks its children that were closed by it to open.
func (c *controller) openQueue(queue Queue, updateStatus updateStatusFn) error {
	if queue.Name != rootQueue {
		parent, err := c.store.Queues.get(parentOf(queue))
		if err != nil {
			return fmt.Errorf("open %s: %w", queue.Name, err)
		}
		if closedOrClosing(effectiveState(parent)) {
			// The request waits, parked, until the parent opens.
			return &parentClosedError{queue: queue.Name, parent: parent.Name, state: parent.Status.State}
		}
	}

	updated := queue
	updateStatus(&updated.Status, nil)
	if queue.closedByParent() {
		updated.Annotations = maps.Clone(queue.Annotations)
		delete(updated.Annotations, closedByParentAnnotation)
	}
	if updated.Status != queue.Status || queue.closedByParent() {
		if _, err := c.client.updateQueue(updated); err != nil {
			return err
		}
		c.recordStateChange(queue.Name, OpenQueueAction, effectiveState(queue), updated.Status.State)
	}
	c.opened(queue.Name)

	for _, child := range c.store.Queues.list() {
		if child.Parent == queue.Name && child.closedByParent() {
			c.enqueue(request{QueueName: child.Name, Action: OpenQueueAction})
		}
	}
	return nil
}

// closeQueue closes a queue, Closed if it has no PodGroups, Closing while
// it has some, then its open children, marking them closed by their
// parent. The queue goes first: a child marked closed by its parent while
// the parent still reads Open (its own update failed, or had not been
// made yet) is opened again by a sync that runs in between, and that open
// is then refused until the parent opens. The root queue cannot be closed.
func (c *controller) closeQueue(queue Queue, updateStatus updateStatusFn) error {
	if queue.Name == rootQueue {
		if !closedOrClosing(effectiveState(queue)) {
			c.timeline.event(queue.Name, eventWarning, string(CloseQueueAction), "the root queue cannot be closed")
		}
		return nil
	}
	updated := queue
	updateStatus(&updated.Status, c.presentPodGroups(queue.Name))
	if updated.Status != queue.Status {
		if _, err := c.client.updateQueue(updated); err != nil {
			return err
		}
		c.recordStateChange(queue.Name, CloseQueueAction, effectiveState(queue), updated.Status.State)
	}
	for _, child := range c.store.Queues.list() {
		if child.Parent != queue.Name || closedOrClosing(effectiveState(child)) {
			continue
		}
		if err := c.closeByParent(child); err != nil {
			return err
		}
	}
	return nil
}

// closeByParent marks child as closed by its parent and asks it to close.
func (c *controller) closeByParent(child Queue) error {
	if !child.closedByParent() {
		child.Annotations = maps.Clone(child.Annotations)
		if child.Annotations == nil {
			child.Annotations = make(map[string]string)
		}
		child.Annotations[closedByParentAnnotation] = "true"
		if _, err := c.client.updateQueue(child); err != nil {
			return err
		}
	}
	c.enqueue(request{QueueName: child.Name, Action: CloseQueueAction})
	return nil
}

// syncHierarchicalQueue repairs a queue whose state disagrees with its
// parent's: an open queue under a closed or closing parent is closed, and a
// queue closed by its parent is opened once the parent is open again.
func (c *controller) syncHierarchicalQueue(queue Queue) error {
	if queue.Name == rootQueue {
		return nil
	}
	parent, err := c.store.Queues.get(parentOf(queue))
	if errors.Is(err, errNotFound) {
		return nil // nothing to agree with
	}
	if err != nil {
		return err
	}
	parentState, state := effectiveState(parent), effectiveState(queue)
	switch {
	case closedOrClosing(parentState) && state == QueueStateOpen:
		return c.closeByParent(queue)
	case parentState == QueueStateOpen && closedOrClosing(state) && queue.closedByParent():
		c.enqueue(request{QueueName: queue.Name, Action: OpenQueueAction})
	}
	return nil
}

// presentPodGroups returns the tracked PodGroups of a queue that still exist.
func (c *controller) presentPodGroups(queueName string) []string {
	var present []string
	for _, key := range c.trackedPodGroups(queueName) {
		if _, err := c.store.PodGroups.get(key); err == nil {
			present = append(present, key)
		}
	}
	return present
}

// recordStateChange puts a state change on the timeline.
func (c *controller) recordStateChange(queueName string, action Action, from, to QueueState) {
	if from == to {
		return
	}
	c.timeline.event(queueName, eventNormal, string(action), fmt.Sprintf("%s -> %s", from, to))
}

// parentClosedError is an open refused because the parent is closed or
// closing: the request parks until the parent opens.
type parentClosedError struct {
	queue, parent string
	state         QueueState
}

func (e *parentClosedError) Error() string {
	return fmt.Sprintf("open %s: parent %s is %s", e.queue, e.parent, e.state)
}

// openedEvent is the event that wakes the opens parked until queue opens.
func openedEvent(queue string) string { return "opened " + queue }
