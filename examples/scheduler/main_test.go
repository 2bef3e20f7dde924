package main

import (
	"bytes"
	"math/rand/v2"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestScriptedScenario checks a timeline line by line: a pod that fits
// nowhere parks; an event wakes only the parked pods it helps, the highest
// priority first; an evicted pod is scheduled again.
func TestScriptedScenario(t *testing.T) {
	scenario := []event{
		{kind: nodeAdded, name: "node-1", cpu: 4},
		{kind: podAdded, name: "big", cpu: 4},
		{kind: podAdded, name: "small", cpu: 2, priority: 1},
		{kind: podAdded, name: "urgent", cpu: 1, priority: 2},
		{kind: nodeAdded, name: "node-2", cpu: 1},
		{kind: podFinished, pick: 0},
		{kind: nodeRemoved, pick: 1},
		{kind: podAdded, name: "huge", cpu: 8},
	}
	var out bytes.Buffer
	run(&out, scenario)
	assert.Equal(t, `t=0   node-1 joins with 4 cpu
t=1   big arrives: priority 0, 4 cpu
t=1   big (priority 0, 4 cpu) bound to node-1, 4 of 4 cpu used
t=2   small arrives: priority 1, 2 cpu
t=2   small (priority 1, 2 cpu) fits no node: parked until node-added or pod-deleted
t=3   urgent arrives: priority 2, 1 cpu
t=3   urgent (priority 2, 1 cpu) fits no node: parked until node-added or pod-deleted
t=4   node-2 joins with 1 cpu
t=4   node-added: woke 1 parked pod(s) that fit node-2 (1 cpu free)
t=4   urgent (priority 2, 1 cpu) bound to node-2, 1 of 1 cpu used
t=5   big finishes on node-1: 4 cpu free
t=5   pod-deleted: woke 1 parked pod(s) that fit node-1 (4 cpu free)
t=5   small (priority 1, 2 cpu) bound to node-1, 2 of 4 cpu used
t=6   node-2 leaves
t=6   urgent evicted from node-2
t=6   urgent (priority 2, 1 cpu) bound to node-1, 3 of 4 cpu used
t=7   huge arrives: priority 0, 8 cpu
t=7   huge (priority 0, 8 cpu) fits no node: parked until node-added or pod-deleted

placement:
  node-1  3/4 cpu  small urgent
  parked  huge (priority 0, 8 cpu)

7 scheduling attempts: 4 bound, 3 parked; 2 pods woken by events
`, out.String())
}

// TestRandomScenarios plays scenarios from many seeds and checks what must
// hold whatever happens: no node runs more than its CPU, every pod still
// there is bound or parked, every attempt binds or parks, and a seed
// always plays the same.
func TestRandomScenarios(t *testing.T) {
	line := regexp.MustCompile(`(?m)^  (node-\d+) +(\d+)/(\d+) cpu`)
	summary := regexp.MustCompile(`(\d+) scheduling attempts: (\d+) bound, (\d+) parked`)
	for seed := range uint64(200) {
		play := func() string {
			var out bytes.Buffer
			run(&out, randomScenario(rand.New(rand.NewPCG(seed, 3)), 40))
			return out.String()
		}
		out := play()
		require.Equal(t, out, play(), "seed %d plays differently twice", seed)
		for _, m := range line.FindAllStringSubmatch(out, -1) {
			used, _ := strconv.Atoi(m[2])
			capacity, _ := strconv.Atoi(m[3])
			require.LessOrEqual(t, used, capacity, "seed %d: %s over capacity", seed, m[1])
		}
		arrived := strings.Count(out, " arrives:")
		finished := strings.Count(out, " finishes on ")
		var running, parked int
		for _, l := range strings.Split(out, "\n") {
			switch {
			case strings.HasPrefix(l, "  node-"):
				running += len(strings.Fields(l)) - 3 // name, used/cpu, "cpu", then the pods
			case strings.HasPrefix(l, "  parked"):
				parked += strings.Count(l, " cpu)")
			}
		}
		require.Equal(t, arrived-finished, running+parked, "seed %d: pods lost:\n%s", seed, out)
		m := summary.FindStringSubmatch(out)
		require.NotNil(t, m, out)
		attempts, _ := strconv.Atoi(m[1])
		binds, _ := strconv.Atoi(m[2])
		parks, _ := strconv.Atoi(m[3])
		require.Equal(t, attempts, binds+parks, "seed %d", seed)
	}
}
