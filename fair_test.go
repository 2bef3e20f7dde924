package workqueue

import (
	"fmt"
	"strings"
	"testing"

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
