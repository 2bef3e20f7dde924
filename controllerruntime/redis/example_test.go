package crredis_test

import (
	"fmt"
	"os"

	"github.com/redis/go-redis/v9"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	crredis "github.com/go-workqueue/workqueue/controllerruntime/redis"
	redisqueue "github.com/go-workqueue/workqueue/redis"
)

// Two replicas of a controller share one queue: an object of the initial
// list that one replica adds at handler.LowPriority waits behind a live
// change that the other adds, and the object both add is queued once.
func ExampleNew() {
	client := redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_ADDR")})
	defer client.Close()
	name := "example-deployments"
	one := crredis.New(client, name, redisqueue.Options[reconcile.Request]{})
	other := crredis.New(client, name, redisqueue.Options[reconcile.Request]{})
	defer one.ShutDown()
	defer other.ShutDown()

	listed := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "shop", Name: "web"}}
	changed := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "shop", Name: "db"}}
	low := handler.LowPriority
	one.AddWithOpts(priorityqueue.AddOpts{Priority: &low}, listed)
	other.AddWithOpts(priorityqueue.AddOpts{Priority: &low}, listed)
	other.AddWithOpts(priorityqueue.AddOpts{}, changed)
	fmt.Println("queued:", one.Len())
	for range 2 {
		req, priority, _ := other.GetWithPriority()
		fmt.Println(req, priority)
		other.Done(req)
	}
	// Output:
	// queued: 2
	// shop/db 0
	// shop/web -100
}
