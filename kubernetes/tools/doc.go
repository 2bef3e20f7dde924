// Package tools holds no code: its module pins kube-apiserver and etcd as
// tools, and build.sh builds them from the Go module proxy for the
// kubernetes module's envtest tests. It is a module of its own so that the
// huge dependency graph of k8s.io/kubernetes reaches no other go.mod.
package tools
