package redistest

import (
	"os/exec"
	"syscall"
)

// setDeathSignal has the kernel kill redis-server when the test binary
// dies, as it does when a test times out, without running its cleanups:
// otherwise the server outlives it.
func setDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
