package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	clientgoworkqueue "k8s.io/client-go/util/workqueue"

	"github.com/go-workqueue/workqueue"
)

// keyQueue is what a client-go style controller uses of its queue: the
// root package's rate-limiting queue and client-go's both have it.
type keyQueue interface {
	Add(key string)
	Get() (key string, shutdown bool)
	Done(key string)
	Forget(key string)
	AddRateLimited(key string)
	ShutDown()
	Len() int
}

const mirrorSuffix = "-mirror"

// mirrorController keeps, for every source ConfigMap, a mirror ConfigMap
// with the same data, in the style of Kubernetes' sample-controller: a
// shared informer per kind, event handlers that queue namespace/name keys
// of sources, workers that reconcile one key at a time, forget it on
// success and requeue it rate-limited on failure.
type mirrorController struct {
	client  kubernetes.Interface
	sources corelisters.ConfigMapLister
	mirrors corelisters.ConfigMapLister
	synced  []cache.InformerSynced
	queue   keyQueue
	// failOnce makes the first sync of the keys it names fail, as a
	// conflict or a brief outage would.
	failOnce func(key string) bool

	mu        sync.Mutex
	attempts  map[string]int
	syncs     atomic.Int64
	lastWrite atomic.Int64 // UnixNano of the last create, update or delete
}

func newMirrorController(cs kubernetes.Interface, ns string, queue keyQueue, failOnce func(string) bool) (*mirrorController, []informers.SharedInformerFactory) {
	factory := func(role string) informers.SharedInformerFactory {
		return informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(ns),
			informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = testLabel + "=" + role }))
	}
	sourceFactory, mirrorFactory := factory("source"), factory("mirror")
	sources, mirrors := sourceFactory.Core().V1().ConfigMaps(), mirrorFactory.Core().V1().ConfigMaps()
	c := &mirrorController{
		client:   cs,
		sources:  sources.Lister(),
		mirrors:  mirrors.Lister(),
		synced:   []cache.InformerSynced{sources.Informer().HasSynced, mirrors.Informer().HasSynced},
		queue:    queue,
		failOnce: failOnce,
		attempts: map[string]int{},
	}
	enqueue := func(obj any) {
		if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			c.queue.Add(key)
		}
	}
	// A mirror changed or deleted by someone else brings its source back
	// into the queue, as sample-controller does for the objects it owns.
	enqueueSource := func(obj any) {
		if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			c.queue.Add(strings.TrimSuffix(key, mirrorSuffix))
		}
	}
	_, err := sources.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
		DeleteFunc: enqueue,
	})
	if err != nil {
		panic(err)
	}
	_, err = mirrors.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, obj any) { enqueueSource(obj) },
		DeleteFunc: enqueueSource,
	})
	if err != nil {
		panic(err)
	}
	return c, []informers.SharedInformerFactory{sourceFactory, mirrorFactory}
}

// run starts workers and blocks until ctx is done and they have stopped.
func (c *mirrorController) run(ctx context.Context, workers int) error {
	defer c.queue.ShutDown()
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		return errors.New("caches did not sync")
	}
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for c.next(ctx) {
			}
		})
	}
	<-ctx.Done()
	c.queue.ShutDown()
	wg.Wait()
	return nil
}

func (c *mirrorController) next(ctx context.Context) bool {
	key, shutdown := c.queue.Get()
	if shutdown {
		return false
	}
	defer c.queue.Done(key)
	if err := c.sync(ctx, key); err != nil {
		c.queue.AddRateLimited(key)
		return true
	}
	c.queue.Forget(key)
	return true
}

func (c *mirrorController) sync(ctx context.Context, key string) error {
	c.syncs.Add(1)
	c.mu.Lock()
	c.attempts[key]++
	first := c.attempts[key] == 1
	c.mu.Unlock()
	if first && c.failOnce(key) {
		return errors.New("injected failure")
	}
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil // a key no handler makes: nothing to retry
	}
	source, err := c.sources.ConfigMaps(ns).Get(name)
	if apierrors.IsNotFound(err) {
		err := c.client.CoreV1().ConfigMaps(ns).Delete(ctx, name+mirrorSuffix, metav1.DeleteOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		c.wrote()
		return err
	}
	if err != nil {
		return err
	}
	mirror, err := c.mirrors.ConfigMaps(ns).Get(name + mirrorSuffix)
	switch {
	case apierrors.IsNotFound(err):
		_, err = c.client.CoreV1().ConfigMaps(ns).Create(ctx, configMapWithData(ns, name+mirrorSuffix, "mirror", source.Data), metav1.CreateOptions{})
		c.wrote()
		return err
	case err != nil:
		return err
	case maps.Equal(mirror.Data, source.Data):
		return nil
	}
	mirror = mirror.DeepCopy()
	mirror.Data = maps.Clone(source.Data)
	_, err = c.client.CoreV1().ConfigMaps(ns).Update(ctx, mirror, metav1.UpdateOptions{})
	c.wrote()
	return err
}

