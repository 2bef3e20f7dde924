package list

import "fmt"

// Elem is the place of an element in a Ptrs list: its neighbours, nil for
// none. An element type embeds one and returns it from its Links method.
type Elem[E any] struct{ prev, next *E }

// Linked is the constraint on a Ptrs list's elements: a pointer to an E
// that returns its Elem.
type Linked[E any] interface {
	*E
	Links() *Elem[E]
}

// Ptrs is a doubly linked list of elements that carry their own links
// (intrusive), so that adding and removing allocate nothing. An element is
// in at most one list at a time. The zero value is an empty list; it is not
// safe for concurrent use.
//
// Invariant (VerifyPtrs checks it): walking Next from Front visits Len
// elements and ends at the last, and every element links back to the one
// before it.
type Ptrs[E any, P Linked[E]] struct {
	first, last P
	n           int
}

// Front returns the first element, nil if the list is empty.
func (l *Ptrs[E, P]) Front() P { return l.first }

// Back returns the last element, nil if the list is empty.
func (l *Ptrs[E, P]) Back() P { return l.last }

// Len returns the number of elements.
func (l *Ptrs[E, P]) Len() int { return l.n }

// Next returns the element after e, nil if e is last.
func (l *Ptrs[E, P]) Next(e P) P { return e.Links().next }

// PushBack appends e, which is in no list.
func (l *Ptrs[E, P]) PushBack(e P) {
	links := e.Links()
	links.prev, links.next = l.last, nil
	if l.last != nil {
		P(l.last).Links().next = e
	} else {
		l.first = e
	}
	l.last = e
	l.n++
}

// Remove takes e, which is in l, out of it.
func (l *Ptrs[E, P]) Remove(e P) {
	links := e.Links()
	if links.prev != nil {
		P(links.prev).Links().next = links.next
	} else {
		l.first = links.next
	}
	if links.next != nil {
		P(links.next).Links().prev = links.prev
	} else {
		l.last = links.prev
	}
	links.prev, links.next = nil, nil
	l.n--
}

// PopFront removes and returns the first element, nil if there is none.
func (l *Ptrs[E, P]) PopFront() P {
	e := l.first
	if e != nil {
		l.Remove(e)
	}
	return e
}

// MoveToBack moves e, which is in l, to its end.
func (l *Ptrs[E, P]) MoveToBack(e P) {
	if l.last != e {
		l.Remove(e)
		l.PushBack(e)
	}
}

// Contains reports whether e, which is in some list or none, is in l: it
// walks the list, for tests.
func (l *Ptrs[E, P]) Contains(e P) bool {
	for x := l.first; x != nil; x = l.Next(x) {
		if x == e {
			return true
		}
	}
	return false
}

// VerifyPtrs checks a list's links both ways and its count, and returns its
// elements in order. It is for tests.
func VerifyPtrs[E any, P Linked[E]](l *Ptrs[E, P]) ([]P, error) {
	var elems []P
	var prev P
	for e := l.first; e != nil; e = l.Next(e) {
		if P(e.Links().prev) != prev {
			return nil, fmt.Errorf("element %d links back to the wrong element", len(elems))
		}
		if elems = append(elems, e); len(elems) > l.n {
			return nil, fmt.Errorf("the list holds more than its count of %d", l.n)
		}
		prev = e
	}
	if prev != l.last || len(elems) != l.n {
		return nil, fmt.Errorf("the list holds %d elements ending at %p, its count says %d ending at %p", len(elems), prev, l.n, l.last)
	}
	return elems, nil
}
