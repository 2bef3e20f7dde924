package redisqueue

import (
	"os/exec"
	"syscall"
)

// setDeathSignal has the kernel kill a worker process when the test binary
// dies, as it does when a test times out, without running its cleanups.
func setDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
