// Command queuecontroller runs a port of Volcano's queue controller on this
// module's work queues, against an in-memory object store, through a
// scripted scenario: a queue tree root/team-a/team-b/dev/prod, PodGroups
// moving through phases, team-a closed while its PodGroups run, commands,
// and injected transient write failures that the work queues retry. It
// prints a timeline as the controller works, then a summary of what the work
// queues did and a status table.
//
// The controller has two work queues, request (requests to sync, open or
// close a Queue) and command (Commands to carry out): the terminal, the
// name label of the workqueue_* metrics and the inspector's page all call
// them so. The request work queue reconciles one request about a Queue at a
// time (a group limit, see reconcilesPerQueue), so that two requests about
// one Queue do not race to write its status.
//
// Flags choose the number of workers per work queue, the failure rate, the
// retry limit and a loopback address to serve /metrics and the work queue
// inspector, /debug/queues, on (-serve), in which case the controller keeps
// running after the scenario, against a slow API server, on a trickle of
// generated PodGroups and a script of Commands and throttled writes that
// repeats every minute (see trickle), until interrupted; the summary and
// the status then cover the whole run.
//
// A request or command given up after -max-requeue retries is reported, and
// a step waiting for something the give-up made impossible goes on; the
// scenario stops if the controller has nothing left to do but wait out a
// backoff longer than 5 s. The exit status is 0 when the scenario played out
// as scripted and 1 otherwise, with the reason on stderr; what the trickle
// gives up on after the scenario is reported and does not change it.
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

	"github.com/go-workqueue/workqueue/inspect"
)

// options are the command line's choices.
type options struct {
	workers       int
	failureRate   float64
	seed          uint64
	maxRequeueNum int
	serve         string // loopback address for /metrics and /debug/queues; "" for none
	verbose       bool
	// retryWaitLimit stops the scenario when the controller has nothing to
	// do but wait longer than this for a retry; 0, for tests on a fake
	// clock, waits however long.
	retryWaitLimit time.Duration
	// trickleCycle is the length of the trickle's cycle with -serve; 0 for
	// trickleCycle, tests set a shorter one.
	trickleCycle time.Duration
}

func main() {
	var o options
	flag.IntVar(&o.workers, "workers", 2, "workers per work queue")
	flag.Float64Var(&o.failureRate, "failure-rate", 0.2, "fraction of the controller's writes that fail, to be retried (0 to 1)")
	flag.Uint64Var(&o.seed, "seed", 1, "seed of the injected failures")
	flag.IntVar(&o.maxRequeueNum, "max-requeue", -1, "retries of a failing request or command before giving up on it; -1 for unlimited")
	flag.StringVar(&o.serve, "serve", "", "loopback address (e.g. 127.0.0.1:9090) to serve /metrics and /debug/queues on, until interrupted")
	flag.BoolVar(&o.verbose, "v", false, "log every failed reconcile to stderr")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: queuecontroller [flags]\n\n"+exitStatusHelp+"\n", retryWaitLimit)
		flag.PrintDefaults()
	}
	flag.Parse()
	o.retryWaitLimit = retryWaitLimit

	log.SetFlags(0)
	log.SetPrefix("queuecontroller: ")
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Stdout, o); err != nil {
		log.Fatal(err)
	}
}

