package workqueue

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestFIFO pushes and pops in rounds that cross segment boundaries in
// every way, and checks the order, that popped slots are cleared, and that
// emptied segments are kept for reuse up to the bound and no more.
func TestFIFO(t *testing.T) {
	for _, tc := range []struct {
		name   string
		rounds [][2]int // pushes, then pops, per round
	}{
		{"one", [][2]int{{1, 1}}},
		{"segment exactly", [][2]int{{fifoSegmentSize, fifoSegmentSize}}},
		{"segment and one", [][2]int{{fifoSegmentSize + 1, fifoSegmentSize + 1}}},
		{"interleaved", [][2]int{{100, 50}, {100, 100}, {200, 250}}},
		{"burst above the kept segments", [][2]int{{20 * fifoSegmentSize, 20 * fifoSegmentSize}, {5, 5}}},
		{"one at a time", [][2]int{{1, 1}, {1, 1}, {300, 299}, {1, 2}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFIFO[*int]()
			var want []*int
			for _, round := range tc.rounds {
				for range round[0] {
					item := new(int)
					*item = len(want)
					want = append(want, item)
					f.push(item)
				}
				for range round[1] {
					require.Same(t, want[0], f.pop())
					want = want[1:]
					assert.Nil(t, f.head.items[f.headPos-1], "popped slot not cleared")
				}
				assert.LessOrEqual(t, f.nSpares, fifoKeepSegments)
			}
			require.Empty(t, want)
		})
	}
}

// TestFIFOReusesSegments checks that a fifo that fills and empties in
// batches within the kept segments stops allocating.
func TestFIFOReusesSegments(t *testing.T) {
	for _, batch := range []int{1, fifoSegmentSize, fifoKeepSegments * fifoSegmentSize} {
		t.Run(fmt.Sprint(batch), func(t *testing.T) {
			f := newFIFO[int]()
			round := func() {
				for i := range batch {
					f.push(i)
				}
				for range batch {
					f.pop()
				}
			}
			round() // the first round may allocate the segments it keeps
			assert.Zero(t, testing.AllocsPerRun(10, round))
		})
	}
}

// TestQueueReplacesAnEmptyDefaultQueue: an empty DefaultQueue in the config
// gets the queue's own storage; one with items in it is used as given.
func TestQueueReplacesAnEmptyDefaultQueue(t *testing.T) {
	q := NewTypedWithConfig(TypedQueueConfig[int]{Queue: DefaultQueue[int]()})
	assert.Nil(t, q.custom)
	assert.False(t, q.sharded.Load())

	filled := DefaultQueue[int]()
	filled.Push(7)
	q = NewTypedWithConfig(TypedQueueConfig[int]{Queue: filled})
	assert.Same(t, filled, q.custom)
	q.ShutDown()
}