func (c *mirrorController) wrote() { c.lastWrite.Store(time.Now().UnixNano()) }

func configMapWithData(ns, name, role string, data map[string]string) *corev1.ConfigMap {
	cm := configMap(ns, name, role, "")
	cm.Data = maps.Clone(data)
	return cm
}

// mirrorState lists ns and returns the data of each mirror by its
// source's name, checking on the way that every source has an equal
// mirror and no mirror outlives its source.
func mirrorState(ctx context.Context, cs kubernetes.Interface, ns string) (map[string]map[string]string, bool, error) {
	list, err := cs.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{LabelSelector: testLabel})
	if err != nil {
		return nil, false, err
	}
	sources, mirrors := map[string]map[string]string{}, map[string]map[string]string{}
	for _, cm := range list.Items {
		if cm.Labels[testLabel] == "mirror" {
			mirrors[strings.TrimSuffix(cm.Name, mirrorSuffix)] = cm.Data
		} else {
			sources[cm.Name] = cm.Data
		}
	}
	return mirrors, maps.EqualFunc(sources, mirrors, maps.Equal), nil
}

// TestClientGoControllerSideBySide runs the same sample-controller style
// controller on the root package's rate-limiting queue and on client-go's,
// each in a namespace of its own: from a thousand existing sources, then
// through a burst of updates and deletes, to the same final state, and
// reports the reconciles, API requests and time to converge of each.
func TestClientGoControllerSideBySide(t *testing.T) {
	const existing, updated, deleted = 1000, 200, 50
	config := requireServer(t)
	cs := clientset(t, config)
	// The same keys fail once in both runs.
	failOnce := func(key string) bool {
		h := fnv.New32a()
		h.Write([]byte(key[strings.IndexByte(key, '/')+1:]))
		return h.Sum32()%20 == 0
	}
	finals := map[string]map[string]map[string]string{}
	for _, tc := range []struct {
		name     string
		newQueue func() keyQueue
	}{
		{"go-workqueue", func() keyQueue {
			return workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())
		}},
		{"client-go", func() keyQueue {
			return clientgoworkqueue.NewTypedRateLimitingQueue(clientgoworkqueue.DefaultTypedControllerRateLimiter[string]())
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			ns := namespace(t, cs, "mirror")
			names := createConfigMaps(t, cs, ns, "cm", "source", existing)

			requests := &requestCounter{}
			counted, err := kubernetes.NewForConfig(requests.wrap(config))
			require.NoError(t, err)
			c, factories := newMirrorController(counted, ns, tc.newQueue(), failOnce)
			runCtx, cancel := context.WithCancel(ctx)
			done := make(chan error, 1)
			start := time.Now()
			for _, f := range factories {
				f.Start(runCtx.Done())
			}
			go func() { done <- c.run(runCtx, 2) }()
			defer func() {
				cancel()
				require.NoError(t, <-done)
				for _, f := range factories {
					f.Shutdown()
				}
			}()

			converge := func(phase string, since time.Time) {
				t.Helper()
				require.Eventually(t, func() bool {
					_, ok, err := mirrorState(ctx, cs, ns)
					return err == nil && ok
				}, 2*time.Minute, 50*time.Millisecond, "%s: the mirrors did not converge", phase)
				// The queue may still hold keys whose sync writes
				// nothing; converged means idle too.
				require.Eventually(t, func() bool { return c.queue.Len() == 0 }, time.Minute, 10*time.Millisecond)
				t.Logf("%s, %s: converged %.2f s after it began (last write), %d reconciles, %d API requests (%d writes)",
					tc.name, phase, time.Unix(0, c.lastWrite.Load()).Sub(since).Seconds(),
					c.syncs.Load(), requests.all.Load(), requests.writes.Load())
			}
			converge(fmt.Sprintf("%d existing sources", existing), start)

			syncs, all, writes := c.syncs.Load(), requests.all.Load(), requests.writes.Load()
			burst := time.Now()
			setValues(t, cs, ns, names[:updated], "v2")
			forEach(t, names[existing-deleted:], func(ctx context.Context, name string) error {
				return cs.CoreV1().ConfigMaps(ns).Delete(ctx, name, metav1.DeleteOptions{})
			})
			converge(fmt.Sprintf("%d updates and %d deletes", updated, deleted), burst)
			t.Logf("%s, burst alone: %d reconciles, %d API requests (%d writes)", tc.name,
				c.syncs.Load()-syncs, requests.all.Load()-all, requests.writes.Load()-writes)

			final, ok, err := mirrorState(ctx, cs, ns)
			require.NoError(t, err)
			require.True(t, ok)
			assert.Len(t, final, existing-deleted)
			finals[tc.name] = final
		})
	}
	if len(finals) == 2 {
		assert.Equal(t, finals["client-go"], finals["go-workqueue"], "the two queues left different states")
	}
}
