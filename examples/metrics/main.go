// Command metrics runs a small reconcile loop on a work queue with
// Prometheus metrics, serves them at /metrics on a loopback address, scrapes
// itself once and prints the workqueue series. With -serve it keeps serving
// until interrupted, for a real Prometheus or curl to scrape.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/go-workqueue/workqueue"
	wqprometheus "github.com/go-workqueue/workqueue/prometheus"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "loopback address to serve /metrics on")
	serve := flag.Bool("serve", false, "keep serving /metrics after the demo until interrupted")
	flag.Parse()
	if err := run(os.Stdout, *addr, *serve); err != nil {
		log.Fatal(err)
	}
}

func run(out io.Writer, addr string, serve bool) error {
	registry := prometheus.NewRegistry()
	provider := wqprometheus.NewProvider(registry)
	queue := workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.NewTypedItemExponentialFailureRateLimiter[string](10*time.Millisecond, time.Second),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "demo", MetricsProvider: provider})

	listener, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(registry, promhttp.HandlerOpts{}))
	server := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go server.Serve(listener)
	defer server.Close()
	url := "http://" + listener.Addr().String() + "/metrics"

	workers := startWorkers(queue)
	addKeys(queue)
	queue.AddAfter("default/nightly-report", time.Hour) // shows in workqueue_delayed_items

	err = printWorkqueueSeries(out, url)
	if err == nil && serve {
		fmt.Fprintln(out, "serving", url, "until interrupted")
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
		<-ctx.Done()
		stop()
	}
	queue.ShutDown()
	workers.Wait()
	return err
}

// demo tracks the keys of the demo: every fifth key fails once and is
// retried with backoff.
var demo struct {
	mu      sync.Mutex
	failed  map[string]bool
	pending sync.WaitGroup
}

func startWorkers(queue workqueue.TypedRateLimitingInterface[string]) *sync.WaitGroup {
	demo.failed = map[string]bool{}
	var workers sync.WaitGroup
	for range 2 {
		workers.Go(func() {
			for {
				key, shutdown := queue.Get()
				if shutdown {
					return
				}
				time.Sleep(2 * time.Millisecond) // the work
				failed := reconcileFails(key)
				if failed {
					queue.AddRateLimited(key)
				} else {
					queue.Forget(key)
				}
				queue.Done(key)
				// Counted after Done, so that the scrape sees every work
				// duration.
				if !failed {
					demo.pending.Done()
				}
			}
		})
	}
	return &workers
}

func reconcileFails(key string) bool {
	demo.mu.Lock()
	defer demo.mu.Unlock()
	fail := (strings.HasSuffix(key, "0") || strings.HasSuffix(key, "5")) && !demo.failed[key]
	demo.failed[key] = true
	return fail
}

// addKeys adds 20 keys and waits until each has been reconciled.
func addKeys(queue workqueue.TypedRateLimitingInterface[string]) {
	for i := range 20 {
		demo.pending.Add(1)
		queue.Add(fmt.Sprintf("default/pod-%d", i))
	}
	demo.pending.Wait()
}

// seriesMeaning says in one line what each workqueue metric family shows
// in this demo.
var seriesMeaning = map[string]string{
	"workqueue_adds_total":                        "items that entered the queue (duplicates collapsed while queued do not count)",
	"workqueue_delayed_items":                     "items waiting for their delay (AddAfter, AddRateLimited)",
	"workqueue_depth":                             "items waiting to be handed out",
	"workqueue_longest_running_processor_seconds": "age of the oldest item being reconciled",
	"workqueue_queue_duration_seconds":            "seconds items waited between Add and Get (sum, count)",
	"workqueue_retries_total":                     "AddAfter and AddRateLimited calls: retries with backoff and delayed adds",
	"workqueue_parked_items":                      "items parked until an event (none in this demo)",
	"workqueue_park_timeouts_total":               "parks ended by MaxParkTime instead of an event",
	"workqueue_unfinished_work_seconds":           "summed age of the items being reconciled",
	"workqueue_work_duration_seconds":             "seconds from Get to Done (sum, count)",
}

// printWorkqueueSeries scrapes url and prints the workqueue series, leaving
// out histogram buckets for brevity, with a line above each metric saying
// what it shows.
func printWorkqueueSeries(out io.Writer, url string) error {
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 5 * time.Second}
	resp, err := client.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return errors.New("scrape: " + resp.Status)
	}
	scanner := bufio.NewScanner(resp.Body)
	lastFamily := ""
	for scanner.Scan() {
		line := scanner.Text()
		if !strings.HasPrefix(line, "workqueue_") || strings.Contains(line, "_bucket{") {
			continue
		}
		family, _, _ := strings.Cut(line, "{")
		family = strings.TrimSuffix(strings.TrimSuffix(family, "_sum"), "_count")
		if family != lastFamily {
			if meaning, ok := seriesMeaning[family]; ok {
				fmt.Fprintln(out, "# "+meaning)
			}
			lastFamily = family
		}
		fmt.Fprintln(out, line)
	}
	return scanner.Err()
}
