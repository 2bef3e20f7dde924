package redisqueue

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run if any test leaves a goroutine behind: a handle's
// listener or lease keeper, or a client's.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
