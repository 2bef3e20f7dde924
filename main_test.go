package workqueue

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run if any test leaves a goroutine behind.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// soak is set by WORKQUEUE_SOAK=1 in the environment (CI sets it): the
// long tests (the model walks, the linearizability histories, the racy
// rounds and the drain rounds) then run at CI's sizes.
var soak = os.Getenv("WORKQUEUE_SOAK") == "1"

// sized returns short with -short, full (CI's size) when soaking, and def
// otherwise.
func sized[N int | int64](full, def, short N) N {
	switch {
	case testing.Short():
		return short
	case soak:
		return full
	}
	return def
}
