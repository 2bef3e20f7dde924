package main

import "fmt"

// updateStatusFn decides a queue's new state. It gets the status being
// written and the keys of the queue's PodGroups.
type updateStatusFn func(status *QueueStatus, podGroups []string)

// queueActionFn is one of the controller's actions (sync, open, close): it
// applies updateStatus to the queue's status and writes what changed. A nil
// updateStatus keeps the state as it is.
type queueActionFn func(queue Queue, updateStatus updateStatusFn) error

// queueActions are the functions the states call, supplied by the
// controller so that the state machine does not depend on it.
type queueActions struct {
	sync, open, close queueActionFn
}

// queueState is one state of the machine; execute performs an action in it.
type queueState interface {
	execute(action Action) error
}

// newState returns the state object for queue's current state, treating ""
// (a queue no one has synced yet) as Open. It fails for a state it does not
// know.
func newState(queue Queue, actions queueActions) (queueState, error) {
	switch queue.Status.State {
	case "", QueueStateOpen:
		return openState{stateOf{queue, actions}}, nil
	case QueueStateClosed:
		return closedState{stateOf{queue, actions}}, nil
	case QueueStateClosing:
		return closingState{stateOf{queue, actions}}, nil
	case QueueStateUnknown:
		return unknownState{stateOf{queue, actions}}, nil
	}
	return nil, fmt.Errorf("queue %q has invalid state %q", queue.Name, queue.Status.State)
}

// stateOf is what every state holds: the queue and the actions to call.
type stateOf struct {
	queue   Queue
	actions queueActions
}

func setState(state QueueState) updateStatusFn {
	return func(status *QueueStatus, _ []string) { status.State = state }
}

// closedUnlessPodGroups closes a queue that has no PodGroups left and keeps
// one that still has some closing until they are gone.
func closedUnlessPodGroups(status *QueueStatus, podGroups []string) {
	if len(podGroups) == 0 {
		status.State = QueueStateClosed
	} else {
		status.State = QueueStateClosing
	}
}

type openState struct{ stateOf }

func (s openState) execute(action Action) error {
	switch action {
	case CloseQueueAction:
		return s.actions.close(s.queue, closedUnlessPodGroups)
	default: // OpenQueueAction, SyncQueueAction: stay open
		return s.actions.sync(s.queue, setState(QueueStateOpen))
	}
}

type closedState struct{ stateOf }

func (s closedState) execute(action Action) error {
	switch action {
	case OpenQueueAction:
		return s.actions.open(s.queue, setState(QueueStateOpen))
	default: // CloseQueueAction, SyncQueueAction: stay closed
		return s.actions.sync(s.queue, setState(QueueStateClosed))
	}
}

type closingState struct{ stateOf }

func (s closingState) execute(action Action) error {
	switch action {
	case OpenQueueAction:
		return s.actions.open(s.queue, setState(QueueStateOpen))
	default: // CloseQueueAction, SyncQueueAction: closed once the PodGroups are gone
		return s.actions.sync(s.queue, closedUnlessPodGroups)
	}
}

type unknownState struct{ stateOf }

func (s unknownState) execute(action Action) error {
	switch action {
	case OpenQueueAction:
		return s.actions.open(s.queue, setState(QueueStateOpen))
	case CloseQueueAction:
		return s.actions.close(s.queue, closedUnlessPodGroups)
	default: // SyncQueueAction: nothing says what the state should be
		return s.actions.sync(s.queue, nil)
	}
}
