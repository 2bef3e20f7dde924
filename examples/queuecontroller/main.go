// Command queuecontroller runs a port of Volcano's queue controller on this
// module's work queues, against an in-memory object store, through a
// scripted scenario: a queue tree root/team-a/team-b/dev/prod, PodGroups
// moving through phases, team-a closed while its PodGroups run, commands,
// and injected transient write failures that the work queues retry. It
// prints a timeline as the controller works and a status table at the end.
//
// Flags choose the number of workers per work queue, the failure rate, the
// retry limit and a loopback address to serve /metrics on (-serve), in
// which case it keeps serving after the scenario until interrupted.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// options are the command line's choices.
type options struct {
	workers       int
	failureRate   float64
	seed          uint64
	maxRequeueNum int
	serve         string // loopback address for /metrics; "" for none
	verbose       bool
}

func main() {
	var o options
	flag.IntVar(&o.workers, "workers", 2, "workers per work queue")
	flag.Float64Var(&o.failureRate, "failure-rate", 0.2, "fraction of the controller's writes that fail, to be retried (0 to 1)")
	flag.Uint64Var(&o.seed, "seed", 1, "seed of the injected failures")
	flag.IntVar(&o.maxRequeueNum, "max-requeue", -1, "retries of a failing request before giving up with a warning event; -1 for unlimited")
	flag.StringVar(&o.serve, "serve", "", "loopback address (e.g. 127.0.0.1:9090) to serve /metrics on, until interrupted")
	flag.BoolVar(&o.verbose, "v", false, "log every failed reconcile to stderr")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Stdout, o); err != nil {
		log.Fatal(err)
	}
}

func (o options) validate() error {
	switch {
	case o.workers < 1:
		return fmt.Errorf("-workers %d: need at least 1", o.workers)
	case o.failureRate < 0 || o.failureRate >= 1:
		return fmt.Errorf("-failure-rate %g: need 0 <= rate < 1", o.failureRate)
	case o.maxRequeueNum < -1:
		return fmt.Errorf("-max-requeue %d: need -1 (unlimited) or more", o.maxRequeueNum)
	}
	if o.serve != "" {
		host, _, err := net.SplitHostPort(o.serve)
		if err != nil {
			return fmt.Errorf("-serve %q: %w", o.serve, err)
		}
		if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
			return fmt.Errorf("-serve %q: need a loopback address such as 127.0.0.1:9090", o.serve)
		}
	}
	return nil
}

// run plays the scenario and prints the timeline and the final status. With
// o.serve set it then serves /metrics until ctx is cancelled.
func run(ctx context.Context, out io.Writer, o options) error {
	if err := o.validate(); err != nil {
		return err
	}
	registry := prometheus.NewRegistry()
	logger := slog.New(slog.DiscardHandler)
	if o.verbose {
		logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}

	var server *http.Server
	if o.serve != "" {
		listener, err := net.Listen("tcp", o.serve)
		if err != nil {
			return err
		}
		server = &http.Server{Handler: promhttp.HandlerFor(registry, promhttp.HandlerOpts{}), ReadHeaderTimeout: 5 * time.Second}
		go server.Serve(listener)
		defer server.Close()
		fmt.Fprintf(out, "serving metrics on http://%s/metrics\n", listener.Addr())
	}

	store := NewStore()
	tl := newTimeline(out)
	ctrl := newController(store, controllerConfig{
		workers: o.workers, maxRequeueNum: o.maxRequeueNum, failureRate: o.failureRate, seed: o.seed,
		registry: registry, timeline: tl, logger: logger,
	})
	controllerCtx, stopController := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() {
		ctrl.run(controllerCtx)
		close(stopped)
	}()

	err := playScenario(out, store, ctrl, tl)
	stopController()
	<-stopped
	if err != nil {
		return err
	}

	fmt.Fprintf(out, "\n%d events, %d failed reconciles retried or given up\n\n", len(tl.recorded()), tl.failureCount())
	printStatus(out, store)
	fmt.Fprintln(out)
	if err := printQueueGauges(out, registry); err != nil {
		return err
	}
	if server != nil {
		fmt.Fprintln(out, "\nserving /metrics until interrupted")
		<-ctx.Done()
	}
	return nil
}

