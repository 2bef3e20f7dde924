package workqueue

import (
	"context"
	"time"
)

// The four queues' rows of infoGetter and metricsSource in the capabilities table
// (capabilities.go).
var (
	_ infoGetter[int] = (*Typed[int])(nil)
	_ infoGetter[int] = (*TypedDelayingQueue[int])(nil)
	_ infoGetter[int] = (*TypedRateLimitingQueue[int])(nil)
	_ infoGetter[int] = (*TypedPriorityQueue[int])(nil)

	_ metricsSource = (*Typed[int])(nil)
	_ metricsSource = (*TypedDelayingQueue[int])(nil)
	_ metricsSource = (*TypedRateLimitingQueue[int])(nil)
	_ metricsSource = (*TypedPriorityQueue[int])(nil)
)

// MaxTraceLinks is how many adds' links a queue keeps for one hand-out of
// an item; it counts the links of further adds in [ItemInfo.DroppedLinks].
const MaxTraceLinks = 8

// TraceLink is the W3C trace context of the span that added an item: the
// link a reconcile's span has to the add. Its zero value links nothing.
type TraceLink struct {
	TraceID [16]byte
	SpanID  [8]byte
	Flags   byte   // the trace flags; 1 is sampled
	State   string // the tracestate header, "" for none
}

// ItemInfo is what a queue tells of an item it hands out, beside the item.
type ItemInfo struct {
	Priority     int         // the item's priority; 0 on a queue without priorities
	Added        time.Time   // when (queue's clock) the first add since the last hand-out made it ready (a delayed add: its delay's end); zero if unknown, as with no metrics
	Links        []TraceLink // of the adds with a span merged into it, a retry's or park's carried over; in no set order, read-only
	DroppedLinks int         // the links beyond MaxTraceLinks, left out
}

// infoGetter is a queue from outside this package that hands out items
// with their ItemInfo.
type infoGetter[T comparable] interface {
	GetWithInfoContext(ctx context.Context) (item T, info ItemInfo, err error)
}

// linker is the part of a provider that links adds to their hand-out, as
// reconcile.TracingProvider's TraceLink does.
type linker interface {
	TraceLink(ctx context.Context) (TraceLink, bool)
}

// AddContext is Add that also links the span ctx carries to the item's next
// hand-out if the provider has a TraceLink method (reconcile.TracingProvider).
// Over an outside queue it is that queue's AddContext, or Add if it has none
// or a Debounce of the layer over it holds the add back.
func (b *Base[T]) AddContext(ctx context.Context, item T) {
	if b.top == nil {
		panic("workqueue: AddContext on a zero queue; make one with its constructor")
	}
	b.top.addContext(ctx, item)
}

// contextAdder is the queue a Base serves: AddContext is its add with a
// link.
type contextAdder[T comparable] interface {
	addContext(ctx context.Context, item T)
}

func (q *Typed[T]) addContext(ctx context.Context, item T) {
	tr := q.core.trace
	if tr == nil {
		q.Add(item)
		return
	}
	link, ok := tr.provider.TraceLink(ctx)
	hash := q.core.items.Hash(item)
	q.core.mu.Lock()
	defer q.core.mu.Unlock()
	if q.addLocked(item, hash) && ok {
		q.core.noteLink(item, hash, link)
	}
}

func (q *TypedDelayingQueue[T]) addContext(ctx context.Context, item T) {
	t := q.typed
	if t == nil {
		q.addContextOutside(ctx, item)
		return
	}
	if t.core.trace == nil {
		q.Add(item)
		return
	}
	link, ok := t.core.trace.provider.TraceLink(ctx)
	if !ok {
		q.Add(item)
		return
	}
	switch {
	case q.debounce.enabled():
		q.addDebouncedLinked(item, &link)
	case q.addCancelsDelay:
		q.addCancellingDelayLinked(item, false, &link)
	default:
		t.addContext(ctx, item)
	}
}

// addContextOutside is addContext over a config Queue from outside this
// package: the link goes with the adds made at once, not with a debounced
// one, which waits in the layer's own delays.
func (q *TypedDelayingQueue[T]) addContextOutside(ctx context.Context, item T) {
	a, ok := q.queue.(contextAdd[T])
	switch {
	case !ok || q.debounce.enabled():
		q.Add(item)
	case q.addCancelsDelay:
		q.own.addCancellingDelay(item, func(item T) { a.AddContext(ctx, item) })
	default:
		a.AddContext(ctx, item)
	}
}

