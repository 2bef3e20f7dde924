package workqueue

// idList is a doubly linked list of item ids, oldest first, whose links live
// in an idLinks array indexed by id, beside the item table, so that a
// record does not pay for links it does not use. One idLinks array serves
// several lists as long as no id is in two of them at once: the leaves of a
// priority level's fairness tree share one. The zero value is not an empty
// list: make one with newIDList.
//
// Invariant (verifyIDList checks it): walking next from head visits n ids
// and ends at tail, and every id's prev is the id before it (-1 for head).
type idList struct {
	head, tail int32 // -1 when empty
	n          int
}

// idLink is an id's place in a list: its neighbours, -1 for none.
type idLink struct{ prev, next int32 }

// idLinks holds the links of the ids in its lists, by id.
type idLinks struct{ links chunked[idLink] }

func newIDList() idList { return idList{head: -1, tail: -1} }

// at returns the links of id, growing the array to hold it.
func (l *idLinks) at(id int32) *idLink {
	for l.links.len() <= int(id) {
		l.links.push(idLink{prev: -1, next: -1})
	}
	return l.links.at(int(id))
}

// next returns the id after id in its list, -1 if id is last.
func (l *idLinks) next(id int32) int32 { return l.links.at(int(id)).next }

// shrink lets go of the links, once no id is in a list, if they had grown
// beyond a chunk, so that a burst does not pin memory. The links of ids in
// no list need no clearing: pushBack writes them whole.
func (l *idLinks) shrink() {
	if l.links.len() > chunkSize {
		l.links.reset()
	}
}

// pushBack appends id, which is in no list of links.
func (l *idList) pushBack(links *idLinks, id int32) {
	*links.at(id) = idLink{prev: l.tail, next: -1}
	if l.tail >= 0 {
		links.at(l.tail).next = id
	} else {
		l.head = id
	}
	l.tail = id
	l.n++
}

// remove takes id, which is in l, out of it.
func (l *idList) remove(links *idLinks, id int32) {
	link := links.at(id)
	if link.prev >= 0 {
		links.at(link.prev).next = link.next
	} else {
		l.head = link.next
	}
	if link.next >= 0 {
		links.at(link.next).prev = link.prev
	} else {
		l.tail = link.prev
	}
	*link = idLink{prev: -1, next: -1}
	l.n--
}

// popFront removes and returns the first id; l must not be empty.
func (l *idList) popFront(links *idLinks) int32 {
	id := l.head
	l.remove(links, id)
	return id
}
