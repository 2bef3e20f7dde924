// Command compare measures go-workqueue side by side with client-go's
// workqueue, controller-runtime's priority queue and a buffered channel, in
// one process: every case runs for every implementation back to back, in a
// rotating order, several times, so that drift of the machine hits all of
// them alike. It prints a table of medians and writes a chart to
// docs/bench.svg. Run it from the repository root:
//
//	go run ./bench/cmd/compare          # about 5 minutes
//	go run ./bench/cmd/compare -quick   # under a minute
package main

import (
	"bufio"
	"flag"
	"fmt"
	"image/color"
	"io"
	"log"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/go-workqueue/workqueue/bench"
)

func main() {
	testing.Init()
	quick := flag.Bool("quick", false, "smaller cases, shorter and fewer runs: under a minute")
	reps := flag.Int("reps", 0, "runs of every measurement (default 5, or 3 with -quick)")
	benchtime := flag.Duration("benchtime", 0, "target time of one measurement (default 300ms, or 30ms with -quick)")
	out := flag.String("out", filepath.Join("docs", "bench.svg"), "chart to write; empty for none")
	flag.Parse()

	memoryKeys := 1_000_000
	if *quick {
		memoryKeys = 100_000
	}
	if *reps == 0 {
		*reps = map[bool]int{false: 5, true: 3}[*quick]
	}
	if *benchtime == 0 {
		*benchtime = map[bool]time.Duration{false: 300 * time.Millisecond, true: 30 * time.Millisecond}[*quick]
	}
	if err := flag.Set("test.benchtime", benchtime.String()); err != nil {
		log.Fatal(err)
	}

	cases := bench.Cases(*quick)
	results := measure(cases, *reps, memoryKeys)
	printTable(os.Stdout, cases, results, memoryKeys)
	if *out != "" {
		if err := drawChart(*out, cases, results); err != nil {
			log.Fatal(err)
		}
		fmt.Fprintln(os.Stderr, "wrote", *out)
	}
}

// sample is one measurement of one implementation.
type sample struct {
	nsPerOp, bytesPerOp, allocsPerOp float64
	extra                            map[string]float64
}

// results holds the samples by case name and implementation name; the
// memory measurement is the case "memory".
type results map[string]map[string][]sample

func (r results) add(caseName, impl string, s sample) {
	if r[caseName] == nil {
		r[caseName] = map[string][]sample{}
	}
	r[caseName][impl] = append(r[caseName][impl], s)
}

// rotated returns the implementations starting at the rep-th, so each takes
// each place in the order.
func rotated(rep int) []bench.Impl {
	n := len(bench.Impls)
	order := make([]bench.Impl, 0, n)
	for i := range n {
		order = append(order, bench.Impls[(rep+i)%n])
	}
	return order
}

func measure(cases []bench.Case, reps, memoryKeys int) results {
	r := results{}
	total, done := 0, 0
	for _, c := range cases {
		for _, impl := range bench.Impls {
			if c.Applies(impl) {
				total++
			}
		}
	}
	total = (total + len(bench.Impls)) * reps
	start := time.Now()
	progress := func(name, impl string, s sample) {
		done++
		fmt.Fprintf(os.Stderr, "[%3d/%d %5.0fs] %-28s %-18s %12.1f ns/op\n", done, total, time.Since(start).Seconds(), name, impl, s.nsPerOp)
	}
	for rep := range reps {
		for _, c := range cases {
			for _, impl := range rotated(rep) {
				if !c.Applies(impl) {
					continue
				}
				result := testing.Benchmark(func(b *testing.B) { c.Run(b, impl) })
				bench.ReleaseFixtures()
				s := sample{
					nsPerOp:     float64(result.T.Nanoseconds()) / float64(result.N),
					bytesPerOp:  float64(result.AllocedBytesPerOp()),
					allocsPerOp: float64(result.AllocsPerOp()),
					extra:       result.Extra,
				}
				if perItem, ok := result.Extra["ns/item"]; ok {
					s.nsPerOp = perItem
				}
				r.add(c.Name, impl.Name, s)
				progress(c.Name, impl.Name, s)
			}
		}
		for _, impl := range rotated(rep) {
			s := sample{bytesPerOp: bench.BytesPerItem(impl, memoryKeys)}
			r.add("memory", impl.Name, s)
			done++
			fmt.Fprintf(os.Stderr, "[%3d/%d %5.0fs] %-28s %-18s %12.1f bytes/item\n", done, total, time.Since(start).Seconds(), "memory", impl.Name, s.bytesPerOp)
		}
	}
	return r
}

func median(samples []sample, value func(sample) float64) float64 {
	values := make([]float64, len(samples))
	for i, s := range samples {
		values[i] = value(s)
	}
	slices.Sort(values)
	if n := len(values); n%2 == 1 {
		return values[n/2]
	} else {
		return (values[n/2-1] + values[n/2]) / 2
	}
}

