package inspect_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/go-workqueue/workqueue"
	"github.com/go-workqueue/workqueue/inspect"
	"github.com/go-workqueue/workqueue/reconcile"
)

// Example registers a queue, wires its Runner's failures to the inspector
// and fetches the JSON view over HTTP: one key stuck in its reconcile, one
// given up on with its last error.
func Example() {
	queue := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())
	h := inspect.NewHandler()
	failures := inspect.Register(h, "pods", queue)

	stuck, unblock := make(chan struct{}), make(chan struct{})
	runner := reconcile.NewRunner(queue,
		func(ctx context.Context, key string) (reconcile.Result, error) {
			if key == "default/stuck" {
				close(stuck)
				<-unblock
				return reconcile.Result{}, nil
			}
			return reconcile.Result{}, errors.New("image not found")
		},
		reconcile.WithErrorObserver(failures), // the inspector hears of each failure
		reconcile.WithMaxRetries(0),
		reconcile.WithLogger(slog.New(slog.DiscardHandler)))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		runner.Run(ctx, 1)
		close(done)
	}()
	queue.Add("default/broken") // fails and is given up on at once
	queue.Add("default/stuck")  // then blocks the one worker
	<-stuck

	mux := http.NewServeMux()
	mux.Handle("/debug/queues", h)
	server := httptest.NewServer(mux)
	defer server.Close()
	resp, err := http.Get(server.URL + "/debug/queues?format=json")
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	var view inspect.View
	if err := json.NewDecoder(resp.Body).Decode(&view); err != nil {
		panic(err)
	}
	for _, q := range view.Queues {
		fmt.Printf("%s: %d processing, %d failed, %d given up\n", q.Name, q.Processing, q.Failures, q.GivenUp)
		for _, k := range q.InFlight {
			fmt.Printf("  in flight: %s (under a minute: %t)\n", k.Key, k.AgeSeconds < time.Minute.Seconds())
		}
		for _, k := range q.Failing {
			fmt.Printf("  failing: %s, %d failure, %s: %s\n", k.Key, k.Failures, k.State, k.LastError)
		}
	}

	close(unblock)
	cancel()
	<-done
	// Output:
	// pods: 1 processing, 1 failed, 1 given up
	//   in flight: default/stuck (under a minute: true)
	//   failing: default/broken, 1 failure, givenUp: image not found
}
