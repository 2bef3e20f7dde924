//go:build !linux

package redisqueue

import "os/exec"

func setDeathSignal(*exec.Cmd) {}
