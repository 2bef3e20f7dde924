package crredis

import (
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
	"k8s.io/apimachinery/pkg/types"
	ctrlworkqueue "k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/go-workqueue/workqueue"
	crqueue "github.com/go-workqueue/workqueue/controllerruntime"
	redisqueue "github.com/go-workqueue/workqueue/redis"
)

// Compile-time proof that the queue fits where controller-runtime wants a
// priority queue, and that NewQueue fits controller.Options.NewQueue.
var (
	_ priorityqueue.PriorityQueue[reconcile.Request]                                                                              = (*Queue[reconcile.Request])(nil)
	_ func(string, ctrlworkqueue.TypedRateLimiter[reconcile.Request]) ctrlworkqueue.TypedRateLimitingInterface[reconcile.Request] = NewQueue[reconcile.Request](nil, redisqueue.Options[reconcile.Request]{})
)

// NewQueue returns a constructor that fits controller.Options.NewQueue:
// it makes a [Queue] on the Redis queue named after the controller (see
// [New]), ignoring the rate limiter the controller passes, which lives in
// one process: opts.RateLimit, kept in Redis, limits AddRateLimited
// instead. The constructor is safe for concurrent use; it panics as [New]
// does.
func NewQueue[T comparable](client redis.UniversalClient, opts redisqueue.Options[T]) func(controllerName string, rateLimiter ctrlworkqueue.TypedRateLimiter[T]) ctrlworkqueue.TypedRateLimitingInterface[T] {
	return func(name string, _ ctrlworkqueue.TypedRateLimiter[T]) ctrlworkqueue.TypedRateLimitingInterface[T] {
		return New(client, name, opts)
	}
}

// New returns a handle on the Redis queue called name, which every
// handle made with the same Redis and name shares (redisqueue.New). A nil
// opts.Codec means [RequestCodec] for reconcile.Request and
// redisqueue.JSONCodec for any other T. A nil opts.MetricsProvider means
// controller-runtime's workqueue metrics in its metrics.Registry
// (crqueue.NewMetricsProvider), labelled with opts.Name or else name, as
// the package doc describes. It panics as redisqueue.New does:
// on a nil client, a name that is empty, longer than 256 bytes or holds
// '{' or '}', or invalid options.
func New[T comparable](client redis.UniversalClient, name string, opts redisqueue.Options[T]) *Queue[T] {
	if opts.Codec == nil {
		var codec any = redisqueue.JSONCodec[T]{}
		if _, ok := any(*new(T)).(reconcile.Request); ok {
			codec = RequestCodec{}
		}
		opts.Codec = codec.(redisqueue.Codec[T])
	}
	if opts.MetricsProvider == nil {
		opts.MetricsProvider = crqueue.NewMetricsProvider(crmetrics.Registry)
	}
	return &Queue[T]{Queue: redisqueue.New(client, name, opts)}
}

// Queue is a handle on a Redis queue with controller-runtime's
// priorityqueue.PriorityQueue interface: redisqueue.Queue, whose methods
// it has, with AddWithOpts taking controller-runtime's options. Its
// ShutDown is controller-runtime's: Get returns shutdown at once, and the
// items still queued stay in Redis for the other handles. Make one with
// [NewQueue] or [New]; all methods are safe for concurrent use.
type Queue[T comparable] struct {
	*redisqueue.Queue[T]
}

// AddWithOpts adds items with controller-runtime's options, After,
// RateLimited and Priority (nil means 0), under the rules of
// redisqueue.Queue.AddWithOpts: a re-add keeps the highest priority and
// the earliest ready time, with After and RateLimited the shorter delay
// wins.
func (q *Queue[T]) AddWithOpts(o priorityqueue.AddOpts, items ...T) {
	q.Queue.AddWithOpts(workqueue.AddOpts{After: o.After, RateLimited: o.RateLimited, Priority: o.Priority}, items...)
}

// RequestCodec stores a reconcile.Request as "namespace/name", the form
// types.NamespacedName prints, so that the keys in Redis read as the
// objects they name. Its Encode fails for a namespace holding '/', which
// no Kubernetes namespace does. The zero value is ready to use and safe
// for concurrent use.
type RequestCodec struct{}

// Encode returns r's namespace, '/' and name.
func (RequestCodec) Encode(r reconcile.Request) (string, error) {
	if strings.Contains(r.Namespace, "/") {
		return "", fmt.Errorf("crredis: namespace %q holds '/'", r.Namespace)
	}
	return r.Namespace + "/" + r.Name, nil
}

// Decode reverses Encode.
func (RequestCodec) Decode(key string) (reconcile.Request, error) {
	ns, name, ok := strings.Cut(key, "/")
	if !ok {
		return reconcile.Request{}, errors.New("crredis: key without '/': " + key)
	}
	return reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}}, nil
}
