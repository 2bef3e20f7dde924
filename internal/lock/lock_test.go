package lock

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestYieldingMutexExcludes has more goroutines than cores update a plain
// counter under the lock, some holding it long enough to send the others
// through every stage of Lock (retries, yields, parking); the race
// detector and the final count check that no two held it at once.
func TestYieldingMutexExcludes(t *testing.T) {
	for _, tc := range []struct {
		name       string
		goroutines int
		holdSpins  int
	}{
		{"short holds", 16, 0},
		{"long holds", 8, 20_000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const perGoroutine = 500
			var m Mutex
			counter := 0
			var wg sync.WaitGroup
			for range tc.goroutines {
				wg.Go(func() {
					for range perGoroutine {
						m.Lock()
						before := counter
						for i := range tc.holdSpins {
							spinSinkForTest += i
						}
						counter = before + 1
						m.Unlock()
					}
				})
			}
			wg.Wait()
			assert.Equal(t, tc.goroutines*perGoroutine, counter)
		})
	}
}

// spinSinkForTest is written only under the lock in the test above.
var spinSinkForTest int
