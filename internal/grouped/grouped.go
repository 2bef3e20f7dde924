// Package grouped provides a list of queued item ids kept by group, which
// hands out the id of least key among the groups that are open: the FIFO
// order, a fairness leaf or the age list of a queue with group limits.
package grouped

import (
	"fmt"

	"github.com/go-workqueue/workqueue/internal/chunked"
	"github.com/go-workqueue/workqueue/internal/list"
)

// Group is a group of ids as the lists see it: open or closed, and its
// part (a Sub) of every List that holds some of its ids. A closed group's
// ids stay in their lists, in their order, but First passes over them.
// The zero value is an open group with no ids.
type Group struct {
	subs   []*Sub
	closed bool
}

// Open reports whether g's ids are in the running.
func (g *Group) Open() bool { return !g.closed }

// Subs returns g's parts of the lists that hold some of its ids, in no
// particular order. The caller must not change the slice.
func (g *Group) Subs() []*Sub { return g.subs }

// Close takes g's ids out of the running in every list; g must be open.
func (g *Group) Close() {
	g.closed = true
	for _, s := range g.subs {
		s.owner.heapRemove(s)
		s.owner.eligible -= s.ids.Len()
	}
}

// Reopen puts g's ids back in the running in every list; g must be closed.
func (g *Group) Reopen() {
	g.closed = false
	for _, s := range g.subs {
		s.owner.heapPush(s)
		s.owner.eligible += s.ids.Len()
	}
}

// List holds queued ids in one list per group, each ordered by a key of
// its ids (a sequence number the caller sets before Push and leaves alone
// while the id is listed), and finds the id of least key among the open
// groups in O(1), keeping a heap of the open groups' lists by the key of
// their first id, O(log groups) per change. The zero value is not usable:
// make one with New.
//
// Invariant (Verify checks it): every Sub is non-empty, in key order,
// filed under its group and its group's subs; the heap holds exactly the
// Subs of open groups and keeps each above its children by first key;
// Eligible counts the ids of the Subs in the heap.
type List struct {
	links *list.Links
	keys  *chunked.Array[uint64] // by id
	// Owner is the caller's: what the list belongs to.
	Owner any
	subs  map[*Group]*Sub
	// heap holds the Subs of the open groups, by the key of their first
	// id; eligible counts the ids in them.
	heap     []*Sub
	eligible int
}

// Sub is the list of one group's ids in a List.
type Sub struct {
	owner   *List
	g       *Group
	ids     list.IDs
	heapAt  int // its index in owner.heap, -1 when not in it
	groupAt int // its index in g.subs
}

// New returns an empty List whose lists link their ids in links and take
// their keys from keys, by id, and whose Owner is owner.
func New(links *list.Links, keys *chunked.Array[uint64], owner any) *List {
	return &List{links: links, keys: keys, Owner: owner, subs: make(map[*Group]*Sub)}
}

// List returns the List s belongs to.
func (s *Sub) List() *List { return s.owner }

// Len returns the number of ids of s.
func (s *Sub) Len() int { return s.ids.Len() }

// FirstKey returns the key of the first id of s.
func (s *Sub) FirstKey() uint64 { return *s.owner.keys.At(int(s.ids.Head())) }

// Eligible returns the number of ids of the open groups.
func (l *List) Eligible() int { return l.eligible }

// Push appends id, of group g, to g's list; its key is already set and is
// greater than that of any id of g in l.
func (l *List) Push(id int32, g *Group) {
	s := l.subs[g]
	if s == nil {
		s = &Sub{owner: l, g: g, ids: list.New(), heapAt: -1, groupAt: len(g.subs)}
		g.subs = append(g.subs, s)
		l.subs[g] = s
	}
	s.ids.PushBack(l.links, id)
	if !g.closed {
		l.eligible++
		if s.heapAt < 0 {
			l.heapPush(s)
		}
	}
}

// Remove takes id, of group g, out of l.
func (l *List) Remove(id int32, g *Group) {
	s := l.subs[g]
	wasFirst := s.ids.Head() == id
	s.ids.Remove(l.links, id)
	if !g.closed {
		l.eligible--
	}
	if s.ids.Len() == 0 {
		if s.heapAt >= 0 {
			l.heapRemove(s)
		}
		delete(l.subs, g)
		last := g.subs[len(g.subs)-1]
		g.subs[s.groupAt] = last
		last.groupAt = s.groupAt
		g.subs[len(g.subs)-1] = nil
		g.subs = g.subs[:len(g.subs)-1]
		return
	}
	if wasFirst && s.heapAt >= 0 {
		l.down(s.heapAt) // its first key only grew
	}
}

// First returns the id of least key among the open groups; Eligible must
// be positive.
func (l *List) First() int32 { return l.heap[0].ids.Head() }

// Walk returns at most n ids of the open groups in key order, without
// changing anything.
func (l *List) Walk(n int) []int32 {
	w := l.Walker()
	var out []int32
	for len(out) < n {
		id := w.Next()
		if id < 0 {
			break
		}
		out = append(out, id)
	}
	return out
}

