package kubernetes

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// testLabel marks every object the tests make, so that caches and
// informers see only those.
const testLabel = "workqueue.test/role"

// seq keeps names apart across -count=N runs in one process: the API
// server, and controller-runtime's metrics registry, outlive a test.
var seq atomic.Int64

func unique(prefix string) string { return fmt.Sprintf("%s-%d", prefix, seq.Add(1)) }

// requestCounter counts the HTTP requests a client makes to the API server,
// writes apart, watches included (each is one request however long it
// lasts).
type requestCounter struct {
	all, writes atomic.Int64
}

// wrap makes config's clients count their requests in c, and lifts
// client-go's default limit of 5 requests a second, which would otherwise
// decide every timing measured here.
func (c *requestCounter) wrap(config *rest.Config) *rest.Config {
	config = rest.CopyConfig(config)
	config.QPS = -1
	config.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			c.all.Add(1)
			if r.Method != http.MethodGet {
				c.writes.Add(1)
			}
			return rt.RoundTrip(r)
		})
	}
	return config
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// clientset returns an uncounted clientset without client-side throttling,
// for the tests' own setup and checks.
func clientset(t *testing.T, config *rest.Config) *kubernetes.Clientset {
	t.Helper()
	config = rest.CopyConfig(config)
	config.QPS = -1
	cs, err := kubernetes.NewForConfig(config)
	require.NoError(t, err)
	return cs
}

// namespace creates a namespace named after prefix. It is left behind:
// envtest runs no namespace controller to finish a deletion, and the
// server is gone when the tests end.
func namespace(t *testing.T, cs kubernetes.Interface, prefix string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: unique(prefix)}}
	_, err := cs.CoreV1().Namespaces().Create(context.Background(), ns, metav1.CreateOptions{})
	require.NoError(t, err)
	return ns.Name
}

func configMap(ns, name, role, value string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{testLabel: role}},
		Data:       map[string]string{"value": value},
	}
}

// createConfigMaps creates n ConfigMaps named prefix-0 to prefix-(n-1) in
// ns, with value "v1", from a few goroutines so that thousands take
// seconds, not minutes.
func createConfigMaps(t *testing.T, cs kubernetes.Interface, ns, prefix, role string, n int) []string {
	t.Helper()
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	forEach(t, names, func(ctx context.Context, name string) error {
		_, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, configMap(ns, name, role, "v1"), metav1.CreateOptions{})
		return err
	})
	return names
}

// setValues sets the value of the named ConfigMaps of ns, as a user's
// edits would: read, change, update.
func setValues(t *testing.T, cs kubernetes.Interface, ns string, names []string, value string) {
	t.Helper()
	forEach(t, names, func(ctx context.Context, name string) error {
		cm, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		cm.Data["value"] = value
		_, err = cs.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{})
		return err
	})
}

// forEach calls f for every name from 8 goroutines and fails the test on
// the first error.
func forEach(t *testing.T, names []string, f func(ctx context.Context, name string) error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	next := make(chan string)
	errs := make(chan error, 8)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for name := range next {
				if err := f(ctx, name); err != nil {
					errs <- fmt.Errorf("%s: %w", name, err)
					cancel()
					return
				}
			}
		})
	}
feed:
	for _, name := range names {
		select {
		case next <- name:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	close(errs)
	require.NoError(t, <-errs)
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().String()
}
