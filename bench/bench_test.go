package bench

import (
	"flag"
	"sync"
	"testing"
	"time"

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

// recorder wraps a queue and records, for every key, the order of its last
// add and its last get.
type recorder struct {
	Queue
	mu               sync.Mutex
	seq              int
	lastAdd, lastGot map[string]int
	adds, gets       int
}

func (r *recorder) Add(key string) {
	r.mu.Lock()
	r.seq++
	r.lastAdd[key] = r.seq
	r.adds++
	r.mu.Unlock()
	r.Queue.Add(key)
}

func (r *recorder) Get() (string, bool) {
	key, shutdown := r.Queue.Get()
	if !shutdown {
		r.mu.Lock()
		r.seq++
		r.lastGot[key] = r.seq
		r.gets++
		r.mu.Unlock()
	}
	return key, shutdown
}

// TestControllerDrains checks that the drained shutdown of every
// implementation leaves no add unprocessed: every key is got after its last
// add began, and the channel hands out every add.
func TestControllerDrains(t *testing.T) {
	old := flag.Lookup("test.benchtime").Value.String()
	t.Cleanup(func() { flag.Set("test.benchtime", old) })
	flag.Set("test.benchtime", "3000x")
	for _, c := range []Controller{
		{Producers: 4, Workers: 8, Keys: 64, Hot: true, Cost: time.Microsecond},
		{Producers: 4, Workers: 8, Keys: 10_000},
	} {
		for _, impl := range Impls {
			t.Run(c.Name()+"/"+impl.Name, func(t *testing.T) {
				var r *recorder
				recorded := impl
				recorded.New = func(cfg Config) Queue {
					r = &recorder{Queue: impl.New(cfg), lastAdd: map[string]int{}, lastGot: map[string]int{}}
					return r
				}
				testing.Benchmark(func(b *testing.B) { c.Run(b, recorded) })
				if r.adds != 3000 {
					t.Fatalf("%d adds in the last round, want 3000", r.adds)
				}
				for key, added := range r.lastAdd {
					if r.lastGot[key] < added {
						t.Fatalf("%s was added and never got after", key)
					}
				}
				if impl.Name == "channel" && r.gets != r.adds {
					t.Errorf("the channel handed out %d of %d adds", r.gets, r.adds)
				}
				t.Logf("%d gets of %d adds of %d keys", r.gets, r.adds, len(r.lastAdd))
			})
		}
	}
}
