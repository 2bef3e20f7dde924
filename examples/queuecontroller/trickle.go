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

// trickleNamespace holds the trickle's PodGroups, apart from the
// scenario's.
const trickleNamespace = "load"

// trickle keeps the controller working after the scenario, for -serve, until
// ctx is done: each tick submits a PodGroup to one of the leaf queues and
// moves one of the earlier ones a phase on (Pending, Inqueue, Running,
// Completed, then deleted), and every 40 ticks a Command closes or opens
// prod. The controller's injected write failures go on meanwhile, so the
// pages show retries, backoffs and, with -max-requeue, give-ups as they
// happen.
func trickle(ctx context.Context, store *Store, seed uint64, interval time.Duration) {
	rng := rand.New(rand.NewPCG(seed, seed+1))
	leaves := []string{"dev", "prod", "team-b"}
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	closeProd := true
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
		if len(ours) > 0 {
			advance(store, ours[rng.IntN(len(ours))])
		}
		if tick%40 == 0 {
			action := OpenQueueAction
			if closeProd {
				action = CloseQueueAction
			}
			closeProd = !closeProd
			_ = store.Commands.create(Command{
				Namespace: "admin", Name: fmt.Sprintf("%s-prod-%d", strings.ToLower(string(action)), tick),
				TargetKind: "Queue", TargetName: "prod", Action: action,
			})
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
