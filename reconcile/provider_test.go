package reconcile

import "github.com/go-workqueue/workqueue/internal/metricstest"

// recordingProvider keeps every metric it makes, for tests to read.
type recordingProvider = metricstest.Recorder
