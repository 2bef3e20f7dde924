package workqueue

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/go-workqueue/workqueue/internal/list"
	"github.com/stretchr/testify/assert"
)

func TestFairnessWeights(t *testing.T) {
	tenant := func(item string) string { return strings.Split(item, "/")[0] }
	weightOf := func(weights map[string]int) func(string) int {
		return func(key string) int { return weights[key] }
	}
	tests := []struct {
		name    string
		weights []func(string) int
		want    string // hand-out order of a/0..a/3, b/0..b/3 added alternately
	}{
		{"none", nil, "a/0 b/0 a/1 b/1 a/2 b/2 a/3 b/3"},
		{"a nil function means 1", []func(string) int{nil}, "a/0 b/0 a/1 b/1 a/2 b/2 a/3 b/3"},
		{"a weighs 3", []func(string) int{weightOf(map[string]int{"a": 3})}, "a/0 a/1 a/2 b/0 a/3 b/1 b/2 b/3"},
		{"a weight below 1 means 1", []func(string) int{weightOf(map[string]int{"a": -2, "b": 0})}, "a/0 b/0 a/1 b/1 a/2 b/2 a/3 b/3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := NewTypedPriorityQueue(DefaultTypedControllerRateLimiter[string](), TypedPriorityQueueConfig[string]{
				Fairness: []func(string) string{tenant}, FairnessWeights: tt.weights,
			})
			defer q.ShutDown()
			for i := range 4 {
				q.Add(fmt.Sprint("a/", i))
				q.Add(fmt.Sprint("b/", i))
			}
			assert.Equal(t, strings.Fields(tt.want), q.Snapshot(8).Queued, "Snapshot")
			var got []string
			for q.Len() > 0 {
				item, _ := q.Get()
				got = append(got, item)
				q.Done(item)
			}
			assert.Equal(t, strings.Fields(tt.want), got)
		})
	}
	assert.PanicsWithValue(t, "workqueue: NewTypedPriorityQueue: 2 FairnessWeights for 1 Fairness functions", func() {
		NewTypedPriorityQueue(DefaultTypedControllerRateLimiter[string](), TypedPriorityQueueConfig[string]{
			Fairness: []func(string) string{tenant}, FairnessWeights: []func(string) int{nil, nil},
		})
	})
}

// verifyFairNode checks the subtree of node at depth, adds the ids its
// leaves list to listed, and returns how many they are and how many of
// them can be handed out.
func verifyFairNode[T comparable](o *priorityOrder[T], node *fairNode, priority, depth int, listed map[int32]bool) (total, ready int, err error) {
	if node.leaf != (depth == len(o.fairness)) {
		return 0, 0, fmt.Errorf("node at depth %d of %d: leaf %v", depth, len(o.fairness), node.leaf)
	}
	if node.leaf {
		ids, err := list.Verify(node.items, &o.links)
		if err != nil {
			return 0, 0, fmt.Errorf("leaf %q: %w", node.key, err)
		}
		ready := len(ids)
		if node.grouped != nil {
			if len(ids) > 0 || node.grouped.Owner != any(node) {
				return 0, 0, fmt.Errorf("leaf %q: lists ids in both lists, or a list of another leaf", node.key)
			}
			grouped, err := verifyGroupedList(node.grouped, fmt.Sprintf("leaf %q", node.key))
			if err != nil {
				return 0, 0, err
			}
			ids = slices.Collect(maps.Keys(grouped))
			ready = node.grouped.Eligible()
		}
		for _, id := range ids {
			if listed[id] {
				return 0, 0, fmt.Errorf("leaf %q: id %d listed twice", node.key, id)
			}
			listed[id] = true
			if o.priority(id) != priority || len(o.fairness) > 0 && *o.leaves.At(int(id)) != node {
				return 0, 0, fmt.Errorf("leaf %q: id %d of priority %d, or kept in another leaf", node.key, id, o.priority(id))
			}
			if d := len(o.fairness) - 1; d >= 0 && o.fairness[d](o.items.At(id).Item) != node.key {
				return 0, 0, fmt.Errorf("leaf %q lists %v", node.key, o.items.At(id).Item)
			}
		}
		if node.total != len(ids) || node.n != ready {
			return 0, 0, fmt.Errorf("leaf %q: lists %d items, %d ready; counts %d, %d", node.key, len(ids), ready, node.total, node.n)
		}
		return len(ids), ready, nil
	}
	rotation, err := list.VerifyPtrs(&node.rotation)
	if err != nil {
		return 0, 0, fmt.Errorf("node %q: rotation: %w", node.key, err)
	}
	for _, c := range rotation {
		if c.parent != node || c.n == 0 || node.children[c.key] != c {
			return 0, 0, fmt.Errorf("node %q: rotation holds %q, idle or not its child", node.key, c.key)
		}
	}
	idle := 0
	for key, c := range node.children {
		if c.key != key {
			return 0, 0, fmt.Errorf("node %q: child %q filed under %q", node.key, c.key, key)
		}
		if c.total == 0 {
			idle++
		}
		if c.n == 0 && node.rotation.Contains(c) {
			return 0, 0, fmt.Errorf("node %q: child %q in the rotation with nothing to hand out", node.key, key)
		}
		n, r, err := verifyFairNode(o, c, priority, depth+1, listed)
		if err != nil {
			return 0, 0, err
		}
		total += n
		ready += r
	}
	if idle != node.idle || total != node.total || ready != node.n {
		return 0, 0, fmt.Errorf("node %q: %d idle children, counted %d; %d items, %d ready, counted %d, %d", node.key, idle, node.idle, total, ready, node.total, node.n)
	}
	return total, ready, nil
}
