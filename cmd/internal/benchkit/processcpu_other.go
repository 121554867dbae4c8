//go:build !unix

package benchkit

import "time"

// ProcessCPU returns the CPU time this process has used so far; here the
// platform does not say, so ok is false.
func ProcessCPU() (cpu time.Duration, ok bool) { return 0, false }
