package workqueue

import (
	"fmt"
	"math/rand/v2"
	"slices"
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
					assert.Nil(t, f.head.Load().items[f.headPos-1], "popped slot not cleared")
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

// TestFIFOTake hands out tickets in order, as a queue's Get callers claim
// them, each caller loading head just before its claim, and takes the items
// in another order, as callers that run at different speeds would. Each
// take must return its ticket's item and clear its slot, and head must end
// at the segment of the last ticket. Pops come first, as in a queue that
// was sharded after a while.
func TestFIFOTake(t *testing.T) {
	for _, tc := range []struct {
		name         string
		pops, pushes int
		order        string // of the takes: "claimed", "reversed" or "shuffled"
	}{
		{"within a segment", 0, 100, "reversed"},
		{"segments in order", 0, 3*fifoSegmentSize + 7, "claimed"},
		{"segments reversed", 0, 3*fifoSegmentSize + 7, "reversed"},
		{"segments shuffled", 0, 5 * fifoSegmentSize, "shuffled"},
		{"after pops", fifoSegmentSize + 3, 2*fifoSegmentSize - 3, "shuffled"},
		{"after pops to a boundary", fifoSegmentSize, 2 * fifoSegmentSize, "reversed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFIFO[*int]()
			var items []*int
			for i := range tc.pops + tc.pushes {
				item := new(int)
				*item = i
				items = append(items, item)
				f.push(item)
			}
			for i := range tc.pops {
				require.Same(t, items[i], f.pop())
			}
			type claim struct {
				from   *fifoSegment[*int]
				ticket int
			}
			var claims []claim
			for ticket := tc.pops; ticket < len(items); ticket++ {
				claims = append(claims, claim{f.head.Load(), ticket})
			}
			switch tc.order {
			case "reversed":
				slices.Reverse(claims)
			case "shuffled":
				rand.New(rand.NewPCG(1, 2)).Shuffle(len(claims), func(i, j int) {
					claims[i], claims[j] = claims[j], claims[i]
				})
			}
			for _, c := range claims {
				require.Same(t, items[c.ticket], f.take(c.from, uint64(c.ticket)))
			}
			last := uint64(len(items) - 1)
			assert.Equal(t, last-last%fifoSegmentSize, f.head.Load().first, "head")
			for seg := f.head.Load(); seg != nil; seg = seg.next {
				for i, item := range seg.items {
					assert.Nilf(t, item, "slot %d of the segment from %d not cleared", i, seg.first)
				}
			}
		})
	}
}
