// Command scheduler is a small pod scheduler on a [workqueue.TypedPriorityQueue],
// after kube-scheduler's scheduling queue: pods have priorities and CPU
// requests, nodes have CPU, and the scheduling loop binds each pod to the
// node it fits best. A pod that fits nowhere is not retried on a timer: it
// parks until an event that could make it fit, "node-added" or
// "pod-deleted", and each event wakes only the parked pods that it helps
// (kube-scheduler's queueing hints, here WakeFunc): those that fit the node
// that joined or freed CPU.
//
// It plays a scenario drawn from -seed, in which pods arrive, pods finish,
// nodes join and nodes leave (their pods are evicted and scheduled again),
// and prints a timeline, then the final placement and what the scheduling
// loop did. The same seed prints the same output.
package main

import (
	"flag"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"os"
)

func main() {
	seed := flag.Uint64("seed", 1, "seed of the scenario")
	steps := flag.Int("steps", 30, "events in the scenario")
	flag.Parse()
	if *steps < 0 {
		log.Fatalf("scheduler: -steps must not be negative, got %d", *steps)
	}
	run(os.Stdout, randomScenario(rand.New(rand.NewPCG(*seed, 3)), *steps))
}

// run plays scenario on a new cluster and prints its timeline, placement
// and summary to out.
func run(out io.Writer, scenario []event) {
	s := newScheduler(out)
	defer s.queue.ShutDown()
	for tick, e := range scenario {
		s.tick = tick
		e.apply(s)
		s.scheduleAll()
	}
	s.printPlacement()
}

// randomScenario returns steps events: two nodes first, then pods arriving,
// pods finishing, nodes joining and nodes leaving.
func randomScenario(rng *rand.Rand, steps int) []event {
	var scenario []event
	pods := 0
	names, live := 0, 0
	addNode := func() {
		names++
		live++
		scenario = append(scenario, event{kind: nodeAdded, name: fmt.Sprintf("node-%d", names), cpu: 4 * (1 + rng.IntN(2))})
	}
	addNode()
	addNode()
	for len(scenario) < steps {
		switch r := rng.IntN(100); {
		case r < 55:
			pods++
			scenario = append(scenario, event{kind: podAdded, name: fmt.Sprintf("pod-%d", pods), cpu: 1 + rng.IntN(5), priority: rng.IntN(3)})
		case r < 80 && pods > 0:
			scenario = append(scenario, event{kind: podFinished, pick: rng.Uint64()})
		case r < 90:
			addNode()
		case live > 1:
			live--
			scenario = append(scenario, event{kind: nodeRemoved, pick: rng.Uint64()})
		}
	}
	return scenario[:steps]
}
