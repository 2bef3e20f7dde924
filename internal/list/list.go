// Package list provides a doubly linked list of item ids whose links live
// beside the item table, indexed by id.
package list

import (
	"fmt"

	"github.com/go-workqueue/workqueue/internal/chunked"
)

// IDs is a doubly linked list of item ids, oldest first, whose links live
// in a Links array indexed by id, beside the item table, so that a
// record does not pay for links it does not use. One Links array serves
// several lists as long as no id is in two of them at once: the leaves of a
// priority level's fairness tree share one. The zero value is not an empty
// list: make one with New.
//
// Invariant (Verify checks it): walking next from head visits n ids
// and ends at tail, and every id's prev is the id before it (-1 for head).
type IDs struct {
	head, tail int32 // -1 when empty
	n          int
}

// place is an id's place in a list: its neighbours, -1 for none.
type place struct{ prev, next int32 }

// Links holds the links of the ids in its lists, by id.
type Links struct{ links chunked.Array[place] }

// New returns an empty list.
func New() IDs { return IDs{head: -1, tail: -1} }

// Head returns the first id, -1 if the list is empty.
func (l *IDs) Head() int32 { return l.head }

// Len returns the number of ids in the list.
func (l *IDs) Len() int { return l.n }

// Size returns the number of ids links holds links for, in lists or not.
func (l *Links) Size() int { return l.links.Len() }

// at returns the links of id, which the array holds: an id in a list, or
// one PushBack has seen.
func (l *Links) at(id int32) *place { return l.links.At(int(id)) }

// grow extends the array to hold the links of id. Only PushBack can meet an
// id the array does not hold yet; it checks before it calls, so that the
// check inlines.
func (l *Links) grow(id int32) {
	for l.links.Len() <= int(id) {
		l.links.Push(place{prev: -1, next: -1})
	}
}

// Next returns the id after id in its list, -1 if id is last.
func (l *Links) Next(id int32) int32 { return l.links.At(int(id)).next }

// Shrink lets go of the links, once no id is in a list, if they had grown
// beyond a chunk, so that a burst does not pin memory. The links of ids in
// no list need no clearing: PushBack writes them whole.
func (l *Links) Shrink() {
	if l.links.Len() > chunked.Size {
		l.links.Reset()
	}
}

// PushBack appends id, which is in no list of links.
func (l *IDs) PushBack(links *Links, id int32) {
	if int(id) >= links.links.Len() {
		links.grow(id)
	}
	*links.at(id) = place{prev: l.tail, next: -1}
	if l.tail >= 0 {
		links.at(l.tail).next = id
	} else {
		l.head = id
	}
	l.tail = id
	l.n++
}

// Remove takes id, which is in l, out of it.
func (l *IDs) Remove(links *Links, id int32) {
	p := links.at(id)
	if p.prev >= 0 {
		links.at(p.prev).next = p.next
	} else {
		l.head = p.next
	}
	if p.next >= 0 {
		links.at(p.next).prev = p.prev
	} else {
		l.tail = p.prev
	}
	*p = place{prev: -1, next: -1}
	l.n--
}

// PopFront removes and returns the first id; l must not be empty. It is
// Remove of the head, without the branches a head does not need.
func (l *IDs) PopFront(links *Links) int32 {
	id := l.head
	p := links.at(id)
	l.head = p.next
	if p.next >= 0 {
		links.at(p.next).prev = -1
	} else {
		l.tail = -1
	}
	*p = place{prev: -1, next: -1}
	l.n--
	return id
}

// Verify checks a list's links both ways and its count, and returns its
// ids in order. It is for tests.
func Verify(l IDs, links *Links) ([]int32, error) {
	var ids []int32
	prev := int32(-1)
	for id := l.head; id >= 0; id = links.Next(id) {
		if int(id) >= links.Size() {
			return nil, fmt.Errorf("id %d has no links", id)
		}
		if got := links.links.At(int(id)).prev; got != prev {
			return nil, fmt.Errorf("id %d links back to %d, want %d", id, got, prev)
		}
		if ids = append(ids, id); len(ids) > links.Size() {
			return nil, fmt.Errorf("the list loops")
		}
		prev = id
	}
	if prev != l.tail || len(ids) != l.n {
		return nil, fmt.Errorf("the list holds %d ids ending at %d, its count says %d ending at %d", len(ids), prev, l.n, l.tail)
	}
	return ids, nil
}
