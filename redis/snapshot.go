package redisqueue

import (
	"context"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/go-workqueue/workqueue"
)

// maxSnapshotItems bounds the items of each kind one snapshot lists, so
// that one call stays short however large n is.
const maxSnapshotItems = 1000

// Snapshot returns a view of the whole queue, across every handle, taken
// at one instant: the counts, the first n queued items, the n items
// processed longest by any handle, the n delayed items due first (looked
// for among the 16n waits due first, which parked items' deadlines share,
// so fewer when more parks end before them), the n items parked longest
// (see Park; Waiting and Delayed leave them out), the adds
// made since the queue was created, and the failure counts of the items
// listed; n is capped at 1000. ShuttingDown is this handle's. It
// satisfies the inspect package's Snapshotter. If the read fails or Redis
// does not answer within 5s, it logs the error and returns a view with
// only Taken and ShuttingDown set.
//
// On a partitioned queue each partition is read at its own instant (Taken
// is the latest) and the views are merged: the counts summed, Queued the
// partitions' first items in turn, InFlight, Delayed and ParkedItems the
// n longest processed, the n due first and the n parked longest over all
// partitions.
func (q *Queue[T]) Snapshot(n int) workqueue.Snapshot[T] {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	snap, err := q.SnapshotContext(ctx, n)
	if err != nil {
		q.logger.Warn("workqueue: snapshot failed", "err", err)
		return workqueue.Snapshot[T]{Taken: q.clock.Now(), ShuttingDown: q.ShuttingDown()}
	}
	return snap
}

// SnapshotContext is Snapshot with a context, returning Redis's error.
func (q *Queue[T]) SnapshotContext(ctx context.Context, n int) (workqueue.Snapshot[T], error) {
	n = min(max(n, 0), maxSnapshotItems)
	if err := q.checkPartitions(ctx); err != nil {
		return workqueue.Snapshot[T]{ShuttingDown: q.ShuttingDown()}, err
	}
	snaps := make([]workqueue.Snapshot[T], len(q.parts))
	for i, p := range q.parts {
		snap, err := q.snapshotPartition(ctx, p, n)
		if err != nil {
			return workqueue.Snapshot[T]{ShuttingDown: q.ShuttingDown()}, err
		}
		snaps[i] = snap
	}
	snap := mergeSnapshots(snaps, n)
	snap.ShuttingDown = q.ShuttingDown()
	return snap, nil
}

// mergeSnapshots merges the snapshots of a queue's partitions into one
// of the whole queue, as Snapshot describes; one is returned as it is.
func mergeSnapshots[T comparable](snaps []workqueue.Snapshot[T], n int) workqueue.Snapshot[T] {
	if len(snaps) == 1 {
		return snaps[0]
	}
	var all workqueue.Snapshot[T]
	failures := map[T]int{}
	for _, s := range snaps {
		if s.Taken.After(all.Taken) {
			all.Taken = s.Taken
		}
		all.Depth += s.Depth
		all.Processing += s.Processing
		all.Waiting += s.Waiting
		all.Adds += s.Adds
		all.Parked += s.Parked
		all.WaitingForSlot += s.WaitingForSlot
		all.ParkedItems = append(all.ParkedItems, s.ParkedItems...)
		all.InFlight = append(all.InFlight, s.InFlight...)
		all.Delayed = append(all.Delayed, s.Delayed...)
		maps.Copy(failures, s.Failures)
	}
	for i := 0; len(all.Queued) < n; i++ {
		more := false
		for _, s := range snaps {
			if i < len(s.Queued) {
				all.Queued = append(all.Queued, s.Queued[i])
				more = true
			}
		}
		if !more {
			break
		}
	}
	all.Queued = all.Queued[:min(len(all.Queued), n)]
	slices.SortStableFunc(all.InFlight, func(a, b workqueue.InFlightItem[T]) int { return a.Since.Compare(b.Since) })
	all.InFlight = all.InFlight[:min(len(all.InFlight), n)]
	slices.SortStableFunc(all.Delayed, func(a, b workqueue.DelayedItem[T]) int { return a.ReadyAt.Compare(b.ReadyAt) })
	all.Delayed = all.Delayed[:min(len(all.Delayed), n)]
	slices.SortStableFunc(all.ParkedItems, func(a, b workqueue.ParkedItem[T]) int { return a.Since.Compare(b.Since) })
	all.ParkedItems = all.ParkedItems[:min(len(all.ParkedItems), n)]
	// Failure counts only of the items still listed.
	keep := func(item T) {
		if count, ok := failures[item]; ok {
			if all.Failures == nil {
				all.Failures = make(map[T]int)
			}
			all.Failures[item] = count
		}
	}
	for _, item := range all.Queued {
		keep(item)
	}
	for _, f := range all.InFlight {
		keep(f.Item)
	}
	for _, d := range all.Delayed {
		keep(d.Item)
	}
	for _, p := range all.ParkedItems {
		keep(p.Item)
	}
	return all
}

