package redisqueue

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/go-workqueue/workqueue"
)

// Get blocks until it can hand out an item, leased to this handle, and
// returns it; the caller must call Done with it. On a partitioned queue it
// takes from the partitions in turn, so that none starves. It returns
// shutdown true once ShutDown was called on this handle, even if items
// are still queued: they stay for the other handles. It retries while
// Redis is unreachable, taking from the partitions that answer; a closed
// client or ErrPartitionsChanged ends it as a shutdown, logged.
func (q *Queue[T]) Get() (item T, shutdown bool) {
	item, _, shutdown = q.GetWithPriority()
	return item, shutdown
}

// GetWithPriority is Get that also returns the priority the item was
// queued at (see AddWithOpts). Items queued at a higher priority are
// handed out first; on a partitioned queue, only among the items of one
// partition.
func (q *Queue[T]) GetWithPriority() (item T, priority int, shutdown bool) {
	h, err := q.get(context.Background(), true)
	if err != nil {
		if !errors.Is(err, workqueue.ErrShutDown) {
			q.logger.Error("workqueue: Get gave up", "err", err)
		}
		return item, 0, true
	}
	return h.item, h.priority, false
}

// GetContext is Get that also returns when ctx ends, with ctx.Err(), and
// that returns Redis's errors instead of retrying; it returns
// workqueue.ErrShutDown after ShutDown. When ctx ends while Redis is
// looking for a key for this call, GetContext waits up to 400ms for the
// answer, which stands: the key leased for it is returned with a nil
// error, or ctx.Err() if Redis found none. Without an answer by then, it
// asks Redis to cancel the search: it returns the key leased for it just
// before, or ctx.Err() with nothing taken from the queue. Only if Redis
// does not answer within 200ms more does GetContext return ctx.Err()
// anyway; a key Redis leases for this call afterwards is then put back
// at the front of the queue. With a ctx that has ended already, it looks
// for a ready key once and returns ctx.Err() if there is none.
func (q *Queue[T]) GetContext(ctx context.Context) (item T, err error) {
	h, err := q.get(ctx, false)
	return h.item, err
}

// GetWithPriorityContext is GetContext that also returns the item's
// priority, as GetWithPriority does.
func (q *Queue[T]) GetWithPriorityContext(ctx context.Context) (item T, priority int, err error) {
	h, err := q.get(ctx, false)
	return h.item, h.priority, err
}

// handout is an item a Get hands out, with the priority it was queued at.
type handout[T any] struct {
	item     T
	priority int
	info     workqueue.ItemInfo
}

// get is Get, or GetContext without retry. It looks at the partitions in
// roundOrder, and after a wakeup at the partition that woke it alone. A
// key leased by a get call whose reply was lost goes to the handle's
// next Get in that partition (see partition.orphans), as the Get that
// sent it may have left with another partition's item; if the handle
// shuts down first, the key is handed out again when its lease expires.
func (q *Queue[T]) get(ctx context.Context, retry bool) (got handout[T], err error) {
	q.mu.Lock()
	if q.shuttingDown {
		q.mu.Unlock()
		return got, workqueue.ErrShutDown
	}
	q.waiting++
	q.mu.Unlock()
	// owed[i] is set while this Get holds a wakeup of partition i that it
	// has not used (woken: a token Redis handed this handle for some
	// waiting Get), or knows when the partition's next delayed key is due,
	// as the only Get that may (knowsDue: the add that delayed it woke one
	// Get). A Get that leaves passes each on, or that partition's key waits
	// for a heartbeat. The last Get to leave also takes the wakeups the
	// listeners left for Gets.
	owed := make([]bool, len(q.parts))
	// nonces[i] is the nonce of this Get's get calls in partition i, set
	// when one is sent and cleared when one answers: a call that failed
	// may have run, its reply lost, and is sent again with the same nonce,
	// so that it returns the lease it took, if any, instead of leaving it
	// to expire. One still set when the Get leaves (it found an item
	// elsewhere, or gave up) is left to a later Get there (see
	// partition.orphans).
	nonces := make([]string, len(q.parts))
	defer func() {
		for i, nonce := range nonces {
			if nonce != "" {
				q.parts[i].orphan(nonce)
			}
		}
		q.mu.Lock()
		q.waiting--
		if q.waiting == 0 {
			select {
			case <-q.wake:
			default:
			}
			for i, woke := range q.woke {
				owed[i] = owed[i] || woke
				q.woke[i] = false
				q.beat[i] = false
			}
		}
		q.checkIdleLocked()
		q.mu.Unlock()
		for i, owes := range owed {
			if owes {
				q.passOn(q.parts[i])
			}
		}
	}()

	// due[i] is when this Get is to look at partition i again without a
	// wakeup from it: when its next delayed key is due, or its backoff
	// after an outage ends; zero if never.
	due := make([]time.Time, len(q.parts))
	from := -1 // the partition the last wakeup came from
	for attempt := 0; ; {
		if q.ShuttingDown() {
			return got, workqueue.ErrShutDown
		}
		h, wait, err := q.takeRound(ctx, nonces, owed, due, from)
		if h != nil {
			return *h, nil
		}
		if err != nil {
			// A closed client cannot recover, nor a handle with the wrong
			// number of partitions; any other error may pass (a call
			// error would show in every attempt's log).
			if !retry || errors.Is(err, redis.ErrClosed) || errors.Is(err, ErrPartitionsChanged) || ctx.Err() != nil {
				return got, err
			}
			if attempt%20 == 0 {
				level := slog.LevelWarn
				if !isOutage(err) {
					level = slog.LevelError
				}
				q.logger.Log(context.Background(), level, "workqueue: Get failed, retrying", "attempt", attempt+1, "err", err)
			}
			if !q.sleepBackoff(attempt, q.stopCh) {
				return got, workqueue.ErrShutDown
			}
			attempt++
			from = -1
			continue
		}
		attempt = 0
		from = -1
		if wait == 0 {
			continue
		}
		var token bool
		if from, token, err = q.sleep(ctx, wait); err != nil {
			return got, err
		}
		if token {
			owed[from] = true
		}
	}
}

