package kubernetes

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"go.uber.org/goleak"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

// cfg is the shared API server's admin configuration; nil when
// KUBEBUILDER_ASSETS is unset, and the tests then skip.
var cfg *rest.Config

// skipNotice is the one line a test skips with when no server runs.
const skipNotice = "KUBEBUILDER_ASSETS is unset: no kube-apiserver to test against; " +
	"run KUBEBUILDER_ASSETS=$(tools/build.sh) go test ./..., or KUBE=1 ../test.sh"

// One API server for all the tests: starting one takes seconds, and each
// test keeps to namespaces of its own.
func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	// The managers' logs would bury the figures the tests print; failures
	// show through the tests' own checks.
	ctrllog.SetLogger(logr.Discard())
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		return leakCheck(m.Run())
	}
	useExisting := false
	env := &envtest.Environment{
		// Never a cluster from the environment: the tests create and
		// flood namespaces.
		UseExistingCluster:       &useExisting,
		ControlPlaneStartTimeout: 2 * time.Minute,
		ControlPlaneStopTimeout:  time.Minute,
	}
	start := time.Now()
	c, err := env.Start()
	if err != nil {
		// A server that was asked for and cannot start is a failure,
		// not a reason to skip.
		fmt.Fprintf(os.Stderr, "starting kube-apiserver and etcd from %s: %v\n", os.Getenv("KUBEBUILDER_ASSETS"), err)
		return 1
	}
	fmt.Printf("kube-apiserver and etcd started in %.1f s\n", time.Since(start).Seconds())
	cfg = c
	code := m.Run()
	if err := env.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "stopping kube-apiserver and etcd: %v\n", err)
		code = 1
	}
	return leakCheck(code)
}

// leakCheck fails a passing run that left goroutines behind: every
// manager, informer and worker must have stopped with its test.
func leakCheck(code int) int {
	if code != 0 {
		return code
	}
	if err := goleak.Find(leakOptions...); err != nil {
		fmt.Fprintf(os.Stderr, "goroutines left after the tests: %v\n", err)
		return 1
	}
	return 0
}

// leakOptions names the goroutines that outlive every test by design.
var leakOptions = []goleak.Option{
	// klog flushes its buffers from one goroutine for the life of the
	// process, started on import.
	goleak.IgnoreTopFunction("k8s.io/klog/v2.(*flushDaemon).run.func1"),
}

func requireServer(t *testing.T) *rest.Config {
	t.Helper()
	if cfg == nil {
		t.Skip(skipNotice)
	}
	return rest.CopyConfig(cfg)
}