const exitStatusHelp = `Plays the scenario and prints the timeline, a summary and the final status;
with -serve, goes on after the scenario, serving, until interrupted.
Exit status 0 when the scenario played out as scripted; 1 when it did not
(a request or command given up after -max-requeue retries, or the scenario
stopped because the controller had nothing left but a backoff longer than
%v, or was interrupted before its end) or could not start, with the reason
on stderr; 2 for a flag it does not know.
`

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
// o.serve set it serves /metrics and the inspector, /debug/queues, from the
// start, and after the scenario keeps the controller working on generated
// events until ctx is cancelled.
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
	var inspector *inspect.Handler
	if o.serve != "" {
		listener, err := net.Listen("tcp", o.serve)
		if err != nil {
			return err
		}
		inspector = inspect.NewHandler()
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(registry, promhttp.HandlerOpts{}))
		mux.Handle("/debug/queues", inspector)
		server = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
		go server.Serve(listener)
		defer server.Close()
		fmt.Fprintf(out, "serving metrics on http://%s/metrics\n", listener.Addr())
		fmt.Fprintf(out, "inspecting the work queues on http://%s/debug/queues\n", listener.Addr())
	}

	store := NewStore()
	tl := newTimeline(out)
	ctrl := newController(store, controllerConfig{
		workers: o.workers, maxRequeueNum: o.maxRequeueNum, failureRate: o.failureRate, seed: o.seed,
		registry: registry, timeline: tl, logger: logger, inspector: inspector,
	})
	controllerCtx, stopController := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() {
		ctrl.run(controllerCtx)
		close(stopped)
	}()

	result := playScenario(ctx, out, store, ctrl, tl, o.retryWaitLimit)
	scenarioGiveUps := tl.givenUpCount()
	if server != nil && ctx.Err() == nil {
		// Served pages of a finished scenario would show only stopped
		// queues: keep the controller working, on generated events.
		fmt.Fprintf(out, "\nscenario played; the controller goes on with a trickle of generated PodGroups and Commands "+
			"on a slow API server (see the README), serving /metrics and /debug/queues until interrupted (Ctrl-C)\n")
		cycle := o.trickleCycle
		if cycle == 0 {
			cycle = trickleCycle
		}
		trickle(ctx, store, ctrl.client, o.seed, cycle)
	}
	// Retries still waiting for their backoff are dropped by the stop.
	before, gatherErr := ctrl.metrics.workqueueFigures()
	stopController()
	<-stopped
	after, err := ctrl.metrics.workqueueFigures()
	if err = errors.Join(gatherErr, err); err != nil {
		return err
	}

	fmt.Fprintln(out)
	printWorkqueueSummary(out, []workqueueSummary{
		{label: requestQueueName, addCalls: ctrl.requestAddCalls.Load(), wakes: ctrl.requestWakes.Load(), figures: after[requestQueueName], dropped: before[requestQueueName].delayed},
		{label: commandQueueName, addCalls: ctrl.commandAddCalls.Load(), figures: after[commandQueueName], dropped: before[commandQueueName].delayed},
	})
	fmt.Fprintf(out, "%d events, %d failures retried or given up\n", len(tl.recorded()), tl.failureCount())
	// The verdict is the scenario's; what the trickle gave up is reported
	// for what it is.
	givenUp := tl.givenUpSince(0)
	incomplete := newIncompleteError(result, givenUp[:scenarioGiveUps], o.maxRequeueNum)
	if incomplete != nil {
		incomplete.report(out)
	}
	if later := givenUp[scenarioGiveUps:]; len(later) > 0 {
		fmt.Fprintf(out, "after the scenario, %s (-max-requeue %d)\n",
			(&incompleteError{givenUp: later, maxRequeue: o.maxRequeueNum}).gaveUp(true), o.maxRequeueNum)
	}
	fmt.Fprintln(out)
	printStatus(out, store)
	fmt.Fprintln(out)
	if err := printQueueGauges(out, registry); err != nil {
		return err
	}
	if incomplete != nil {
		return incomplete
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
	until string // what wait waits for, in words
	// waitsOn names the requests and commands (as the timeline spells them)
	// whose give-up makes wait unreachable.
	waitsOn []string
	show    bool // print the status table after the step
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
	{title: "a Command opens dev while team-a is still closed: parked until team-a opens",
		do: func(s *Store) error {
			return s.Commands.create(Command{Namespace: "admin", Name: "open-dev", TargetKind: "Queue", TargetName: "dev", Action: OpenQueueAction})
		},
		wait:    func(tl *timeline) bool { return tl.parkedOnce("dev/OpenQueue") },
		until:   "dev's open parked while team-a is Closed",
		waitsOn: []string{"command admin/open-dev", "dev/OpenQueue"}},
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
		state := q.Status.State
		if state == "" {
			state = "<none>" // as kubectl shows a field not set: no status write succeeded
		}
		fmt.Fprintf(w, "%s%s\t%s\t%t\t%d\t%d\t%d\t%d\t%d\n", indent, q.Name, state, q.closedByParent(),
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
