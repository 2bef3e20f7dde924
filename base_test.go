package workqueue

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

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

// TestWakeQueuesAfterParkBackoff pins Wake's doc: a woken item is queued
// once its ParkBackoff, counted from its Park, has passed; a queue without
// ParkBackoff queues it at once.
func TestWakeQueuesAfterParkBackoff(t *testing.T) {
	backoff := func() TypedRateLimiter[string] {
		return NewTypedItemExponentialFailureRateLimiter[string](time.Second, time.Second)
	}
	tests := []struct {
		name    string
		make    func() parkingUnderTest
		backoff time.Duration
	}{
		{"Typed", func() parkingUnderTest { return NewTyped[string]() }, 0},
		{"delaying", func() parkingUnderTest { return NewTypedDelayingQueue[string]() }, 0},
		{"rate-limiting", func() parkingUnderTest {
			return NewTypedRateLimitingQueueWithConfig(DefaultTypedItemBasedRateLimiter[string](),
				TypedRateLimitingQueueConfig[string]{ParkBackoff: backoff()})
		}, time.Second},
		{"priority", func() parkingUnderTest {
			return NewTypedPriorityQueue(DefaultTypedItemBasedRateLimiter[string](),
				TypedPriorityQueueConfig[string]{ParkBackoff: backoff()})
		}, time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				q := tt.make()
				defer q.ShutDown()
				q.Add("a")
				item, _ := q.Get()
				q.Park(item, "e")
				q.Done(item)
				assert.Equal(t, 1, q.Wake("e"), "Wake")
				if tt.backoff > 0 {
					assert.Equal(t, 0, q.Len(), "Len at the Wake, within the backoff")
					time.Sleep(tt.backoff)
					synctest.Wait()
				}
				assert.Equal(t, 1, q.Len(), "Len once the backoff has passed")
			})
		})
	}
}
