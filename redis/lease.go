package redisqueue

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// holding is the lease on one item this handle handed out.
type holding struct {
	token   string
	since   time.Time // handed out, on the handle's clock
	renewed time.Time // when the last grant or extension that succeeded was sent
	lost    bool      // an extension found the lease reclaimed
	// parked: Park was called for it, so that its Done runs the done
	// call that makes a park take effect.
	parked bool
	// finishing: a Done is running the done function, which may have ended
	// the lease on the server before the handle releases it.
	finishing bool
}

// Done marks item as done processing: if it was added meanwhile, by any
// handle, it is queued again; if this handle parked it, the park takes
// effect (see Park). Done for an item this handle does not hold
// does nothing. It retries while Redis is unreachable until the item's
// lease runs out; after that the item is handed out again anyway.
//
// Done names the item, not the lease: if this handle lost an item's lease
// (Redis unreachable for longer than LeaseDuration) and then got the item
// again for another worker, the first worker's late Done ends the second
// worker's lease.
func (q *Queue[T]) Done(item T) {
	err := q.done(context.Background(), item, true)
	switch {
	case err == nil || errors.Is(err, ErrNotHeld):
	case errors.Is(err, ErrLeaseLost):
		q.logger.Warn("workqueue: Done after the lease was lost; it changed nothing", "item", fmt.Sprint(item))
	default:
		q.logger.Error("workqueue: Done failed; the item is handed out again when its lease expires", "item", fmt.Sprint(item), "err", err)
	}
}

// DoneContext is Done without retries. It returns ErrNotHeld for an item
// this handle does not hold, ErrLeaseLost if the lease was granted again
// (nothing changed), or Redis's error, in which case the item is still
// held and DoneContext may be called again. ctx can end the call only
// before the Done is sent, as with AddContext.
func (q *Queue[T]) DoneContext(ctx context.Context, item T) error {
	return q.done(ctx, item, false)
}

func (q *Queue[T]) done(ctx context.Context, item T, retry bool) error {
	key, err := q.encode(item)
	if err != nil {
		return ErrNotHeld
	}
	q.mu.Lock()
	h := q.held[key]
	var lost, parked bool
	if h != nil {
		lost, parked = h.lost, h.parked
		h.finishing = !lost
	}
	q.mu.Unlock()
	if h == nil {
		return ErrNotHeld
	}
	if lost {
		q.release(key, h)
		return ErrLeaseLost
	}
	var outcome int64
	run := func(ctx context.Context) error {
		// Once in a batch, the call is waited for, so that its outcome
		// is known: see addKey.
		if err := ctx.Err(); err != nil {
			return err
		}
		var err error
		if parked {
			outcome, err = q.parkDone(ctx, key, h.token)
		} else {
			var r stepResult
			r, err = q.part(key).steps.do(stepCall{done: doneCall{key, h.token}, isDone: true})
			if err == nil {
				err = r.err
			}
			outcome = r.outcome
		}
		return err
	}
	err = run(ctx)
	for attempt := 0; retry && err != nil && isOutage(err); attempt++ {
		q.mu.Lock()
		expired := q.clock.Since(h.renewed) >= q.lease
		q.mu.Unlock()
		if expired {
			break
		}
		q.sleepBackoff(attempt, nil)
		err = run(ctx)
	}
	if err != nil {
		if retry {
			q.release(key, h)
		} else {
			// Still held: DoneContext may be called again, and until then
			// the extensions judge this lease as any other.
			q.mu.Lock()
			h.finishing = false
			q.mu.Unlock()
		}
		return err
	}
	q.release(key, h)
	if outcome < 0 {
		return ErrLeaseLost
	}
	return nil
}

// doneCall is one Done for the done function: a key and its lease's token.
type doneCall struct{ key, token string }

// runDones runs one done function in partition p with calls and returns
// each one's outcome.
func (q *Queue[T]) runDones(p *partition, calls []doneCall) ([]int64, error) {
	args := make([]any, 0, 1+2*len(calls))
	args = append(args, q.now())
	for _, c := range calls {
		args = append(args, c.key, c.token)
	}
	return q.runCalls(context.Background(), p, opDone, len(calls), args)
}

// release forgets the lease h on key, if it is still the one held.
func (q *Queue[T]) release(key string, h *holding) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.held[key] != h {
		return
	}
	delete(q.held, key)
	q.metrics.done(q.clock.Since(h.since))
	q.checkIdleLocked()
}

// keep extends the leases of the items this handle holds every third of
// the lease, and refreshes the unfinished-work metrics. It stops once the
// handle is shut down and holds nothing.
func (q *Queue[T]) keep() {
	defer close(q.keeperDone)
	// An extension still running at shutdown ends within its deadline.
	defer q.extenders.Wait()
	extend := q.clock.NewTicker(q.lease / 3)
	defer extend.Stop()
	var refresh <-chan time.Time
	if q.metrics.enabled {
		t := q.clock.NewTicker(500 * time.Millisecond)
		defer t.Stop()
		refresh = t.C()
	}
	for {
		select {
		case <-extend.C():
			q.extendLeases()
		case <-refresh:
			q.refreshUnfinished()
		case <-q.idleCh:
			return
		}
	}
}