// contextAdd is a queue with AddContext, such as one from outside this
// package that embeds one of its queues.
type contextAdd[T comparable] interface {
	AddContext(ctx context.Context, item T)
}

// addContext is Add over a delaying queue without AddContext.
func (q *TypedRateLimitingQueue[T]) addContext(ctx context.Context, item T) {
	if a, ok := q.delaying.(contextAdd[T]); ok {
		a.AddContext(ctx, item)
		return
	}
	q.delaying.Add(item)
}

func (q *TypedPriorityQueue[T]) addContext(ctx context.Context, item T) {
	tr := q.core.trace
	if tr == nil {
		q.Add(item)
		return
	}
	link, ok := tr.provider.TraceLink(ctx)
	how := addEarliest
	if q.debounce.enabled() {
		how = addDebounced
	}
	hash := q.core.items.Hash(item)
	q.core.mu.Lock()
	defer q.core.mu.Unlock()
	if q.core.shuttingDown.Load() {
		return
	}
	if q.addLocked(item, hash, 0, 0, how) {
		q.core.delays.poke()
	}
	if ok {
		q.core.noteLink(item, hash, link)
	}
}

// GetWithInfoContext is GetContext that also returns the item's [ItemInfo];
// over a queue from outside, that queue's if it has the method, else zero.
func (b *Base[T]) GetWithInfoContext(ctx context.Context) (item T, info ItemInfo, err error) {
	if b.c == nil {
		return getWithInfo(ctx, b.outside("GetWithInfoContext"))
	}
	if err := ctx.Err(); err != nil {
		return item, info, err
	}
	item, _, err = b.get(ctx, &info)
	return item, info, err
}

// getWithInfo calls q's GetWithInfoContext, or its GetContext, if it has
// one.
func getWithInfo[T comparable](ctx context.Context, q TypedInterface[T]) (item T, info ItemInfo, err error) {
	if g, ok := q.(infoGetter[T]); ok {
		return g.GetWithInfoContext(ctx)
	}
	item, err = getContext(ctx, q)
	return item, info, err
}

// linkSet is the links of the adds merged into one hand-out of an item.
type linkSet struct {
	links   []TraceLink
	dropped int
}

// add adds link, or counts it as dropped beyond MaxTraceLinks.
func (s *linkSet) add(link TraceLink) {
	if len(s.links) == MaxTraceLinks {
		s.dropped++
		return
	}
	s.links = append(s.links, link)
}

// merge adds the links of o, which it does not change.
func (s *linkSet) merge(o linkSet) {
	for _, l := range o.links {
		s.add(l)
	}
	s.dropped += o.dropped
}

// prepend puts the links of o, which it does not change, before those
// of s, keeping the first MaxTraceLinks.
func (s *linkSet) prepend(o linkSet) {
	merged := linkSet{links: make([]TraceLink, 0, min(len(o.links)+len(s.links), MaxTraceLinks))}
	merged.merge(o)
	merged.merge(*s)
	*s = merged
}

// itemTrace is what the core keeps of an item's links: those of the adds
// since its last hand-out (next), and those of the hand-out being processed
// (served), which a retry or a park carries to the next.
type itemTrace struct {
	next, served linkSet
}

// traceState is the core's links, nil when its provider does not trace.
// The core's lock guards it.
type traceState[T comparable] struct {
	provider linker
	// items holds the links of the held items that have any, by id.
	items map[int32]itemTrace
	// delayed holds the links of a delaying queue's delayed adds, by item:
	// a retry of an item being processed carries the links of its
	// hand-out there, and the add at the delay's end takes them.
	delayed map[T]linkSet
}

// put sets the links of the item with id, dropping an entry with none.
func (s *traceState[T]) put(id int32, t itemTrace) {
	if t.next.empty() && t.served.empty() {
		delete(s.items, id)
		return
	}
	s.items[id] = t
}

// empty reports whether s holds no link and counts none dropped.
func (s linkSet) empty() bool { return len(s.links) == 0 && s.dropped == 0 }