// takeRound looks once at partition only for this Get, if it is one (a
// wakeup came from it: nothing changed in the others), else at every
// partition in roundOrder, and returns the first item handed out. Without
// one, it returns how long to wait (as take's: the time until the first
// partition's due, see get), and, if no partition answered, the first
// error. Once ctx has ended it returns ctx.Err(), after the round (each
// take answers within takeContext's waits), or at the first partition
// whose take failed or was cancelled. It clears the nonce of each
// partition that answered, and updates nonces, owed and due (see get)
// for each.
//
// On a partitioned queue, a partition whose call failed for an outage
// (its shard failing over, say) is left out of the rounds of every Get of
// the handle until its backoff has passed, and then looked at by one Get
// at a time until it answers (a call to a dead node may take a second
// to fail); the others' waits are cut to end with the backoff. So the
// Gets go on taking from the other partitions meanwhile instead of
// queueing behind the failing one.
func (q *Queue[T]) takeRound(ctx context.Context, nonces []string, owed []bool, due []time.Time, only int) (*handout[T], time.Duration, error) {
	order := []int{only}
	if only < 0 {
		order = q.roundOrder()
	}
	var firstErr error
	answered := false
	var by settling
	for _, i := range order {
		p := q.parts[i]
		until, look, probe := p.retryIn(q.clock.Now())
		if !look {
			due[i] = q.clock.Now().Add(until)
			continue
		}
		if nonces[i] == "" {
			nonces[i] = p.nonce()
		}
		got, wait, err := q.takeContext(ctx, p, &nonces[i], &by)
		if probe {
			p.probing.Store(false)
		}
		if got != nil {
			p.answered()
			nonces[i] = ""
			return got, 0, nil
		}
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, ErrPartitionsChanged) {
				return nil, 0, err
			}
			firstErr = cmp.Or(firstErr, err)
			if len(q.parts) > 1 && isOutage(err) {
				due[i] = q.clock.Now().Add(p.backoffFor())
			}
			continue
		}
		p.answered()
		answered = true
		nonces[i] = ""
		owed[i] = wait > 0
		due[i] = time.Time{}
		if wait >= 0 {
			due[i] = q.clock.Now().Add(wait)
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, 0, err
	}
	if !answered && firstErr != nil {
		return nil, 0, firstErr
	}
	return nil, untilDue(due, q.clock.Now()), nil
}

// callWait bounds how long a Get whose context ended waits for the get
// calls of its round already sent to answer, and cancelWait how long it
// then waits for Redis to settle whether one that has not answered runs
// (see takeContext); past both, Redis is taken to be out of reach and the
// Get returns.
const (
	callWait   = 400 * time.Millisecond
	cancelWait = 200 * time.Millisecond
)

// settling is when the round of a Get whose context ended stops waiting
// for Redis: its get calls' answers until the first time, the cancels'
// until the second. The zero value is set by the first take that sees the
// context end, so that the whole round shares one budget.
type settling struct{ answers, cancels time.Time }

