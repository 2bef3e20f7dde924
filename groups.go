package workqueue

import (
	"fmt"
	"maps"
	"slices"

	"github.com/go-workqueue/workqueue/internal/chunked"
	"github.com/go-workqueue/workqueue/internal/grouped"
	"github.com/go-workqueue/workqueue/internal/list"
)

// GroupLimits limits how many items of a group are processed at once; the rest
// stay queued, in order and in Len, and Get passes over them.
type GroupLimits[T comparable] struct {
	Group   func(item T) string // item's group, "" for none: asked under the queue's lock once per hold; same answer always, no panic, no queue call
	Default int                 // the limit of a group Limits does not name; 0 or less: none
	Limits  map[string]int      // copied; 0 or less: none; "" cannot be limited
}

// GroupState is a group with items in flight or queued; "" is no group.
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
	// Group is the group as the order's lists of queued ids see it: the
	// order closes it when its slots fill and reopens it when one frees,
	// so that its Open agrees with open.
	grouped.Group
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

// newGroupedList returns an empty grouped list of queued ids linked in
// links and ordered by keys, whose Owner is owner: the fairness leaf it
// lists, or nil.
func newGroupedList(links *list.Links, keys *chunked.Array[uint64], owner any) *grouped.List {
	return grouped.New(links, keys, owner)
}
