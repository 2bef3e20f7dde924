// Package kubernetes holds no library code: its tests run controllers on
// the queues of github.com/go-workqueue/workqueue against a real
// kube-apiserver and etcd, started by controller-runtime's envtest from
// binaries that tools/build.sh builds from source.
//
// The tests need KUBEBUILDER_ASSETS to name the directory holding
// kube-apiserver and etcd; without it they skip, saying so:
//
//	KUBEBUILDER_ASSETS=$(tools/build.sh) go test -race ./...
//
// The repository's test.sh does that when the binaries are already built,
// or when KUBE=1 asks for them to be built.
package kubernetes
