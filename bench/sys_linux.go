//go:build linux

package main

import (
	"runtime"
	"syscall"
	"time"
)

// prSetTimerSlack is PR_SET_TIMERSLACK of prctl(2).
const prSetTimerSlack = 29

// preciseTimer pins the calling goroutine to its thread and sets the
// thread's timer slack to 1 ns, so that sleep wakes within microseconds;
// the runtime's own timers wake an idle process up to about 1 ms late,
// which would be charged to every open-loop request. Call it from a
// goroutine that ends without unlocking: the thread then exits with it.
func preciseTimer() {
	runtime.LockOSThread()
	_, _, _ = syscall.RawSyscall(syscall.SYS_PRCTL, prSetTimerSlack, 1, 0)
}

// sleep blocks the thread in nanosleep(2) for about d; an early return
// (a signal) is fine, since callers loop until their deadline.
func sleep(d time.Duration) {
	ts := syscall.NsecToTimespec(int64(d))
	_ = syscall.Nanosleep(&ts, nil)
}

// processCPU is the CPU time (user and system) the process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
