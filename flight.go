package workqueue

import (
	"time"

	"github.com/go-workqueue/workqueue/internal/chunked"
	"github.com/go-workqueue/workqueue/internal/list"
)

// flightList lists the items being processed in the order Get handed them
// out, by their ids in the item table, with the time of each hand-out, once
// tracking is set. Items handed out before that are not in it.
type flightList struct {
	tracking bool
	list     list.IDs
	links    list.Links
	handouts chunked.Array[handout] // by id
}

// handout is when Get handed out the item with an id, if it is in the list.
type handout struct {
	since  time.Time
	linked bool
}

func newFlightList() flightList { return flightList{list: list.New()} }

// link appends the item with id, handed out at now.
func (f *flightList) link(id int32, now time.Time) {
	for f.handouts.Len() <= int(id) {
		f.handouts.Push(handout{})
	}
	*f.handouts.At(int(id)) = handout{since: now, linked: true}
	f.list.PushBack(&f.links, id)
}

// since returns when the item with id, which is in the list, was handed
// out.
func (f *flightList) since(id int32) time.Time { return f.handouts.At(int(id)).since }

// unlink takes the item with id out of the list, if it is in it, and
// returns when it was handed out and whether it was in it.
func (f *flightList) unlink(id int32) (since time.Time, linked bool) {
	if int(id) >= f.handouts.Len() {
		return time.Time{}, false
	}
	h := f.handouts.At(int(id))
	since, linked = h.since, h.linked
	if linked {
		f.list.Remove(&f.links, id)
		*h = handout{}
	}
	return since, linked
}

// shrink lets go of a burst's memory once nothing is in flight.
func (f *flightList) shrink() {
	f.links.Shrink()
	if f.handouts.Len() > chunked.Size {
		f.handouts.Reset()
	}
}
