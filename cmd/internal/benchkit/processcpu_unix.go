//go:build unix

package benchkit

import (
	"syscall"
	"time"
)

// ProcessCPU returns the CPU time, user and system, that this process has
// used so far, every thread and the garbage collector included; ok is false
// where the platform does not say.
func ProcessCPU() (cpu time.Duration, ok bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
