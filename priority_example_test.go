package workqueue_test

import (
	"fmt"
	"strings"
	"time"

	"github.com/go-workqueue/workqueue"
)

func ExampleTypedPriorityQueue() {
	namespace := func(key string) string { ns, _, _ := strings.Cut(key, "/"); return ns }
	q := workqueue.NewTypedPriorityQueue(
		workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedPriorityQueueConfig[string]{
			// Within a priority, namespaces take turns.
			Fairness: []func(string) string{namespace},
		})
	defer q.ShutDown()

	low := -100
	q.AddWithOpts(workqueue.AddOpts{Priority: &low}, "big/1", "big/2", "big/3", "small/1") // an initial list
	q.Add("big/4")                                                                         // a change: priority 0
	q.AddWithOpts(workqueue.AddOpts{Priority: &low}, "big/4")                              // a lower re-add: no effect
	q.AddWithOpts(workqueue.AddOpts{After: time.Hour}, "later/1")                          // not ready: Len does not count it

	for q.Len() > 0 {
		key, priority, _ := q.GetWithPriority()
		fmt.Println(key, priority)
		q.Done(key)
	}
	// Output:
	// big/4 0
	// big/1 -100
	// small/1 -100
	// big/2 -100
	// big/3 -100
}
