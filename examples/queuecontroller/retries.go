package main

import (
	"sync"
	"time"

	"github.com/go-workqueue/workqueue"
)

// retryTracker wraps a work queue's rate limiter to remember when each
// item's retry falls due, as the delaying queue keeps it: an item waits
// once, and a second retry while it waits keeps the earlier time. The
// scenario reads it to tell a controller that is only waiting out a long
// backoff from one that is working.
type retryTracker[T comparable] struct {
	workqueue.TypedRateLimiter[T]

	mu  sync.Mutex
	due map[T]time.Time
}

func newRetryTracker[T comparable](limiter workqueue.TypedRateLimiter[T]) *retryTracker[T] {
	return &retryTracker[T]{TypedRateLimiter: limiter, due: make(map[T]time.Time)}
}

// When returns the limiter's delay and notes when the retry falls due. It is
// taken before the queue reads its clock, so the queue's time is never
// earlier than the one noted.
func (r *retryTracker[T]) When(item T) time.Duration {
	delay := r.TypedRateLimiter.When(item)
	now := time.Now()
	at := now.Add(delay)
	r.mu.Lock()
	defer r.mu.Unlock()
	if prev, waiting := r.due[item]; waiting && prev.After(now) && prev.Before(at) {
		return delay // still waiting for the earlier time, which wins
	}
	r.due[item] = at
	return delay
}

// pendingRetry is the first retry a work queue is still waiting for.
type pendingRetry struct {
	what     string        // the request or command
	in       time.Duration // until it falls due
	failures int           // its failures in a row so far
}

// waiting returns how many retries fall due after now and the first of
// them; name spells an item as the timeline does.
func (r *retryTracker[T]) waiting(now time.Time, name func(T) string) (n int, first pendingRetry) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var firstItem T
	var firstAt time.Time
	for item, at := range r.due {
		if !at.After(now) {
			delete(r.due, item) // handed to the queue already
			continue
		}
		if n == 0 || at.Before(firstAt) {
			firstItem, firstAt = item, at
		}
		n++
	}
	if n == 0 {
		return 0, pendingRetry{}
	}
	return n, pendingRetry{what: name(firstItem), in: firstAt.Sub(now), failures: r.NumRequeues(firstItem)}
}
