//go:build !race

package redisqueue

const raceEnabled = false
