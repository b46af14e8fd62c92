//go:build unix

package proxy

import (
	"syscall"
	"time"
)

// processCPU is the CPU time (user and system) the test process has used;
// on a shared machine it tells a benchmark's cost better than wall time.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
