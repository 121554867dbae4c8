//go:build linux

package redistest

import (
	"os/exec"
	"syscall"
)

// setProcAttr asks the kernel to kill the server if the test binary dies
// before its cleanup runs, so that a crashed test leaves no server behind.
func setProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