// scenarioStep is one step of the script: it changes the store as users
// and other controllers would; wait, if set, is a condition to reach before
// the next step instead of waiting for the controller to go idle.
type scenarioStep struct {
	title string
	do    func(s *Store) error
	wait  func(tl *timeline) bool
	show  bool // print the status table after the step
}

var scenario = []scenarioStep{
	{title: "create the queue tree: root > team-a > dev, prod; root > team-b > sandbox (team-b names no parent)",
		do: func(s *Store) error {
			return errors.Join(
				s.Queues.create(Queue{Name: "root"}),
				s.Queues.create(Queue{Name: "team-a", Parent: "root"}),
				s.Queues.create(Queue{Name: "team-b"}),
				s.Queues.create(Queue{Name: "dev", Parent: "team-a"}),
				s.Queues.create(Queue{Name: "prod", Parent: "team-a"}),
				s.Queues.create(Queue{Name: "sandbox", Parent: "team-b"}),
			)
		}},
	{title: "submit PodGroups: two to dev, one each to prod, team-b and sandbox",
		do: func(s *Store) error {
			return errors.Join(
				s.PodGroups.create(PodGroup{Namespace: "ml", Name: "train-1", Queue: "dev", Phase: PodGroupPending}),
				s.PodGroups.create(PodGroup{Namespace: "ml", Name: "train-2", Queue: "dev", Phase: PodGroupPending}),
				s.PodGroups.create(PodGroup{Namespace: "web", Name: "api", Queue: "prod", Phase: PodGroupPending}),
				s.PodGroups.create(PodGroup{Namespace: "ops", Name: "backup", Queue: "team-b", Phase: PodGroupPending}),
				s.PodGroups.create(PodGroup{Namespace: "tmp", Name: "try", Queue: "sandbox", Phase: PodGroupPending}),
			)
		}},
	{title: "the scheduler admits and runs them; backup completes",
		do: func(s *Store) error {
			return errors.Join(
				setPhase(s, "ml/train-1", PodGroupInqueue), setPhase(s, "ml/train-1", PodGroupRunning),
				setPhase(s, "ml/train-2", PodGroupInqueue),
				setPhase(s, "web/api", PodGroupInqueue), setPhase(s, "web/api", PodGroupRunning),
				setPhase(s, "ops/backup", PodGroupRunning), setPhase(s, "ops/backup", PodGroupCompleted),
				setPhase(s, "tmp/try", PodGroupUnknown),
			)
		}},
	{title: "a Command closes team-a while its PodGroups run (a Command for a Job is ignored)",
		do: func(s *Store) error {
			return errors.Join(
				s.Commands.create(Command{Namespace: "admin", Name: "close-team-a", TargetKind: "Queue", TargetName: "team-a", Action: CloseQueueAction}),
				s.Commands.create(Command{Namespace: "admin", Name: "abort-job", TargetKind: "Job", TargetName: "train-1", Action: "AbortJob"}),
			)
		}},
	{title: "train-1 and api complete and are deleted; train-2 stays queued",
		do: func(s *Store) error {
			return errors.Join(
				setPhase(s, "ml/train-1", PodGroupCompleted), setPhase(s, "web/api", PodGroupCompleted),
				s.PodGroups.delete("ml/train-1"), s.PodGroups.delete("web/api"),
			)
		},
		show: true},
	{title: "a Command opens dev while team-a is still closed: refused until team-a opens",
		do: func(s *Store) error {
			return s.Commands.create(Command{Namespace: "admin", Name: "open-dev", TargetKind: "Queue", TargetName: "dev", Action: OpenQueueAction})
		},
		wait: func(tl *timeline) bool { return tl.failedWith("dev/OpenQueue", "parent team-a is Closed") }},
	{title: "a Command opens team-a: dev and prod, closed by their parent, open with it",
		do: func(s *Store) error {
			return s.Commands.create(Command{Namespace: "admin", Name: "open-team-a", TargetKind: "Queue", TargetName: "team-a", Action: OpenQueueAction})
		}},
	{title: "a Command tries to close root",
		do: func(s *Store) error {
			return s.Commands.create(Command{Namespace: "admin", Name: "close-root", TargetKind: "Queue", TargetName: "root", Action: CloseQueueAction})
		}},
	{title: "new work in prod; sandbox and its PodGroup are deleted",
		do: func(s *Store) error {
			return errors.Join(
				s.PodGroups.create(PodGroup{Namespace: "web", Name: "api-v2", Queue: "prod", Phase: PodGroupRunning}),
				s.PodGroups.delete("tmp/try"),
				s.Queues.delete("sandbox"),
			)
		}},
}

