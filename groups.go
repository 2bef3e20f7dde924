package workqueue

import (
	"fmt"
	"maps"
	"slices"

	"github.com/go-workqueue/workqueue/internal/chunked"
	"github.com/go-workqueue/workqueue/internal/list"
)

// GroupLimits limits how many items of a group are processed at once: a
// tenant, a namespace, an external API. Items of a group at its limit stay
// queued, in their order, counted by Len, and Get passes over them to the
// items of other groups. A queue with custom storage (a config's Queue)
// cannot have group limits.
type GroupLimits[T comparable] struct {
	// Group returns item's group, "" for none. It is called with the queue
	// locked when an item is first queued, and its answer is kept while the
	// queue holds the item; it must return the same group for an item
	// every time, and must neither panic nor call the queue.
	Group   func(item T) string
	Default int            // the limit of a group Limits does not name; 0 or less: none
	Limits  map[string]int // copied; 0 or less: none; "" cannot be limited
}

// GroupState is a group that has items in flight or queued, in a
// [Snapshot]; Group "" holds the items of no group.
type GroupState struct {
	Group    string
	Limit    int // 0 for no limit
	InFlight int // items handed out and not yet done
	Queued   int // items queued, whether or not they wait for a slot
	Waiting  int // the queued items that wait for a slot
}

// group is what a queue with group limits knows of a group that holds
// items. A group is dropped when the queue holds none of its items, so
// that keys seen once do not pin memory; its limit lives on in the set's
// overrides if it was set.
type group struct {
	name     string
	limit    int // 0: none
	inFlight int
	queued   int
	held     int // ids the queue holds with this group
	// subs are the lists of queued ids of the group, one per list of the
	// order that holds some: blocking the group takes them all out of
	// the running.
	subs []*groupSub
}

// open reports whether the group has a free slot.
func (g *group) open() bool { return g.limit <= 0 || g.inFlight < g.limit }

// waiting returns how many of the group's queued items wait for a slot.
func (g *group) waiting() int {
	if g.limit <= 0 {
		return 0
	}
	return max(0, g.queued-max(0, g.limit-g.inFlight))
}

// groupSet is the core's part of group limits: each held item's group, the
// groups' counts and limits.
type groupSet[T comparable] struct {
	groupOf      func(T) string
	defaultLimit int
	limits       map[string]int
	byName       map[string]*group
	byID         chunked.Array[*group] // the group of each held id, once queued
	// atLimit counts the groups with items waiting for a slot; the core
	// counts the items.
	atLimit int
}

// newGroupSet returns the set config describes, nil for none. caller names
// the constructor in its panics.
func newGroupSet[T comparable](caller string, config *GroupLimits[T]) *groupSet[T] {
	if config == nil {
		return nil
	}
	if config.Group == nil {
		panic(fmt.Sprintf("workqueue: %s: GroupLimits.Group is nil", caller))
	}
	limits := maps.Clone(config.Limits)
	if limits == nil {
		limits = make(map[string]int) // SetGroupLimit writes to it
	}
	return &groupSet[T]{
		groupOf:      config.Group,
		defaultLimit: max(config.Default, 0),
		limits:       limits,
		byName:       make(map[string]*group),
	}
}

// limitOf returns the limit of the group named name, 0 for none.
func (s *groupSet[T]) limitOf(name string) int {
	if name == "" {
		return 0
	}
	if limit, ok := s.limits[name]; ok {
		return max(limit, 0)
	}
	return s.defaultLimit
}

// attach returns the group of the held item with id, finding it the first
// time.
func (s *groupSet[T]) attach(id int32, item T) *group {
	for s.byID.Len() <= int(id) {
		s.byID.Push(nil)
	}
	slot := s.byID.At(int(id))
	if *slot != nil {
		return *slot
	}
	name := s.groupOf(item)
	g := s.byName[name]
	if g == nil {
		g = &group{name: name, limit: s.limitOf(name)}
		s.byName[name] = g
	}
	g.held++
	*slot = g
	return g
}

// of returns the group of the queued or in-flight id.
func (s *groupSet[T]) of(id int32) *group { return *s.byID.At(int(id)) }

// detach forgets the group of id, which the queue lets go of.
func (s *groupSet[T]) detach(id int32) {
	if s.byID.Len() <= int(id) {
		return
	}
	slot := s.byID.At(int(id))
	if g := *slot; g != nil {
		*slot = nil
		if g.held--; g.held == 0 {
			delete(s.byName, g.name)
		}
	}
}

// change applies update to g's counts or limit, keeping atLimit true, and
// returns by how much the items waiting for a slot changed and whether g's
// slots opened (one was free and none was) or closed.
func (s *groupSet[T]) change(g *group, update func()) (waiting int, opened, closed bool) {
	wasOpen, wasWaiting := g.open(), g.waiting()
	update()
	nowWaiting := g.waiting()
	switch {
	case wasWaiting == 0 && nowWaiting > 0:
		s.atLimit++
	case wasWaiting > 0 && nowWaiting == 0:
		s.atLimit--
	}
	isOpen := g.open()
	return nowWaiting - wasWaiting, isOpen && !wasOpen, wasOpen && !isOpen
}

