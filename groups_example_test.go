package workqueue_test

import (
	"fmt"
	"strings"

	"github.com/go-workqueue/workqueue"
)

// A queue with at most one item of each namespace in flight: the second
// item of "big" waits for its slot while "small" passes it.
func ExampleGroupLimits() {
	namespace := func(key string) string { ns, _, _ := strings.Cut(key, "/"); return ns }
	q := workqueue.NewTypedWithConfig(workqueue.TypedQueueConfig[string]{
		GroupLimits: &workqueue.GroupLimits[string]{Group: namespace, Default: 1},
	})
	defer q.ShutDown()
	q.Add("big/1")
	q.Add("big/2")
	q.Add("small/1")

	first, _ := q.Get()
	second, _ := q.Get() // not big/2: big has its one item in flight
	fmt.Println(first, second, "- queued:", q.Len(), "waiting for a slot:", q.Snapshot(0).WaitingForSlot)
	q.Done(first) // frees big's slot
	third, _ := q.Get()
	fmt.Println(third)
	// Output:
	// big/1 small/1 - queued: 1 waiting for a slot: 1
	// big/2
}

// A tenant of weight 2 hands out two items for each one of a tenant of
// weight 1.
func ExampleTypedPriorityQueueConfig_fairnessWeights() {
	tenant := func(key string) string { t, _, _ := strings.Cut(key, "/"); return t }
	q := workqueue.NewTypedPriorityQueue(workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedPriorityQueueConfig[string]{
			Fairness: []func(string) string{tenant},
			FairnessWeights: []func(string) int{func(tenant string) int {
				if tenant == "gold" {
					return 2
				}
				return 1
			}},
		})
	defer q.ShutDown()
	for i := range 3 {
		q.Add(fmt.Sprint("free/", i))
		q.Add(fmt.Sprint("gold/", i))
	}
	for q.Len() > 0 {
		key, _ := q.Get()
		fmt.Print(key, " ")
		q.Done(key)
	}
	fmt.Println()
	// Output:
	// free/0 gold/0 gold/1 free/1 gold/2 free/2
}
