package reconcile

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/go-workqueue/workqueue"
	"github.com/stretchr/testify/assert"
)

// tenantOf is the group of "tenant/n": its tenant.
func tenantOf(item string) string { return strings.SplitN(item, "/", 2)[0] }

// groupQueues make the rate-limiting and priority queues with group limits.
var groupQueues = []struct {
	name string
	make func(limits workqueue.GroupLimits[string]) workqueue.TypedRateLimitingInterface[string]
}{
	{"rate limiting", func(limits workqueue.GroupLimits[string]) workqueue.TypedRateLimitingInterface[string] {
		return workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](), workqueue.TypedRateLimitingQueueConfig[string]{GroupLimits: &limits})
	}},
	{"priority with fairness", func(limits workqueue.GroupLimits[string]) workqueue.TypedRateLimitingInterface[string] {
		return workqueue.NewTypedPriorityQueue(workqueue.DefaultTypedControllerRateLimiter[string](), workqueue.TypedPriorityQueueConfig[string]{
			GroupLimits: &limits, Fairness: []func(string) string{func(item string) string { return item[len(item)-1:] }},
		})
	}},
}

// TestRunnerGroupLimits runs a Runner of four workers on the rate-limiting
// and priority queues with a limit of one per group: while the hot group's first item is
// reconciled, its other items wait and the three light groups' items are
// reconciled beside it, each worker busy, none waiting for a slot.
func TestRunnerGroupLimits(t *testing.T) {
	for _, q := range groupQueues {
		t.Run(q.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				queue := q.make(workqueue.GroupLimits[string]{Group: tenantOf, Default: 1})
				for i := range 10 {
					queue.Add(fmt.Sprint("hot/", i))
				}
				for _, item := range []string{"a/1", "b/1", "c/1"} {
					queue.Add(item)
				}
				release := make(chan struct{})
				var mu sync.Mutex
				inFlight, most := map[string]int{}, map[string]int{}
				var started []string
				runner := NewRunner(queue, func(ctx context.Context, item string) (Result, error) {
					g := tenantOf(item)
					mu.Lock()
					inFlight[g]++
					most[g] = max(most[g], inFlight[g])
					started = append(started, g)
					mu.Unlock()
					<-release
					mu.Lock()
					inFlight[g]--
					mu.Unlock()
					return Result{}, nil
				}, WithDrain())
				exited := make(chan struct{})
				go func() { runner.Run(t.Context(), 4); close(exited) }()
				synctest.Wait()
				mu.Lock()
				assert.ElementsMatch(t, []string{"hot", "a", "b", "c"}, started, "the light groups pass the hot one's waiting items")
				mu.Unlock()
				close(release)
				queue.ShutDownWithDrain()
				<-exited
				assert.Equal(t, map[string]int{"hot": 1, "a": 1, "b": 1, "c": 1}, most)
			})
		})
	}
}
