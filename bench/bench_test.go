package bench

import (
	"flag"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// BenchmarkQueues runs every case for every implementation it applies to:
//
//	go test -run '^$' -bench . -benchmem ./bench
func BenchmarkQueues(b *testing.B) {
	for _, c := range Cases(false) {
		b.Run(c.Name, func(b *testing.B) {
			for _, impl := range Impls {
				if c.Applies(impl) {
					b.Run(impl.Name, func(b *testing.B) { c.Run(b, impl) })
					ReleaseFixtures()
				}
			}
		})
	}
}

// BenchmarkMemory reports the heap each implementation holds per queued
// key with a million keys queued.
func BenchmarkMemory(b *testing.B) {
	for _, impl := range Impls {
		b.Run(impl.Name, func(b *testing.B) {
			var perItem float64
			for b.Loop() {
				perItem = BytesPerItem(impl, 1_000_000)
			}
			b.ReportMetric(perItem, "B/item")
		})
	}
}

// TestCasesRun runs each quick case briefly for every implementation, so
// that the benchmarks and the compare command cannot rot unnoticed.
func TestCasesRun(t *testing.T) {
	old := flag.Lookup("test.benchtime").Value.String()
	t.Cleanup(func() { flag.Set("test.benchtime", old) })
	flag.Set("test.benchtime", "50x")
	for _, c := range Cases(true) {
		for _, impl := range Impls {
			if !c.Applies(impl) {
				continue
			}
			t.Run(c.Name+"/"+impl.Name, func(t *testing.T) {
				result := testing.Benchmark(func(b *testing.B) { c.Run(b, impl) })
				ReleaseFixtures()
				if result.N == 0 {
					t.Fatal("the case did not run")
				}
			})
		}
	}
	for _, impl := range Impls {
		if perItem := BytesPerItem(impl, 10_000); perItem <= 0 {
			t.Errorf("%s: %v bytes per item", impl.Name, perItem)
		}
	}
}