// heldLease is one entry of Queue.held.
type heldLease struct {
	key string
	h   *holding
}

// extendLeases starts extending every lease held, one goroutine per
// partition, in batches of one call each, marking those found reclaimed
// as lost, and returns what to wait on for them to end. Each partition's
// extension runs on its own, so that a partition whose shard does not
// answer (a blackholed node holds a call for go-redis's ReadTimeout, and
// more with its retries) cannot delay another's past its leases, which
// would then be handed to a second worker while the first still holds
// them. A partition whose last extension still runs is extended again as
// soon as that one ends.
func (q *Queue[T]) extendLeases() *sync.WaitGroup {
	q.mu.Lock()
	defer q.mu.Unlock()
	var started sync.WaitGroup
	for i, leases := range q.heldByPartitionLocked() {
		p := q.parts[i]
		if len(leases) == 0 {
			continue
		}
		if p.extending {
			p.extendAgain = true
			continue
		}
		p.extending = true
		q.extenders.Add(1)
		started.Go(func() {
			defer q.extenders.Done()
			for {
				q.extendPartition(p, leases)
				q.mu.Lock()
				again := p.extendAgain
				p.extendAgain = false
				if again {
					leases = q.heldByPartitionLocked()[p.index]
				}
				more := again && len(leases) > 0
				p.extending = more
				q.mu.Unlock()
				if !more {
					return
				}
			}
		})
	}
	return &started
}

// heldByPartitionLocked returns the leases held and not lost, by
// partition. q.mu must be held.
func (q *Queue[T]) heldByPartitionLocked() [][]heldLease {
	byPart := make([][]heldLease, len(q.parts))
	for key, h := range q.held {
		if !h.lost {
			i := q.part(key).index
			byPart[i] = append(byPart[i], heldLease{key, h})
		}
	}
	return byPart
}

// extendTimeout bounds an extension of leases: until the first of them
// runs out, as one that answers later is no use to it, but at least a
// third of the lease, the time to the next tick, for leases that ran out
// on this handle's clock and may not have on Redis's.
func (q *Queue[T]) extendTimeout(leases []heldLease) time.Duration {
	now := q.clock.Now()
	q.mu.Lock()
	defer q.mu.Unlock()
	left := q.lease
	for _, l := range leases {
		left = min(left, l.h.renewed.Add(q.lease).Sub(now))
	}
	return max(left, q.lease/3)
}

// extendPartition extends leases, all of partition p. If Redis does not
// answer, the rest wait for the next tick.
func (q *Queue[T]) extendPartition(p *partition, leases []heldLease) {
	const batch = 256
	for start := 0; start < len(leases); start += batch {
		part := leases[start:min(start+batch, len(leases))]
		args := []any{q.now(), q.lease.Milliseconds()}
		for _, l := range part {
			args = append(args, l.key, l.h.token)
		}
		// The deadline ends go-redis's waits for a connection and its
		// retries; a read already sent ends with them only on a client with
		// ContextTimeoutEnabled, else at its ReadTimeout.
		ctx, cancel := context.WithTimeout(context.Background(), q.extendTimeout(part))
		sent := q.clock.Now()
		res, err := q.call(ctx, opExtend, p.keys.fcall, args...).Result()
		cancel()
		r := replyReader{script: "extend"}
		var lostKeys map[string]bool
		if err == nil {
			reply := r.array(res, 1, "the reply")
			depth := r.int(reply[0], "the depth")
			lostKeys = make(map[string]bool, len(reply)-1)
			for _, v := range reply[1:] {
				lostKeys[r.str(v, "a lost key")] = true
			}
			if err = r.err; err == nil {
				q.setDepth(p, depth)
			}
		}
		if err != nil {
			q.logger.Warn("workqueue: could not extend leases; retrying at the next tick", "partition", p.index, "err", err)
			return
		}
		// A lease that a Done ended after the snapshot above, or is ending,
		// is gone from Redis too, and the call cannot tell it from a
		// reclaimed one: only holdings still held and not being Done count
		// as lost. A Done that finds its lease reclaimed says so itself.
		reallyLost := 0
		q.mu.Lock()
		for _, l := range part {
			switch {
			case q.held[l.key] != l.h:
			case lostKeys[l.key]:
				if !l.h.finishing {
					l.h.lost = true
					reallyLost++
				}
			default:
				// Extended, also while a Done runs: a Done that retries
				// through an outage gives up when this lease runs out.
				l.h.renewed = sent
			}
		}
		q.mu.Unlock()
		if reallyLost > 0 {
			q.logger.Warn("workqueue: leases lost while processing; their Dones will change nothing", "count", reallyLost)
		}
	}
}

func (q *Queue[T]) refreshUnfinished() {
	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.clock.Now()
	var total, longest time.Duration
	for _, h := range q.held {
		d := now.Sub(h.since)
		total += d
		longest = max(longest, d)
	}
	q.metrics.unfinished.Set(total.Seconds())
	q.metrics.longest.Set(longest.Seconds())
}
