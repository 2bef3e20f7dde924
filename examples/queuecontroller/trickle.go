package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"
)

// trickleInterval is how often the trickle changes something: slow enough
// to follow on the inspector's page, fast enough that a refresh always
// shows a change.
const trickleInterval = 250 * time.Millisecond

// trickleCycle is the length of the trickle's script, which it plays over
// and over.
const trickleCycle = time.Minute

// writeLatency is how long each of the controller's writes takes while the
// trickle runs: a loaded API server's, long enough that the inspector's
// page shows requests in flight.
const writeLatency = 500 * time.Millisecond

// trickleNamespace holds the trickle's PodGroups, apart from the
// scenario's.
const trickleNamespace = "load"

// trickle keeps the controller working after the scenario, for -serve,
// until ctx is done. Each of the controller's writes takes writeLatency.
// Every tick (every trickleInterval) submits a PodGroup to one of the leaf
// queues and moves four of the earlier ones, at random, a phase on
// (Pending, Inqueue, Running, Completed, then deleted). Each cycle, at
// these seconds of a cycle of a minute: at 10 a Command closes team-a,
// which closes dev and prod; at 20 a Command opens dev, which parks until
// team-a opens; at 30 the API server throttles every write for 5 s, asking
// to retry after 3 s, so that requests wait for their delay; at 36 a
// Command closes team-b; at 40 a Command opens team-a, which wakes dev's
// open; at 50 a Command opens team-b. A close or an open usually finds a
// sync of the same Queue in flight and waits for its slot. The
// controller's injected write failures go on meanwhile, so the pages show
// retries, backoffs and, with -max-requeue, give-ups as they happen. A
// cycle of another length plays the same script faster or slower: the
// tick, the write latency and the throttle scale with it, so that the
// controller keeps up with the script as it does on a minute.
func trickle(ctx context.Context, store *Store, client *faultyClient, seed uint64, cycle time.Duration) {
	scale := func(d time.Duration) time.Duration {
		return max(time.Millisecond, time.Duration(float64(d)*float64(cycle)/float64(trickleCycle)))
	}
	client.slow(scale(writeLatency))
	defer client.slow(0)
	interval := scale(trickleInterval)
	perCycle := int(cycle / interval)
	at := func(second int) int { return perCycle * second / 60 }
	rng := rand.New(rand.NewPCG(seed, seed+1))
	leaves := []string{"dev", "prod", "team-b"}
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	command := func(tick int, target string, action Action) {
		_ = store.Commands.create(Command{
			Namespace: "admin", Name: fmt.Sprintf("%s-%s-%d", strings.ToLower(string(action)), target, tick),
			TargetKind: "Queue", TargetName: target, Action: action,
		})
	}
	for tick := 1; ; tick++ {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		// Errors are those of a store racing the controller (an update on
		// an older version): the next tick tries again, as a user would.
		_ = store.PodGroups.create(PodGroup{
			Namespace: trickleNamespace, Name: fmt.Sprintf("job-%d", tick),
			Queue: leaves[rng.IntN(len(leaves))], Phase: PodGroupPending,
		})
		var ours []PodGroup
		for _, pg := range store.PodGroups.list() {
			if pg.Namespace == trickleNamespace {
				ours = append(ours, pg)
			}
		}
		// Four moves a tick, on average as many as a PodGroup takes from
		// its creation to its deletion: the number of PodGroups stays
		// about the same.
		for range min(4, len(ours)) {
			advance(store, ours[rng.IntN(len(ours))])
		}
		switch tick % perCycle {
		case at(10):
			command(tick, "team-a", CloseQueueAction)
		case at(20):
			command(tick, "dev", OpenQueueAction)
		case at(30):
			client.throttle(cycle*5/60, cycle*3/60)
		case at(36):
			command(tick, "team-b", CloseQueueAction)
		case at(40):
			command(tick, "team-a", OpenQueueAction)
		case at(50):
			command(tick, "team-b", OpenQueueAction)
		}
	}
}

// advance moves pg one phase on, or deletes it once it has completed.
func advance(store *Store, pg PodGroup) {
	next := map[PodGroupPhase]PodGroupPhase{
		PodGroupPending: PodGroupInqueue,
		PodGroupInqueue: PodGroupRunning,
		PodGroupRunning: PodGroupCompleted,
	}
	phase, ok := next[pg.Phase]
	if !ok {
		_ = store.PodGroups.delete(pg.Key())
		return
	}
	pg.Phase = phase
	_, _ = store.PodGroups.update(pg)
}
