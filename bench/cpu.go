//go:build unix

package bench

import (
	"syscall"
	"time"
)

// processCPU is the CPU time the process has used so far, user and system
// together, and whether it could be read.
func processCPU() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