// snapshotPartition returns the view of partition p at one instant (one
// function call), without ShuttingDown.
func (q *Queue[T]) snapshotPartition(ctx context.Context, p *partition, n int) (workqueue.Snapshot[T], error) {
	var snap workqueue.Snapshot[T]
	res, err := q.call(ctx, opSnapshot, p.keys.fcall, q.now(), n, q.maxWait.Milliseconds()).Result()
	if err != nil {
		return snap, err
	}
	r := replyReader{script: "snapshot"}
	reply := r.array(res, 14, "the reply")
	taken := r.int(reply[0], "now")
	depth := r.int(reply[1], "depth")
	queued := r.array(reply[2], 0, "the queued keys")
	processing := r.int(reply[3], "the leased count")
	leased := r.array(reply[4], 0, "the leased keys")
	marked := r.array(reply[5], len(leased)/2, "the marks")
	waiting := r.int(reply[6], "the delayed count")
	delayed := r.array(reply[7], 0, "the delayed keys")
	adds := r.int(reply[8], "adds")
	failures := r.array(reply[9], 0, "the failure counts")
	parkedCount := r.int(reply[10], "the parked count")
	parked := r.array(reply[11], 0, "the parked keys")
	events := r.array(reply[12], len(parked)/2, "the parks' events")
	blocked := r.int(reply[13], "the blocked count")
	// Every element, before any is used, so that a bad reply returns an
	// error and no half-filled snapshot.
	for _, key := range queued {
		r.str(key, "a queued key")
	}
	for _, v := range events {
		r.str(v, "a park's events")
	}
	for _, pairs := range [][]any{leased, delayed, parked} {
		for _, v := range pairs {
			r.str(v, "a key or score")
		}
	}
	for _, v := range marked {
		r.int(v, "a mark")
	}
	for _, v := range failures {
		if v != nil {
			r.str(v, "a failure count")
		}
	}
	if r.err != nil {
		return snap, r.err
	}
	snap.Taken = time.UnixMilli(taken)
	snap.Depth = int(depth)
	snap.Processing = int(processing)
	snap.Waiting = int(waiting)
	snap.Adds = uint64(adds)
	snap.Parked = int(parkedCount)
	snap.WaitingForSlot = int(blocked)
	listed := 0
	// failed records the failure count of the next listed key, in the
	// call's order: queued, in flight, delayed.
	failed := func(item T) {
		if listed < len(failures) {
			if s, ok := failures[listed].(string); ok {
				if count, err := strconv.Atoi(s); err == nil && count > 0 {
					if snap.Failures == nil {
						snap.Failures = make(map[T]int)
					}
					snap.Failures[item] = count
				}
			}
		}
		listed++
	}
	for _, key := range queued {
		item, err := q.codec.Decode(key.(string))
		if err == nil {
			snap.Queued = append(snap.Queued, item)
			failed(item)
		} else {
			listed++
		}
	}
	// scored decodes a ZRANGE WITHSCORES reply, checked above, and calls f
	// with each item, its score as a time, and its index.
	scored := func(pairs []any, f func(item T, at time.Time, i int)) {
		for i := 0; i+1 < len(pairs); i += 2 {
			item, err := q.codec.Decode(pairs[i].(string))
			if err != nil {
				listed++
				continue
			}
			ms, _ := strconv.ParseFloat(pairs[i+1].(string), 64)
			f(item, time.UnixMilli(int64(ms)), i/2)
			failed(item)
		}
	}
	scored(leased, func(item T, since time.Time, i int) {
		snap.InFlight = append(snap.InFlight, workqueue.InFlightItem[T]{Item: item, Since: since, Requeue: marked[i].(int64) == 1})
	})
	scored(delayed, func(item T, readyAt time.Time, _ int) {
		snap.Delayed = append(snap.Delayed, workqueue.DelayedItem[T]{Item: item, ReadyAt: readyAt})
	})
	scored(parked, func(item T, since time.Time, i int) {
		snap.ParkedItems = append(snap.ParkedItems, workqueue.ParkedItem[T]{Item: item, Events: decodeEvents(events[i].(string)), Since: since})
	})
	return snap, nil
}