// timerAt returns a timer that fires at t.
func timerAt(t time.Time) *time.Timer { return time.NewTimer(time.Until(t)) }

// takeContext is take with the Get's nonce, returning soon after ctx
// ends even while Redis does not answer. When ctx ends first, it waits
// until by.answers (callWait after the round saw ctx end) for the
// call's answer, which stands: a key it leased is handed out, and if it
// found none the Get found the partition empty at that instant. Without
// an answer by then (its call may still wait behind the handle's
// previous get call), it sends the cancel function for the nonce: whichever of
// the two calls runs first in Redis wins, so the Get either returns the
// key its call leased or returns ctx.Err() with nothing leased for it.
// Only if Redis does not answer the cancel by by.cancels is a key leased
// afterwards given back to the front of the queue, or, if the call
// failed, its nonce left to a later Get (see partition.orphans); *noncep
// is cleared when the Get gives up its nonce.
func (q *Queue[T]) takeContext(ctx context.Context, p *partition, noncep *string, by *settling) (*handout[T], time.Duration, error) {
	nonce := *noncep
	if ctx.Done() == nil {
		return q.take(p, nonce)
	}
	type taken struct {
		item *handout[T]
		wait time.Duration
		err  error
	}
	result := make(chan taken, 1)
	go func() {
		item, wait, err := q.take(p, nonce)
		result <- taken{item, wait, err}
	}()
	var r taken
	select {
	case r = <-result:
		return r.item, r.wait, r.err
	case <-ctx.Done():
	}
	if by.answers.IsZero() {
		by.answers = time.Now().Add(callWait)
		by.cancels = by.answers.Add(cancelWait)
	}
	answer := timerAt(by.answers)
	select {
	case r = <-result:
		answer.Stop()
		return r.item, r.wait, r.err
	case <-answer.C:
	}
	// cancelled is closed once the cancel function answered, with leased
	// set if the get call had leased a key to the nonce.
	cancelled := make(chan struct{})
	var leased bool
	var cancelErr error
	go func() {
		defer close(cancelled)
		var res any
		res, cancelErr = q.call(context.Background(), opCancel, p.keys.fcall, nonce).Result()
		_, leased = res.([]any)
	}()
	// marked reports, once the cancel answered, whether it left its mark:
	// then no lease of the nonce can exist, now or later.
	marked := func() bool { return cancelErr == nil && !leased }
	timeout := timerAt(by.cancels)
	defer timeout.Stop()
	haveResult := false
	select {
	case <-cancelled:
		if marked() {
			*noncep = ""
			go func() {
				// A get call that answered consumed the mark or ran before
				// it; one whose reply was lost may still run and consume
				// it, so its mark stays, one small field.
				if r := <-result; r.err == nil {
					q.dropCancelMark(p, nonce)
				}
			}()
			return nil, 0, ctx.Err()
		}
		if cancelErr == nil {
			// The get call ran first and leased a key to this Get: its
			// reply is on its way, or lost.
			r, haveResult = <-result, true
			if r.err == nil {
				return r.item, r.wait, r.err
			}
		}
	case r = <-result:
		haveResult = true
		if r.err == nil {
			// The get call answered first: its grant stands, and the
			// cancel, once it runs, changes nothing but its mark.
			go func() {
				<-cancelled
				if marked() {
					q.dropCancelMark(p, nonce)
				}
			}()
			return r.item, r.wait, r.err
		}
	case <-timeout.C:
	}
	*noncep = ""
	go func() {
		if !haveResult {
			r = <-result
		}
		if r.item != nil {
			q.giveBack(r.item.item)
		}
		<-cancelled
		switch {
		case r.err == nil:
			if marked() {
				q.dropCancelMark(p, nonce)
			}
		case !marked():
			// The call's reply was lost, and it may have leased a key:
			// a later Get sends the nonce again to get that grant. Not
			// after a mark, which no grant can follow.
			p.orphan(nonce)
		}
	}()
	return nil, 0, ctx.Err()
}

// dropCancelMark deletes the mark the cancel function left for nonce once the get
// call sent with it has answered: the call consumes a mark it finds,
// but one left after it ran would stay. Nothing else uses the nonce, so
// what is there is the mark; a failure leaves one small field behind.
func (q *Queue[T]) dropCancelMark(p *partition, nonce string) {
	_ = q.client.HDel(context.Background(), p.keys.grants, nonce).Err()
}

