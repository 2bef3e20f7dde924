package redisqueue

import (
	"context"
	"maps"
	"strconv"
	"sync"

	"github.com/go-workqueue/workqueue"
)

// groupLimits is a handle's Options.GroupLimits: the limit each add gives
// its key's group (see GROUPS in lua/workqueue.lua).
type groupLimits[T comparable] struct {
	groupOf      func(T) string
	defaultLimit int
	mu           sync.Mutex
	limits       map[string]int // Limits, then SetGroupLimit's; guarded by mu
}

func newGroupLimits[T comparable](config *workqueue.GroupLimits[T]) *groupLimits[T] {
	if config == nil {
		return nil
	}
	limits := maps.Clone(config.Limits)
	if limits == nil {
		limits = make(map[string]int)
	}
	return &groupLimits[T]{groupOf: config.Group, defaultLimit: config.Default, limits: limits}
}

// group returns item's group.
func (g *groupLimits[T]) group(item T) string { return g.groupOf(item) }

// of returns the "LIMIT GROUP" for GROUPS of an item, decoded if it could
// be, or "" for no group: without GroupLimits, for the group "", and for a
// key the codec cannot decode.
func (g *groupLimits[T]) of(item T, decoded bool) string {
	if g == nil || !decoded {
		return ""
	}
	group := g.groupOf(item)
	if group == "" {
		return ""
	}
	g.mu.Lock()
	limit, ok := g.limits[group]
	g.mu.Unlock()
	if !ok {
		limit = g.defaultLimit
	}
	return strconv.Itoa(max(limit, 0)) + " " + group
}

// SetGroupLimit sets the limit of group for every handle of the queue,
// over their GroupLimits, until it is set again; 0 or less means no
// limit. A raised limit puts back, before SetGroupLimit returns, as many
// of the group's waiting keys as it has room for, so that Gets hand them
// out at once; a lowered one
// hands out none of the group's keys until fewer than the new limit are
// leased. It does nothing on a queue without
// GroupLimits, or for the group "". It retries while Redis is unreachable,
// and logs any other error. It is safe for concurrent use.
func (q *Queue[T]) SetGroupLimit(group string, limit int) {
	if err := q.retry("SetGroupLimit", nil, func(ctx context.Context) error {
		return q.SetGroupLimitContext(ctx, group, limit)
	}); err != nil {
		q.logger.Error("workqueue: SetGroupLimit failed", "group", group, "err", err)
	}
}

// SetGroupLimitContext is SetGroupLimit without retries.
func (q *Queue[T]) SetGroupLimitContext(ctx context.Context, group string, limit int) error {
	if q.groups == nil || group == "" {
		return nil
	}
	limit = max(limit, 0)
	q.groups.mu.Lock()
	q.groups.limits[group] = limit
	q.groups.mu.Unlock()
	p := q.parts[partitionOf(group, len(q.parts))]
	// A call puts back a bounded batch of waiting keys, so that it stays
	// short; the calls after the first only put back more.
	room := ""
	for {
		reply, err := q.runCalls(ctx, p, opSetLimit, 2, []any{group, limit, room, q.now()})
		if err != nil || reply[0] == 0 {
			return err
		}
		room = strconv.FormatInt(reply[1], 10)
	}
}
