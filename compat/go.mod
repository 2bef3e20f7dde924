module github.com/go-workqueue/workqueue/compat

go 1.26.0

require (
	github.com/go-workqueue/workqueue v0.1.0
	github.com/stretchr/testify v1.12.1
	go.uber.org/goleak v1.3.0
)

require go.yaml.in/yaml/v3 v3.0.5 // indirect

require (
	github.com/go-logr/logr v1.4.3 // indirect
	golang.org/x/time v0.15.0 // indirect
	k8s.io/apimachinery v0.37.2 // indirect
	k8s.io/client-go v0.37.2
	k8s.io/klog/v2 v2.140.0 // indirect
	k8s.io/utils v0.0.0-20260707023825-cf1189d6abe3 // indirect
)
