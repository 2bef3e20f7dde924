package crqueue_test

import (
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	crqueue "github.com/go-workqueue/workqueue/controllerruntime"
)

// The one option that switches a controller to this queue; pass the
// options to ctrl.NewControllerManagedBy(mgr).WithOptions or
// controller.New.
func ExampleNewQueue() {
	opts := controller.Options{NewQueue: crqueue.NewQueue[reconcile.Request]()}
	_ = opts
}

// Namespaces take turns within each priority, so one namespace's flood
// does not starve the others.
func ExampleWithFairness() {
	byNamespace := func(r reconcile.Request) string { return r.Namespace }
	opts := controller.Options{NewQueue: crqueue.NewQueue(crqueue.WithFairness(byNamespace))}
	_ = opts
}