// states returns how many groups have items in flight or queued, and the
// first n of them, those with items waiting for a slot first, then by
// name. It takes O(groups log n) steps and O(n) memory: a bounded heap
// keeps the n first seen so far, the last of them on top.
func (s *groupSet[T]) states(n int) (count int, first []GroupState) {
	after := func(a, b GroupState) bool { // a comes after b
		if (a.Waiting > 0) != (b.Waiting > 0) {
			return b.Waiting > 0
		}
		return a.Group > b.Group
	}
	for _, g := range s.byName {
		if g.inFlight == 0 && g.queued == 0 {
			continue
		}
		count++
		state := GroupState{Group: g.name, Limit: g.limit, InFlight: g.inFlight, Queued: g.queued, Waiting: g.waiting()}
		switch {
		case len(first) < n:
			first = append(first, state)
			for i := len(first) - 1; i > 0 && after(first[i], first[(i-1)/2]); i = (i - 1) / 2 {
				first[i], first[(i-1)/2] = first[(i-1)/2], first[i]
			}
		case n > 0 && after(first[0], state):
			first[0] = state
			for i := 0; ; {
				last := i
				for _, child := range [2]int{2*i + 1, 2*i + 2} {
					if child < len(first) && after(first[child], first[last]) {
						last = child
					}
				}
				if last == i {
					break
				}
				first[i], first[last] = first[last], first[i]
				i = last
			}
		}
	}
	slices.SortFunc(first, func(a, b GroupState) int {
		if after(a, b) {
			return 1
		}
		return -1
	})
	return count, first
}

// groupedList holds queued ids in lists by group, each list ordered by a
// key of its ids (a sequence number), and finds the id of least key among
// the groups with a free slot: the FIFO order, a fairness leaf or the age
// list of a queue with group limits. A heap of the lists of open groups
// keeps that O(log groups).
type groupedList struct {
	links *list.Links
	keys  *chunked.Array[uint64] // by id
	// leaf is the fairness leaf the list belongs to, nil for none.
	leaf *fairNode
	subs map[*group]*groupSub
	// heap holds the lists of the open groups, by the key of their first
	// id; eligible counts the ids in them.
	heap     []*groupSub
	eligible int
}

// groupSub is the list of one group's queued ids in a groupedList.
type groupSub struct {
	owner   *groupedList
	g       *group
	ids     list.IDs
	heapAt  int // its index in owner.heap, -1 when not in it
	groupAt int // its index in g.subs
}

func newGroupedList(links *list.Links, keys *chunked.Array[uint64], leaf *fairNode) *groupedList {
	return &groupedList{links: links, keys: keys, leaf: leaf, subs: make(map[*group]*groupSub)}
}

func (l *groupedList) key(s *groupSub) uint64 { return *l.keys.At(int(s.ids.Head())) }

// push appends id, of group g, to g's list; its key is already set.
func (l *groupedList) push(id int32, g *group) {
	s := l.subs[g]
	if s == nil {
		s = &groupSub{owner: l, g: g, ids: list.New(), heapAt: -1, groupAt: len(g.subs)}
		g.subs = append(g.subs, s)
		l.subs[g] = s
	}
	s.ids.PushBack(l.links, id)
	if g.open() {
		l.eligible++
		if s.heapAt < 0 {
			l.heapPush(s)
		}
	}
}

// remove takes id, of group g, out of g's list.
func (l *groupedList) remove(id int32, g *group) {
	s := l.subs[g]
	wasFirst := s.ids.Head() == id
	s.ids.Remove(l.links, id)
	if g.open() {
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

// first returns the id of least key among the open groups; eligible must
// be positive.
func (l *groupedList) first() int32 { return l.heap[0].ids.Head() }

// block takes s, whose group filled its slots, out of the running, and
// returns how many ids left it.
func (l *groupedList) block(s *groupSub) int {
	l.heapRemove(s)
	l.eligible -= s.ids.Len()
	return s.ids.Len()
}

// unblock puts s, whose group has a free slot again, back in the running,
// and returns how many ids joined it.
func (l *groupedList) unblock(s *groupSub) int {
	l.heapPush(s)
	l.eligible += s.ids.Len()
	return s.ids.Len()
}

// walk returns at most n eligible ids in key order, without changing
// anything.
func (l *groupedList) walk(n int) []int32 {
	w := l.walker()
	var out []int32
	for len(out) < n {
		id := w.next()
		if id < 0 {
			break
		}
		out = append(out, id)
	}
	return out
}

// groupedWalker returns the eligible ids of a groupedList in key order,
// for a Snapshot: a heap of the next id of every open group, which the
// list's own heap already orders.
type groupedWalker struct {
	l       *groupedList
	cursors []int32 // a heap by key
}

func (l *groupedList) walker() *groupedWalker {
	w := &groupedWalker{l: l, cursors: make([]int32, 0, len(l.heap))}
	for _, s := range l.heap {
		w.cursors = append(w.cursors, s.ids.Head())
	}
	return w
}

func (w *groupedWalker) key(i int) uint64 { return *w.l.keys.At(int(w.cursors[i])) }

// next returns the next id, -1 after the last.
func (w *groupedWalker) next() int32 {
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

func (l *groupedList) less(i, j int) bool { return l.key(l.heap[i]) < l.key(l.heap[j]) }

func (l *groupedList) swap(i, j int) {
	l.heap[i], l.heap[j] = l.heap[j], l.heap[i]
	l.heap[i].heapAt = i
	l.heap[j].heapAt = j
}

func (l *groupedList) heapPush(s *groupSub) {
	s.heapAt = len(l.heap)
	l.heap = append(l.heap, s)
	l.up(s.heapAt)
}

func (l *groupedList) heapRemove(s *groupSub) {
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

func (l *groupedList) up(i int) {
	for i > 0 {
		parent := (i - 1) / 2
		if !l.less(i, parent) {
			return
		}
		l.swap(i, parent)
		i = parent
	}
}

func (l *groupedList) down(i int) {
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
