//go:build race

package redisqueue

// raceEnabled builds the worker processes with the race detector when the
// tests run with it, so that a race in a child process fails the test too
// (the child exits 66 instead of 0).
const raceEnabled = true