// Walker returns the ids of the open groups of a List in key order, for a
// Snapshot: a heap of the next id of every open group, which the list's
// own heap already orders. The List must not change while it walks.
type Walker struct {
	l       *List
	cursors []int32 // a heap by key
}

// Walker returns a Walker at the first id of the open groups of l.
func (l *List) Walker() *Walker {
	w := &Walker{l: l, cursors: make([]int32, 0, len(l.heap))}
	for _, s := range l.heap {
		w.cursors = append(w.cursors, s.ids.Head())
	}
	return w
}

func (w *Walker) key(i int) uint64 { return *w.l.keys.At(int(w.cursors[i])) }

// Next returns the next id, -1 after the last.
func (w *Walker) Next() int32 {
	if len(w.cursors) == 0 {
		return -1
	}
	id := w.cursors[0]
	if next := w.l.links.Next(id); next >= 0 {
		w.cursors[0] = next
	} else {
		last := len(w.cursors) - 1
		w.cursors[0] = w.cursors[last]
		w.cursors = w.cursors[:last]
	}
	for i := 0; ; { // sift the first cursor down
		least := i
		for _, child := range [2]int{2*i + 1, 2*i + 2} {
			if child < len(w.cursors) && w.key(child) < w.key(least) {
				least = child
			}
		}
		if least == i {
			return id
		}
		w.cursors[i], w.cursors[least] = w.cursors[least], w.cursors[i]
		i = least
	}
}

func (l *List) less(i, j int) bool { return l.heap[i].FirstKey() < l.heap[j].FirstKey() }

func (l *List) swap(i, j int) {
	l.heap[i], l.heap[j] = l.heap[j], l.heap[i]
	l.heap[i].heapAt = i
	l.heap[j].heapAt = j
}

func (l *List) heapPush(s *Sub) {
	s.heapAt = len(l.heap)
	l.heap = append(l.heap, s)
	l.up(s.heapAt)
}

func (l *List) heapRemove(s *Sub) {
	i, last := s.heapAt, len(l.heap)-1
	if i != last {
		l.swap(i, last)
	}
	l.heap[last] = nil
	l.heap = l.heap[:last]
	s.heapAt = -1
	if i != last {
		l.down(i)
		l.up(i)
	}
}

func (l *List) up(i int) {
	for i > 0 {
		parent := (i - 1) / 2
		if !l.less(i, parent) {
			return
		}
		l.swap(i, parent)
		i = parent
	}
}

func (l *List) down(i int) {
	for {
		least := i
		for _, child := range [2]int{2*i + 1, 2*i + 2} {
			if child < len(l.heap) && l.less(child, least) {
				least = child
			}
		}
		if least == i {
			return
		}
		l.swap(i, least)
		i = least
	}
}

// Verify checks the invariant of l and of the groups it holds ids of, and
// returns the ids l lists, or the first fault found. It is for tests.
func Verify(l *List) (map[int32]bool, error) {
	listed := map[int32]bool{}
	eligible := 0
	for g, s := range l.subs {
		ids, err := list.Verify(s.ids, l.links)
		if err != nil {
			return nil, err
		}
		if len(ids) == 0 || s.g != g || s.owner != l || s.groupAt >= len(g.subs) || g.subs[s.groupAt] != s {
			return nil, fmt.Errorf("an empty list, or one filed wrong: %d ids", len(ids))
		}
		for i, id := range ids {
			if listed[id] {
				return nil, fmt.Errorf("id %d listed twice", id)
			}
			listed[id] = true
			if i > 0 && *l.keys.At(int(id)) <= *l.keys.At(int(ids[i-1])) {
				return nil, fmt.Errorf("out of key order at id %d", id)
			}
		}
		if (s.heapAt >= 0) != g.Open() || s.heapAt >= len(l.heap) || s.heapAt >= 0 && l.heap[s.heapAt] != s {
			return nil, fmt.Errorf("list of id %d: open %v, at %d in the heap", ids[0], g.Open(), s.heapAt)
		}
		if g.Open() {
			eligible += len(ids)
		}
		for i, other := range g.subs {
			if other.groupAt != i || other.g != g || other.owner.subs[g] != other {
				return nil, fmt.Errorf("list of id %d: its group's list %d filed wrong", ids[0], i)
			}
		}
	}
	for i := 1; i < len(l.heap); i++ {
		if l.less(i, (i-1)/2) {
			return nil, fmt.Errorf("heap out of order at %d", i)
		}
	}
	open := 0
	for _, s := range l.subs {
		if s.heapAt >= 0 {
			open++
		}
	}
	if open != len(l.heap) || eligible != l.eligible {
		return nil, fmt.Errorf("%d open lists, heap holds %d; %d eligible ids, counted %d", open, len(l.heap), eligible, l.eligible)
	}
	return listed, nil
}
