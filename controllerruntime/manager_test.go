package crqueue_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	crqueue "github.com/go-workqueue/workqueue/controllerruntime"
)

// TestManagerMetricsEndpoint runs a controller on our queue inside a real
// manager, without an API server (its source is a channel), and reads the
// manager's /metrics over HTTP as Prometheus would: the queue's series are
// there, under controller-runtime's names and labels.
func TestManagerMetricsEndpoint(t *testing.T) {
	addr := freeAddr(t)
	// No API server answers here: nothing in this test asks one.
	mgr, err := manager.New(&rest.Config{Host: "http://127.0.0.1:1"}, manager.Options{
		Metrics: metricsserver.Options{BindAddress: addr},
	})
	require.NoError(t, err)
	// The registry is global: a name of its own keeps -count=N runs apart.
	name := fmt.Sprintf("crq-manager-%d", controllerSeq.Add(1))
	rc := &recorder{}
	events := make(chan event.TypedGenericEvent[object])
	skip := true
	err = builder.TypedControllerManagedBy[reconcile.Request](mgr).
		Named(name).
		WithOptions(controller.TypedOptions[reconcile.Request]{
			NewQueue:           crqueue.NewQueue[reconcile.Request](),
			SkipNameValidation: &skip,
		}).
		WatchesRawSource(source.TypedChannel(events, enqueue)).
		Complete(rc)
	require.NoError(t, err)

	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan error, 1)
	go func() { stopped <- mgr.Start(ctx) }()
	defer func() {
		cancel()
		select {
		case err := <-stopped:
			assert.NoError(t, err)
		case <-time.After(10 * time.Second):
			t.Error("the manager did not stop within 10s")
		}
	}()
	for _, name := range []string{"a", "b", "c"} {
		select {
		case events <- event.TypedGenericEvent[object]{Object: object{req: req("ns", name)}}:
		case <-time.After(10 * time.Second):
			t.Fatal("the controller took no event for 10s")
		}
	}
	require.Eventually(t, func() bool { return rc.count() == 3 }, 10*time.Second, time.Millisecond)

	// All series at once: the third reconcile is counted before its Done,
	// which observes the work duration.
	labels := fmt.Sprintf(`controller=%q,name=%q`, name, name)
	wants := []string{
		`workqueue_adds_total{` + labels + `} 3`,
		`workqueue_depth{` + labels + `,priority="0"} 0`,
		`workqueue_work_duration_seconds_count{` + labels + `} 3`,
		`workqueue_queue_duration_seconds_count{` + labels + `} 3`,
		`workqueue_retries_total{` + labels + `} 0`,
	}
	// The last scrape's body, for the failure message: Eventually may
	// return while a scrape still runs.
	var last atomic.Pointer[string]
	last.Store(new(string))
	ok := assert.Eventually(t, func() bool {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		body := string(b)
		last.Store(&body)
		return err == nil && !slices.ContainsFunc(wants, func(want string) bool { return !strings.Contains(body, want) })
	}, 10*time.Second, 10*time.Millisecond)
	if !ok {
		t.Fatalf("the manager's /metrics lacks some of %q:\n%s", wants, grepWorkqueue(*last.Load()))
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().String()
}

func grepWorkqueue(body string) string {
	var lines []string
	for line := range strings.SplitSeq(body, "\n") {
		if strings.HasPrefix(line, "workqueue_") {
			lines = append(lines, line)
		}
	}
	return strings.Join(lines, "\n")
}