// giveBack returns the lease on item, which no caller will see, to the
// front of the queue.
func (q *Queue[T]) giveBack(item T) {
	key, err := q.encode(item)
	if err != nil {
		return
	}
	q.mu.Lock()
	h := q.held[key]
	q.mu.Unlock()
	if h == nil {
		return
	}
	if err := q.call(context.Background(), opRelease, q.part(key).keys.fcall, q.now(), key, h.token).Err(); err != nil {
		q.logger.Warn("workqueue: could not give back a key a cancelled Get took; it is handed out again when its lease expires", "key", key, "err", err)
	}
	q.release(key, h)
}

// passOn puts back a wakeup of partition p that this handle took but did
// not use, for the other handles.
func (q *Queue[T]) passOn(p *partition) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := q.call(ctx, opSignal, p.keys.fcall).Err(); err != nil {
		q.logger.Warn("workqueue: could not pass a wakeup on; other handles see the key within a heartbeat", "err", err)
	}
}

// grant is what the get call gave one Get: a key under a lease, or, if
// none was ready, how long until the next delayed key is due.
type grant struct {
	key, token string
	queuedFor  time.Duration
	priority   int           // the priority it was queued at
	links      string        // its links as the get function returns them (see parseLinks)
	ok         bool          // a key was leased
	wait       time.Duration // without a key: -1 none waits, else the time until one is due
}

// runTakes runs one get call in partition p for the Gets whose nonces
// are given, and returns each one's grant.
func (q *Queue[T]) runTakes(p *partition, nonces []string) ([]grant, error) {
	grants, _, err := q.runGets(p, nil, nonces)
	return grants, err
}

// runGets runs dones, then the Gets whose nonces are given, in one call in
// partition p: the step function, or the get function without dones. It
// returns each Get's grant and each Done's outcome (as runDones's).
func (q *Queue[T]) runGets(p *partition, dones []doneCall, nonces []string) ([]grant, []int64, error) {
	if err := q.checkPartitions(context.Background()); err != nil {
		return nil, nil, err
	}
	q.turn(p)
	o, args := opGet, make([]any, 0, 4+2*len(dones)+len(nonces))
	args = append(args, q.now(), q.lease.Milliseconds(), q.maxWait.Milliseconds())
	if len(dones) > 0 {
		o = opStep
		args = append(args, len(dones))
		for _, d := range dones {
			args = append(args, d.key, d.token)
		}
	}
	for _, nonce := range nonces {
		args = append(args, nonce)
	}
	res, err := q.call(context.Background(), o, p.keys.fcall, args...).Result()
	if err != nil {
		if len(q.parts) > 1 && isOutage(err) {
			q.partitionFailed(p, err)
		}
		return nil, nil, err
	}
	r := replyReader{script: opNames[o]}
	reply := r.array(res, 3+len(nonces)+len(dones), "the reply")
	depth := r.int(reply[0], "depth")
	reclaimed := r.int(reply[1], "reclaimed")
	wait := time.Duration(r.int(reply[2], "wait")) * time.Millisecond
	if wait < 0 {
		wait = -1
	}
	fields := 4
	if q.tracer != nil {
		fields = 5
	}
	grants := make([]grant, len(nonces))
	for i, v := range reply[3 : 3+len(nonces)] {
		if n, ok := v.(int64); ok && n == 0 {
			grants[i] = grant{wait: wait}
			continue
		}
		g := r.array(v, fields, "a grant")
		grants[i] = grant{
			key:       r.str(g[0], "a grant's key"),
			token:     r.str(g[1], "a grant's token"),
			queuedFor: time.Duration(max(r.int(g[2], "a grant's queueing time"), 0)) * time.Millisecond,
			priority:  int(r.int(g[3], "a grant's priority")),
			ok:        true,
		}
		if q.tracer != nil {
			grants[i].links = r.str(g[4], "a grant's links")
		}
	}
	outcomes := make([]int64, len(dones))
	for i, v := range reply[3+len(nonces) : 3+len(nonces)+len(dones)] {
		outcomes[i] = r.int(v, "a Done's outcome")
	}
	if r.err != nil {
		return nil, nil, r.err
	}
	q.setDepth(p, depth)
	q.logReclaimed(reclaimed)
	return grants, outcomes, nil
}