func setPhase(s *Store, key string, phase PodGroupPhase) error {
	pg, err := s.PodGroups.get(key)
	if err != nil {
		return err
	}
	pg.Phase = phase
	_, err = s.PodGroups.update(pg)
	return err
}

// settleTimeout bounds how long a step waits for the controller.
const settleTimeout = time.Minute

// playScenario runs the steps, waiting after each until the controller is
// idle (or the step's condition holds).
func playScenario(out io.Writer, store *Store, ctrl *controller, tl *timeline) error {
	for _, step := range scenario {
		tl.step(step.title)
		if err := step.do(store); err != nil {
			return fmt.Errorf("%s: %w", step.title, err)
		}
		done := func() (bool, error) { return step.wait(tl), nil }
		if step.wait == nil {
			done = settled(store, ctrl)
		}
		if err := waitFor(done); err != nil {
			return fmt.Errorf("%s: %w", step.title, err)
		}
		if step.show {
			fmt.Fprintln(out)
			printStatus(out, store)
		}
	}
	return nil
}

// settled returns a check that holds once the controller has had nothing to
// do on quietChecks checks in a row, with nothing written to the store and
// nothing handed out by its work queues in between.
func settled(store *Store, ctrl *controller) func() (bool, error) {
	type snapshot struct {
		revision int64
		gets     uint64
	}
	var last snapshot
	quiet := 0
	return func() (bool, error) {
		busy, gets, err := ctrl.activity()
		if err != nil {
			return false, err
		}
		now := snapshot{store.Revision(), gets}
		switch {
		case busy:
			quiet = 0
		case quiet > 0 && now == last:
			quiet++
		default:
			quiet = 1
		}
		last = now
		return quiet >= quietChecks, nil
	}
}

// quietChecks is how many idle checks in a row, 5 ms apart, make the
// controller settled.
const quietChecks = 3

func waitFor(done func() (bool, error)) error {
	deadline := time.Now().Add(settleTimeout)
	for {
		ok, err := done()
		if ok || err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("controller did not settle within %v", settleTimeout)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// printStatus prints every queue, in tree order, with its state,
// closed-by-parent mark and PodGroup counts.
func printStatus(out io.Writer, store *Store) {
	queues := store.Queues.list()
	byName := make(map[string]Queue, len(queues))
	for _, q := range queues {
		byName[q.Name] = q
	}
	path := func(q Queue) string {
		p := q.Name
		for seen := 0; q.Parent != "" && seen < len(queues); seen++ {
			q = byName[q.Parent]
			p = q.Name + "/" + p
		}
		return p
	}
	slices.SortFunc(queues, func(a, b Queue) int { return strings.Compare(path(a), path(b)) })

	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "QUEUE\tSTATE\tCLOSED-BY-PARENT\tINQUEUE\tPENDING\tRUNNING\tUNKNOWN\tCOMPLETED")
	for _, q := range queues {
		indent := strings.Repeat("  ", strings.Count(path(q), "/"))
		fmt.Fprintf(w, "%s%s\t%s\t%t\t%d\t%d\t%d\t%d\t%d\n", indent, q.Name, q.Status.State, q.closedByParent(),
			q.Status.Inqueue, q.Status.Pending, q.Status.Running, q.Status.Unknown, q.Status.Completed)
	}
	w.Flush()
}

// printQueueGauges prints the per-queue PodGroup gauges that are not zero,
// as a scrape of /metrics would show them.
func printQueueGauges(out io.Writer, registry *prometheus.Registry) error {
	families, err := registry.Gather()
	if err != nil {
		return err
	}
	for _, family := range families {
		if !strings.HasPrefix(family.GetName(), "queue_pod_group_") {
			continue
		}
		for _, metric := range family.GetMetric() {
			if metric.GetGauge().GetValue() == 0 {
				continue
			}
			fmt.Fprintf(out, "%s{queue_name=%q} %g\n", family.GetName(), metric.GetLabel()[0].GetValue(), metric.GetGauge().GetValue())
		}
	}
	return nil
}
