module github.com/go-workqueue/workqueue

go 1.25.0

require (
	github.com/stretchr/testify v1.12.1
	go.uber.org/goleak v1.3.0
	golang.org/x/time v0.15.0
	k8s.io/utils v0.0.0-20260707023825-cf1189d6abe3
)

require go.yaml.in/yaml/v3 v3.0.5 // indirect