// take runs the get call of partition p once for this Get, with the
// next batch of this handle's Gets there. It returns the item handed out,
// or else how long to wait for the partition's next delayed item to be due
// (-1: none, wait for a signal; 0: look again at once).
func (q *Queue[T]) take(p *partition, nonce string) (*handout[T], time.Duration, error) {
	ctx := context.Background()
	r, err := p.steps.do(stepCall{nonce: nonce})
	if err == nil {
		err = r.err
	}
	if err != nil {
		return nil, 0, err
	}
	g := r.grant
	if !g.ok {
		return nil, g.wait, nil
	}
	key, token := g.key, g.token

	item, err := q.codec.Decode(key)
	if err != nil {
		// Another handle stored a key this codec cannot read: give it back
		// rather than hold it for ever or hand out garbage.
		q.logger.Error("workqueue: dropping a key the codec cannot decode", "key", key, "err", err)
		_ = q.call(ctx, opDone, p.keys.fcall, q.now(), key, token).Err()
		return nil, 0, nil
	}
	now := q.clock.Now()
	q.mu.Lock()
	if h := q.held[key]; h != nil && !h.finishing {
		// This handle lost the key's lease (Redis out of reach for longer
		// than it) and got the key back while a worker is still on it:
		// handing it out would give it to two workers. The worker keeps it
		// under the new lease, marked to be queued again at its Done.
		h.token, h.lost, h.renewed = token, false, now
		q.mu.Unlock()
		args := append(append([]any{q.now()}, p.limit...), key, 0, g.priority, ruleAdd)
		if q.sorted() {
			args = append(args, q.sortedArgs(key)...)
		}
		if q.tracer != nil {
			args = append(args, "") // no link of its own
		}
		if err := q.call(ctx, opAddOpts, p.keys.fcall, args...).Err(); err != nil {
			q.logger.Warn("workqueue: could not mark a key handed back to its holder; it is processed once, not again", "key", key, "err", err)
		}
		return nil, 0, nil
	}
	// A holding whose Done is running is replaced: that Done either has
	// ended its lease already, which is how the key came back, or will be
	// refused, as the lease is this one now; its release leaves this
	// holding alone.
	q.held[key] = &holding{token: token, since: now, renewed: now}
	q.mu.Unlock()
	q.metrics.handedOut(g.queuedFor)
	info := workqueue.ItemInfo{Priority: g.priority, Added: now.Add(-g.queuedFor)}
	info.Links, info.DroppedLinks = parseLinks(g.links)
	return &handout[T]{item, g.priority, info}, 0, nil
}

func (q *Queue[T]) logReclaimed(n int64) {
	if n > 0 {
		q.logger.Warn("workqueue: requeued items whose lease expired", "count", n)
	}
}

// sleep waits for a listener's wakeup, for wait if it is positive, for
// ctx, or for ShutDown. It returns the partition the wakeup came from,
// and whether it took over that partition's wakeup token (else it was the
// partition's heartbeat), or -1 after a wait that ended. A wakeup that
// comes with ctx or ShutDown is left for another Get.
func (q *Queue[T]) sleep(ctx context.Context, wait time.Duration) (from int, token bool, err error) {
	// Only a sleeping Get sets the listener blocking on Redis: a Get that
	// finds a key ready needs no wakeup, and a BLPOP sent beside its call
	// would take the token that the get call leaves while keys remain,
	// costing a round trip or two more per key while busy.
	q.mu.Lock()
	q.sleeping++
	if q.sleeping == 1 {
		for _, p := range q.parts {
			select {
			case p.hasWaiter <- struct{}{}:
			default:
			}
		}
	}
	q.mu.Unlock()
	defer func() {
		q.mu.Lock()
		q.sleeping--
		q.mu.Unlock()
	}()
	var timeout <-chan time.Time
	if wait > 0 {
		t := q.clock.NewTimer(wait)
		defer t.Stop()
		timeout = t.C()
	}
	select {
	case <-ctx.Done():
		return -1, false, ctx.Err()
	case <-q.stopCh:
		return -1, false, workqueue.ErrShutDown
	default:
	}
	select {
	case <-q.wake:
		from, token = q.takeWakeup()
		return from, token, nil
	case <-timeout:
		return -1, false, nil
	case <-ctx.Done():
		return -1, false, ctx.Err()
	case <-q.stopCh:
		return -1, false, workqueue.ErrShutDown
	}
}

// takeWakeup takes over one partition's wakeup left for a Get, a token
// before a heartbeat, and returns that partition and whether it was a
// token, or -1 if none is left. If more are left, it wakes another Get
// for them.
func (q *Queue[T]) takeWakeup() (from int, token bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if from = slices.Index(q.woke, true); from >= 0 {
		q.woke[from], token = false, true
	} else if from = slices.Index(q.beat, true); from >= 0 {
		q.beat[from] = false
	}
	if slices.Contains(q.woke, true) || slices.Contains(q.beat, true) {
		q.wakeOne()
	}
	return from, token
}
