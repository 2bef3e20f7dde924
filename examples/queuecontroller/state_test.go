package main

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestStateMachineTransitions checks every state and action against the
// seed's table: which action function runs, and the state it writes with
// and without PodGroups in the queue.
func TestStateMachineTransitions(t *testing.T) {
	const (
		sync  = "sync"
		open  = "open"
		close = "close"
	)
	tests := []struct {
		from      QueueState
		action    Action
		podGroups int
		wantCall  string
		wantState QueueState
	}{
		// "" is a new queue: treated as Open.
		{"", SyncQueueAction, 0, sync, QueueStateOpen},
		{"", OpenQueueAction, 0, sync, QueueStateOpen},
		{"", CloseQueueAction, 0, close, QueueStateClosed},
		{"", CloseQueueAction, 2, close, QueueStateClosing},

		{QueueStateOpen, SyncQueueAction, 0, sync, QueueStateOpen},
		{QueueStateOpen, SyncQueueAction, 2, sync, QueueStateOpen},
		{QueueStateOpen, OpenQueueAction, 2, sync, QueueStateOpen},
		{QueueStateOpen, CloseQueueAction, 0, close, QueueStateClosed},
		{QueueStateOpen, CloseQueueAction, 2, close, QueueStateClosing},

		{QueueStateClosed, OpenQueueAction, 0, open, QueueStateOpen},
		{QueueStateClosed, OpenQueueAction, 2, open, QueueStateOpen},
		{QueueStateClosed, CloseQueueAction, 0, sync, QueueStateClosed},
		{QueueStateClosed, CloseQueueAction, 2, sync, QueueStateClosed},
		{QueueStateClosed, SyncQueueAction, 0, sync, QueueStateClosed},
		{QueueStateClosed, SyncQueueAction, 2, sync, QueueStateClosed},

		{QueueStateClosing, OpenQueueAction, 2, open, QueueStateOpen},
		{QueueStateClosing, CloseQueueAction, 0, sync, QueueStateClosed},
		{QueueStateClosing, CloseQueueAction, 2, sync, QueueStateClosing},
		{QueueStateClosing, SyncQueueAction, 0, sync, QueueStateClosed},
		{QueueStateClosing, SyncQueueAction, 2, sync, QueueStateClosing},

		{QueueStateUnknown, OpenQueueAction, 2, open, QueueStateOpen},
		{QueueStateUnknown, CloseQueueAction, 0, close, QueueStateClosed},
		{QueueStateUnknown, CloseQueueAction, 2, close, QueueStateClosing},
		{QueueStateUnknown, SyncQueueAction, 0, sync, QueueStateUnknown},
		{QueueStateUnknown, SyncQueueAction, 2, sync, QueueStateUnknown},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%q/%s/%d podgroups", tt.from, tt.action, tt.podGroups), func(t *testing.T) {
			podGroups := make([]string, tt.podGroups)
			var calls []string
			// Each fake action applies the state's decision like the real
			// ones do; a nil decision keeps the state.
			fake := func(name string) queueActionFn {
				return func(queue Queue, updateStatus updateStatusFn) error {
					calls = append(calls, name)
					status := queue.Status
					if updateStatus != nil {
						updateStatus(&status, podGroups)
					}
					assert.Equal(t, tt.wantState, status.State)
					return nil
				}
			}
			queue := Queue{Name: "q", Status: QueueStatus{State: tt.from}}
			state, err := newState(queue, queueActions{sync: fake(sync), open: fake(open), close: fake(close)})
			require.NoError(t, err)
			require.NoError(t, state.execute(tt.action))
			assert.Equal(t, []string{tt.wantCall}, calls)
		})
	}
}

func TestStateFactoryRejectsUnknownStates(t *testing.T) {
	_, err := newState(Queue{Name: "q", Status: QueueStatus{State: "Paused"}}, queueActions{})
	assert.EqualError(t, err, `queue "q" has invalid state "Paused"`)
}
