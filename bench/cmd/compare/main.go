// Command compare measures go-workqueue side by side with client-go's
// workqueue, controller-runtime's priority queue and a buffered channel, in
// one process: every case runs for every implementation back to back, in a
// rotating order, several times, so that drift of the machine hits all of
// them alike. It prints a table of medians and writes a chart to
// docs/bench.svg. Run it from the repository root:
//
//	go run ./bench/cmd/compare          # about 7 minutes
//	go run ./bench/cmd/compare -quick   # about a minute
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
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/go-workqueue/workqueue/bench"
)

func main() {
	testing.Init()
	quick := flag.Bool("quick", false, "smaller cases, shorter and fewer runs: about a minute")
	reps := flag.Int("reps", 0, "runs of every measurement (default 5, or 3 with -quick)")
	benchtime := flag.Duration("benchtime", 0, "target time of one measurement (default 300ms, or 30ms with -quick); the controller cases get a third of it")
	out := flag.String("out", "", "chart to write; none for no chart (default docs/bench.svg, or bench-quick.svg in the temporary directory with -quick, so that a quick run leaves the checkout clean)")
	run := flag.String("run", "", "regular expression: run only the cases whose names match it, and the memory measurement only if \"memory\" does")
	flag.Parse()

	memoryKeys := 1_000_000
	if *quick {
		memoryKeys = 100_000
	}
	switch {
	case *out == "none":
		*out = ""
	case *out == "" && *quick:
		*out = filepath.Join(os.TempDir(), "bench-quick.svg")
	case *out == "":
		*out = filepath.Join("docs", "bench.svg")
	}
	if *reps == 0 {
		*reps = map[bool]int{false: 5, true: 3}[*quick]
	}
	if *benchtime == 0 {
		*benchtime = map[bool]time.Duration{false: 300 * time.Millisecond, true: 30 * time.Millisecond}[*quick]
	}

	cases := bench.Cases(*quick)
	if *run != "" {
		re, err := regexp.Compile(*run)
		if err != nil {
			log.Fatal(err)
		}
		cases = slices.DeleteFunc(cases, func(c bench.Case) bool { return !re.MatchString(c.Name) })
		if !re.MatchString("memory") {
			memoryKeys = 0
		}
	}
	results := measure(cases, *reps, memoryKeys, *benchtime)
	printTable(os.Stdout, cases, results, *reps, memoryKeys)
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

// measure runs every case reps times, and the memory measurement with
// memoryKeys keys unless it is 0.
func measure(cases []bench.Case, reps, memoryKeys int, benchtime time.Duration) results {
	r := results{}
	total, done := 0, 0
	for _, c := range cases {
		for _, impl := range bench.Impls {
			if c.Applies(impl) {
				total++
			}
		}
	}
	if memoryKeys > 0 {
		total += len(bench.Impls)
	}
	total *= reps
	start := time.Now()
	progress := func(name, impl string, s sample) {
		done++
		fmt.Fprintf(os.Stderr, "[%3d/%d %5.0fs] %-34s %-18s %12.1f ns/op\n", done, total, time.Since(start).Seconds(), name, impl, s.nsPerOp)
	}
	for rep := range reps {
		for _, c := range cases {
			for _, impl := range rotated(rep) {
				if !c.Applies(impl) {
					continue
				}
				setBenchtime(benchtime, c.TimeFraction)
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
			if memoryKeys == 0 {
				break
			}
			s := sample{bytesPerOp: bench.BytesPerItem(impl, memoryKeys)}
			r.add("memory", impl.Name, s)
			done++
			fmt.Fprintf(os.Stderr, "[%3d/%d %5.0fs] %-34s %-18s %12.1f bytes/item\n", done, total, time.Since(start).Seconds(), "memory", impl.Name, s.bytesPerOp)
		}
	}
	return r
}

// setBenchtime sets the target time of the next measurement: fraction of
// benchtime, or all of it if fraction is 0.
func setBenchtime(benchtime time.Duration, fraction float64) {
	if fraction > 0 {
		benchtime = time.Duration(float64(benchtime) * fraction)
	}
	if err := flag.Set("test.benchtime", benchtime.String()); err != nil {
		log.Fatal(err)
	}
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

// reference returns the implementation the ratios of c are taken against.
func reference(c bench.Case) string {
	if c.Reference != "" {
		return c.Reference
	}
	return bench.Reference
}

// speedup returns how many times faster impl is than the reference in a
// case, or 0 if either did not run it.
func speedup(r results, c bench.Case, impl string) float64 {
	ref, own := r[c.Name][reference(c)], r[c.Name][impl]
	if len(ref) == 0 || len(own) == 0 {
		return 0
	}
	return median(ref, nsPerOp) / median(own, nsPerOp)
}

// cpuSaving returns how many times less CPU per queue operation impl
// spends than the reference in a case, or 0 if the case does not measure
// it or either did not run it.
func cpuSaving(r results, c bench.Case, impl string) float64 {
	ref, own := r[c.Name][reference(c)], r[c.Name][impl]
	if len(ref) == 0 || len(own) == 0 {
		return 0
	}
	cpu := func(s sample) float64 { return s.extra["cpu-ns/queue-op"] }
	if _, ok := own[0].extra["cpu-ns/queue-op"]; !ok {
		return 0
	}
	return median(ref, cpu) / median(own, cpu)
}

func printTable(w io.Writer, cases []bench.Case, r results, reps, memoryKeys int) {
	fmt.Fprintf(w, "Machine: %s, %d CPUs, %s/%s, %s. Medians of %d runs.\n\n",
		cpuModel(), runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, runtime.Version(), reps)
	if slices.ContainsFunc(cases, func(c bench.Case) bool { return strings.HasPrefix(c.Name, controllerPrefix) }) {
		fmt.Fprintf(w, "Controller cases: %d producers add keys drawn from K (uniform, or hot: %d%% of adds to 1%% of the keys), "+
			"%d workers spin the reconcile cost (%.2f ns a step, as calibrated); ns/op is the time to a drained shutdown per add.\n\n",
			bench.ControllerProducers, bench.HotPercent, bench.ControllerWorkers, bench.SpinStepNanoseconds())
	}
	fmt.Fprintln(w, "| case | implementation | ns/op | B/op | allocs/op | speedup vs client-go | other |")
	fmt.Fprintln(w, "|---|---|--:|--:|--:|--:|---|")
	for _, c := range cases {
		for _, impl := range bench.Impls {
			samples := r[c.Name][impl.Name]
			if len(samples) == 0 {
				continue
			}
			var other []string
			for _, unit := range []string{"items/op", "max16-µs", "reconciles/add", "ns/reconcile", "cpu-ns/queue-op", "gets/key", "light-wait-max-items", "light-wait-median-items"} {
				if _, ok := samples[0].extra[unit]; ok {
					format := "%.3g %s"
					if strings.HasPrefix(unit, "light-wait-") {
						format = "%.1f %s" // counts of items: exact
					}
					other = append(other, fmt.Sprintf(format, median(samples, func(s sample) float64 { return s.extra[unit] }), unit))
				}
			}
			if s := cpuSaving(r, c, impl.Name); s > 0 {
				other = append(other, fmt.Sprintf("%.2fx less CPU per queue op than %s", s, reference(c)))
			}
			ratio := "–"
			if s := speedup(r, c, impl.Name); s > 0 {
				ratio = fmt.Sprintf("%.2fx", s)
				if ref := reference(c); ref != bench.Reference {
					ratio += " vs " + ref
				}
			}
			fmt.Fprintf(w, "| %s | %s | %.1f | %.0f | %.0f | %s | %s |\n", c.Name, impl.Name,
				median(samples, nsPerOp), median(samples, bytesPerOp), median(samples, allocsPerOp),
				ratio, strings.Join(other, ", "))
		}
	}
	if memoryKeys == 0 {
		return
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
	color.RGBA{R: 0x94, G: 0x67, B: 0xbd, A: 0xff},
}

// controllerPrefix begins the names of the controller-shaped cases, which
// the chart shows in a panel of their own.
const controllerPrefix = "controller/"

// drawChart draws, for every case, one bar per implementation: its speedup
// over client-go on a log scale, so that twice as fast and twice as slow are
// bars of the same length, up and down from client-go's line. The
// controller-shaped cases get a second panel below the others, so that
// neither has more groups of bars than fit across the page. Cases that
// client-go does not run (the priority and fairness ones) are left out: the
// table gives them.
func drawChart(path string, cases []bench.Case, r results) error {
	var basic, controller []bench.Case
	for _, c := range cases {
		switch {
		case reference(c) != bench.Reference || len(r[c.Name][bench.Reference]) == 0:
		case strings.HasPrefix(c.Name, controllerPrefix):
			controller = append(controller, c)
		default:
			basic = append(basic, c)
		}
	}
	var plots [][]*plot.Plot
	panel := func(title string, cases []bench.Case, trim string) error {
		if len(cases) == 0 {
			return nil
		}
		p, err := speedupPlot(title, cases, r, trim)
		if err != nil {
			return err
		}
		plots = append(plots, []*plot.Plot{p})
		return nil
	}
	if err := panel("Speedup over client-go's workqueue (higher is better)", basic, ""); err != nil {
		return err
	}
	title := fmt.Sprintf("Controller-shaped: %d producers, %d workers; speedup in the time to a drained shutdown (higher is better)",
		bench.ControllerProducers, bench.ControllerWorkers)
	if err := panel(title, controller, controllerPrefix); err != nil {
		return err
	}
	if len(plots) == 0 {
		return nil
	}
	format := strings.TrimPrefix(strings.ToLower(filepath.Ext(path)), ".")
	c, err := draw.NewFormattedCanvas(12*vg.Inch, vg.Length(len(plots))*6*vg.Inch, format)
	if err != nil {
		return err
	}
	tiles := draw.Tiles{Rows: len(plots), Cols: 1, PadY: vg.Points(18)}
	for i, canvases := range plot.Align(plots, tiles, draw.New(c)) {
		plots[i][0].Draw(canvases[0])
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := c.WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// speedupPlot draws one panel of the chart, with the cases' names less
// trim as the labels.
func speedupPlot(title string, cases []bench.Case, r results, trim string) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = title
	p.Y.Label.Text = "client-go time / implementation time"
	p.Legend.Top = true

	names := make([]string, len(cases))
	for i, c := range cases {
		names[i] = strings.TrimPrefix(c.Name, trim)
	}
	width := vg.Points(7)
	low, high := -1.0, 1.0
	for i, impl := range bench.Impls {
		values := make(plotter.Values, len(cases))
		for j, c := range cases {
			if s := speedup(r, c, impl.Name); s > 0 {
				values[j] = math.Log2(s)
				low, high = min(low, values[j]), max(high, values[j])
			}
		}
		bars, err := plotter.NewBarChart(values, width)
		if err != nil {
			return nil, err
		}
		bars.Color = colors[i%len(colors)]
		bars.LineStyle.Width = 0
		bars.Offset = vg.Length(float64(i)-float64(len(bench.Impls)-1)/2) * width
		p.Add(bars)
		p.Legend.Add(impl.Name, bars)
	}
	p.Add(plotter.NewGrid())
	p.Y.Min, p.Y.Max = math.Floor(low), math.Ceil(high)+1 // room for the legend
	var ticks []plot.Tick
	for exp := p.Y.Min; exp <= p.Y.Max; exp++ {
		ticks = append(ticks, plot.Tick{Value: exp, Label: strconv.FormatFloat(math.Pow(2, exp), 'g', 3, 64) + "x"})
	}
	p.Y.Tick.Marker = plot.ConstantTicks(ticks)
	p.NominalX(names...)
	p.X.Tick.Label.Rotation = 0.6
	p.X.Tick.Label.XAlign = -1
	return p, nil
}
