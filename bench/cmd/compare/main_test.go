package main

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/go-workqueue/workqueue/bench"
)

// TestDrawChart draws the chart of the full run from made-up results, to
// CHART if set (its extension picks the format), so that a change to the
// cases or the chart can be looked at without a run.
func TestDrawChart(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	cases := bench.Cases(false)
	r := results{}
	for _, c := range cases {
		for _, impl := range bench.Impls {
			if c.Applies(impl) {
				r.add(c.Name, impl.Name, sample{nsPerOp: 100 * float64(1+rng.IntN(1000))})
			}
		}
	}
	path := os.Getenv("CHART")
	if path == "" {
		path = filepath.Join(t.TempDir(), "bench.svg")
	}
	if err := drawChart(path, cases, r); err != nil {
		t.Fatal(err)
	}
	if info, err := os.Stat(path); err != nil || info.Size() == 0 {
		t.Fatalf("no chart: %v", err)
	}
}
