//go:build readme

// The packages that the READMEs' Go snippets may import beyond the standard
// library, so that go mod tidy keeps them in go.mod: a snippet builds
// inside this module, with its requirements. To import another package in
// a README, add it here and run go mod tidy.
package readmetest

import (
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/prometheus/client_golang/prometheus/promhttp"
	_ "github.com/redis/go-redis/v9"
	_ "k8s.io/api/apps/v1"
	_ "k8s.io/api/core/v1"
	_ "sigs.k8s.io/controller-runtime"
	_ "sigs.k8s.io/controller-runtime/pkg/client"
	_ "sigs.k8s.io/controller-runtime/pkg/controller"
	_ "sigs.k8s.io/controller-runtime/pkg/handler"
	_ "sigs.k8s.io/controller-runtime/pkg/reconcile"

	_ "github.com/go-workqueue/workqueue"
	_ "github.com/go-workqueue/workqueue/controllerruntime"
	_ "github.com/go-workqueue/workqueue/inspect"
	_ "github.com/go-workqueue/workqueue/prometheus"
	_ "github.com/go-workqueue/workqueue/redis"
)