func newTraceState[T comparable](provider MetricsProvider) *traceState[T] {
	tp, ok := provider.(linker)
	if !ok {
		return nil
	}
	return &traceState[T]{provider: tp, items: map[int32]itemTrace{}, delayed: map[T]linkSet{}}
}

// noteLink links an add of item, just made, to the item's next hand-out:
// the item's own if it is ready or waits for its own delay, or else the
// one its delaying queue's delayed add makes. The caller holds mu.
func (c *core[T]) noteLink(item T, hash uint32, link TraceLink) {
	entry, id := c.items.Lookup(item, hash)
	if entry != nil && (entry.Val.pending == pendingReady || entry.Val.pending == pendingDelay) {
		t := c.trace.items[id]
		t.next.add(link)
		c.trace.put(id, t)
		return
	}
	if c.delays != nil && c.delays.heap.Contains(delayedAdd(item)) {
		s := c.trace.delayed[item]
		s.add(link)
		c.trace.delayed[item] = s
	}
}

// carryServed carries the links of the hand-out of item being processed,
// once, to its next hand-out, before the links of the adds made since: a
// retry's or a park's. With toDelayed it carries them to the delaying
// queue's delayed add of item instead. The caller holds mu.
func (c *core[T]) carryServed(item T, toDelayed bool) {
	if c.trace == nil {
		return
	}
	entry, id := c.items.Lookup(item, c.items.Hash(item))
	if entry == nil || !entry.Val.processing {
		return
	}
	t := c.trace.items[id]
	if t.served.empty() {
		return
	}
	if toDelayed {
		s := c.trace.delayed[item]
		s.prepend(t.served)
		c.trace.delayed[item] = s
	} else {
		t.next.prepend(t.served)
	}
	t.served = linkSet{} // carried once
	c.trace.put(id, t)
}

// takeDelayed moves the links of item's delayed add, which has just added
// it, to its next hand-out. The caller holds mu.
func (c *core[T]) takeDelayed(item T) {
	s, ok := c.trace.delayed[item]
	if !ok {
		return
	}
	delete(c.trace.delayed, item)
	entry, id := c.items.Lookup(item, c.items.Hash(item))
	if entry == nil || entry.Val.pending != pendingReady {
		return
	}
	t := c.trace.items[id]
	t.next.merge(s)
	c.trace.put(id, t)
}

// handOutTrace makes the links of the item with id, just handed out, those
// of its hand-out. The caller holds mu.
func (c *core[T]) handOutTrace(id int32) {
	t, ok := c.trace.items[id]
	if !ok {
		return
	}
	c.trace.put(id, itemTrace{served: t.next})
}

// doneTrace forgets the links of the hand-out of the item with id, whose
// processing ended: a retry or a park has carried them already. The
// caller holds mu.
func (c *core[T]) doneTrace(id int32) {
	if t, ok := c.trace.items[id]; ok && !t.served.empty() {
		c.trace.put(id, itemTrace{next: t.next})
	}
}

// info returns the info of the item with id, just handed out. The caller
// holds mu.
func (c *core[T]) info(id int32) ItemInfo {
	var info ItemInfo
	if c.metrics != nil {
		info.Added = c.metrics.handedAdded
	}
	if c.trace != nil {
		served := c.trace.items[id].served
		info.Links, info.DroppedLinks = served.links, served.dropped
	}
	return info
}

// dropNext forgets the links of the next hand-out of the item with id,
// being processed, whose add was taken back; it does nothing if s is nil.
func (s *traceState[T]) dropNext(id int32) {
	if t, ok := s.itemsOf(id); ok {
		t.next = linkSet{}
		s.put(id, t)
	}
}

// itemsOf returns the links of the item with id, if the core traces and
// the item has any.
func (s *traceState[T]) itemsOf(id int32) (itemTrace, bool) {
	if s == nil {
		return itemTrace{}, false
	}
	t, ok := s.items[id]
	return t, ok
}

// keepLinks gives the item with id, just filed again, the links of the
// next hand-out its earlier record had. The caller holds mu.
func (c *core[T]) keepLinks(id int32, kept itemTrace) {
	if c.trace != nil {
		c.trace.put(id, itemTrace{next: kept.next})
	}
}
