package browsertest

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run if any test leaves a goroutine behind: the
// browser's included, which the test closes and waits for.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
