package workqueue

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestBaseMethodsPanicOnAZeroQueue(t *testing.T) {
	queues := map[string]func() *Base[string]{
		"Typed":                  func() *Base[string] { return &new(Typed[string]).Base },
		"TypedDelayingQueue":     func() *Base[string] { return &new(TypedDelayingQueue[string]).Base },
		"TypedRateLimitingQueue": func() *Base[string] { return &new(TypedRateLimitingQueue[string]).Base },
		"TypedPriorityQueue":     func() *Base[string] { return &new(TypedPriorityQueue[string]).Base },
	}
	methods := []struct {
		name string
		call func(b *Base[string])
	}{
		{"Len", func(b *Base[string]) { b.Len() }},
		{"Get", func(b *Base[string]) { b.Get() }},
		{"GetContext", func(b *Base[string]) { _, _ = b.GetContext(context.Background()) }},
		{"GetWithInfoContext", func(b *Base[string]) { _, _, _ = b.GetWithInfoContext(context.Background()) }},
		{"AddContext", func(b *Base[string]) { b.AddContext(context.Background(), "a") }},
		{"Done", func(b *Base[string]) { b.Done("a") }},
		{"Remove", func(b *Base[string]) { b.Remove("a") }},
		{"Park", func(b *Base[string]) { b.Park("a", "e") }},
		{"WakeFunc", func(b *Base[string]) { b.Wake("e") }},
		{"WakeItem", func(b *Base[string]) { b.WakeItem("a") }},
		{"SetGroupLimit", func(b *Base[string]) { b.SetGroupLimit("g", 1) }},
		{"Snapshot", func(b *Base[string]) { b.Snapshot(1) }},
		{"ShutDown", func(b *Base[string]) { b.ShutDown() }},
		{"ShutDownWithDrain", func(b *Base[string]) { b.ShutDownWithDrain() }},
		{"ShuttingDown", func(b *Base[string]) { b.ShuttingDown() }},
		{"MetricsConfig", func(b *Base[string]) { b.MetricsConfig() }},
	}
	for queue, zero := range queues {
		for _, m := range methods {
			t.Run(queue+"/"+m.name, func(t *testing.T) {
				want := "workqueue: " + m.name + " on a zero queue; make one with its constructor"
				assert.PanicsWithValue(t, want, func() { m.call(zero()) })
			})
		}
	}
	var pq TypedPriorityQueue[string]
	assert.PanicsWithValue(t, "workqueue: GetWithPriority on a zero queue; make one with its constructor", func() { pq.GetWithPriority() })
}

// A rate-limiting queue parks with a backoff of its own, so a layer above
// it does not park through it: it adds the item after MaxParkTime, and its
// wakes end nothing there.
func TestRateLimitingQueueBelowALayerIsNotParkedThrough(t *testing.T) {
	inner := NewTypedRateLimitingQueue(DefaultTypedItemBasedRateLimiter[string]())
	outer := NewTypedRateLimitingQueueWithConfig(DefaultTypedItemBasedRateLimiter[string](), TypedRateLimitingQueueConfig[string]{DelayingQueue: inner})
	defer outer.ShutDown()
	_, ok := parkingBelow[string](inner)
	assert.False(t, ok, "parkingBelow(rate-limiting queue)")
	outer.Add("a")
	item, _ := outer.Get()
	outer.Park(item, "e")
	outer.Done(item)
	s := outer.Snapshot(10)
	assert.Equal(t, 0, s.Parked, "parked")
	assert.Equal(t, 1, s.Waiting, "waiting for the MaxParkTime delay")
	assert.Equal(t, 0, outer.Wake("e"), "Wake")
}