func nsPerOp(s sample) float64     { return s.nsPerOp }
func bytesPerOp(s sample) float64  { return s.bytesPerOp }
func allocsPerOp(s sample) float64 { return s.allocsPerOp }

// speedup returns how many times faster impl is than the reference in a
// case, or 0 if either did not run it.
func speedup(r results, caseName, impl string) float64 {
	ref, own := r[caseName][bench.Reference], r[caseName][impl]
	if len(ref) == 0 || len(own) == 0 {
		return 0
	}
	return median(ref, nsPerOp) / median(own, nsPerOp)
}

func printTable(w io.Writer, cases []bench.Case, r results, memoryKeys int) {
	fmt.Fprintf(w, "Machine: %s, %d CPUs, %s/%s, %s. Medians of %d runs.\n\n",
		cpuModel(), runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, runtime.Version(), len(r["memory"][bench.Reference]))
	fmt.Fprintln(w, "| case | implementation | ns/op | B/op | allocs/op | speedup vs client-go | other |")
	fmt.Fprintln(w, "|---|---|--:|--:|--:|--:|---|")
	for _, c := range cases {
		for _, impl := range bench.Impls {
			samples := r[c.Name][impl.Name]
			if len(samples) == 0 {
				continue
			}
			var other []string
			for _, unit := range []string{"items/op", "max16-µs"} {
				if _, ok := samples[0].extra[unit]; ok {
					other = append(other, fmt.Sprintf("%.3g %s", median(samples, func(s sample) float64 { return s.extra[unit] }), unit))
				}
			}
			fmt.Fprintf(w, "| %s | %s | %.1f | %.0f | %.0f | %.2fx | %s |\n", c.Name, impl.Name,
				median(samples, nsPerOp), median(samples, bytesPerOp), median(samples, allocsPerOp),
				speedup(r, c.Name, impl.Name), strings.Join(other, ", "))
		}
	}
	fmt.Fprintf(w, "\nHeap per queued key with %d keys queued (keys not counted):\n\n", memoryKeys)
	fmt.Fprintln(w, "| implementation | bytes/item |")
	fmt.Fprintln(w, "|---|--:|")
	for _, impl := range bench.Impls {
		fmt.Fprintf(w, "| %s | %.1f |\n", impl.Name, median(r["memory"][impl.Name], bytesPerOp))
	}
}

func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return "unknown CPU"
	}
	defer f.Close()
	scanner := bufio.NewScanner(f)
	for scanner.Scan() {
		if name, ok := strings.CutPrefix(scanner.Text(), "model name"); ok {
			return strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(name), ":"))
		}
	}
	return "unknown CPU"
}

var colors = []color.Color{
	color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff},
	color.RGBA{R: 0x7f, G: 0x7f, B: 0x7f, A: 0xff},
	color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff},
	color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff},
}

// drawChart draws, for every case, one bar per implementation: its speedup
// over client-go on a log scale, so that twice as fast and twice as slow are
// bars of the same length, up and down from client-go's line.
func drawChart(path string, cases []bench.Case, r results) error {
	p := plot.New()
	p.Title.Text = "Speedup over client-go's workqueue (higher is better)"
	p.Y.Label.Text = "client-go time / implementation time"
	var ticks []plot.Tick
	for exp := -6; exp <= 6; exp++ {
		ticks = append(ticks, plot.Tick{Value: float64(exp), Label: strconv.FormatFloat(math.Pow(2, float64(exp)), 'g', 3, 64) + "x"})
	}
	p.Y.Tick.Marker = plot.ConstantTicks(ticks)
	p.Legend.Top = true

	names := make([]string, len(cases))
	for i, c := range cases {
		names[i] = c.Name
	}
	width := vg.Points(7)
	low, high := -1.0, 1.0
	for i, impl := range bench.Impls {
		values := make(plotter.Values, len(cases))
		for j, c := range cases {
			if s := speedup(r, c.Name, impl.Name); s > 0 {
				values[j] = math.Log2(s)
				low, high = min(low, values[j]), max(high, values[j])
			}
		}
		bars, err := plotter.NewBarChart(values, width)
		if err != nil {
			return err
		}
		bars.Color = colors[i%len(colors)]
		bars.LineStyle.Width = 0
		bars.Offset = vg.Length(float64(i)-float64(len(bench.Impls)-1)/2) * width
		p.Add(bars)
		p.Legend.Add(impl.Name, bars)
	}
	p.Add(plotter.NewGrid())
	p.Y.Min, p.Y.Max = math.Floor(low), math.Ceil(high)+1 // room for the legend
	p.NominalX(names...)
	p.X.Tick.Label.Rotation = 0.6
	p.X.Tick.Label.XAlign = -1
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return p.Save(12*vg.Inch, 6*vg.Inch, path)
}
