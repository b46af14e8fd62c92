//go:build linux

package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"syscall"
	"time"
	"unsafe"
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

// cpuSet is an affinity mask of sched_setaffinity(2), for up to 1024 CPUs.
type cpuSet [16]uint64

func (s *cpuSet) cpus() []int {
	var out []int
	for i := range len(s) * 64 {
		if s[i/64]&(1<<(i%64)) != 0 {
			out = append(out, i)
		}
	}
	return out
}

func setOf(cpus []int) *cpuSet {
	var s cpuSet
	for _, c := range cpus {
		s[c/64] |= 1 << (c % 64)
	}
	return &s
}

// affinity gets (set nil) or sets the CPU affinity of thread tid (0: the
// calling thread).
func affinity(tid int, set *cpuSet) (*cpuSet, error) {
	call, s := uintptr(syscall.SYS_SCHED_SETAFFINITY), set
	if set == nil {
		call, s = syscall.SYS_SCHED_GETAFFINITY, &cpuSet{}
	}
	if _, _, errno := syscall.RawSyscall(call, uintptr(tid), unsafe.Sizeof(*s), uintptr(unsafe.Pointer(s))); errno != 0 {
		return nil, fmt.Errorf("sched affinity of thread %d: %w", tid, errno)
	}
	return s, nil
}

// startSplit starts cmd on one half of the CPUs this process may use and
// moves this process to the other half (see proxies.go). A child inherits
// the affinity of the thread that forks it, so the fork happens on a
// thread pinned for the purpose. With a single CPU, nothing is pinned.
//
// Each side keeps GOMAXPROCS of at least 2 (unless the GOMAXPROCS
// variable says otherwise), even on one CPU: measured on 2 CPUs split 1 and
// 1, GOMAXPROCS 1 gave the direct upstream a p99 of 4.4 ms and the gateway
// 13.6 ms at half load, against 0.8 and 2.7 ms with GOMAXPROCS 2. (With
// one P busy, the runtime seems to notice ready connections late.)
func startSplit(cmd *exec.Cmd) error {
	all, err := affinity(0, nil)
	if err != nil {
		return err
	}
	cpus := all.cpus()
	if len(cpus) < 2 {
		return cmd.Start()
	}
	load, proxies := cpus[:len(cpus)/2], cpus[len(cpus)/2:]
	_, fixed := os.LookupEnv("GOMAXPROCS")
	if !fixed {
		cmd.Env = append(cmd.Env, "GOMAXPROCS="+strconv.Itoa(max(2, len(proxies))))
	}
	runtime.LockOSThread()
	if _, err := affinity(0, setOf(proxies)); err != nil {
		runtime.UnlockOSThread()
		return err
	}
	err = cmd.Start()
	if _, rerr := affinity(0, all); rerr != nil {
		return rerr // the thread stays locked and pinned; it is not reused
	}
	runtime.UnlockOSThread()
	if err != nil {
		return err
	}
	if err := pinProcess(setOf(load)); err != nil {
		return err
	}
	if !fixed {
		runtime.GOMAXPROCS(max(2, len(load)))
	}
	return nil
}

// startPinned starts cmd with GOMAXPROCS procs on the CPUs child, and
// moves this process to the CPUs parent (which may overlap child's, or be
// all of them).
func startPinned(cmd *exec.Cmd, child, parent []int, procs int) error {
	cmd.Env = append(cmd.Env, "GOMAXPROCS="+strconv.Itoa(procs))
	all, err := affinity(0, nil)
	if err != nil {
		return err
	}
	runtime.LockOSThread()
	if _, err := affinity(0, setOf(child)); err != nil {
		runtime.UnlockOSThread()
		return err
	}
	err = cmd.Start()
	if _, rerr := affinity(0, all); rerr != nil {
		return rerr // the thread stays locked and pinned; it is not reused
	}
	runtime.UnlockOSThread()
	if err != nil {
		return err
	}
	return pinProcess(setOf(parent))
}

// allowedCPUs lists the CPUs the calling thread may run on.
func allowedCPUs() []int {
	set, err := affinity(0, nil)
	if err != nil {
		return nil
	}
	return set.cpus()
}

// pinProcess sets the affinity of every thread of this process; threads
// started later inherit it from the thread that starts them. It passes over
// the threads until no new one appeared meanwhile.
func pinProcess(set *cpuSet) error {
	pinned := map[int]bool{}
	for {
		tasks, err := os.ReadDir("/proc/self/task")
		if err != nil {
			return err
		}
		fresh := false
		for _, t := range tasks {
			tid, err := strconv.Atoi(t.Name())
			if err != nil || pinned[tid] {
				continue
			}
			if _, err := affinity(tid, set); err != nil && !errors.Is(err, syscall.ESRCH) { // ESRCH: the thread has exited
				return err
			}
			pinned[tid], fresh = true, true
		}
		if !fresh {
			return nil
		}
	}
}

// residentBytes is the process's resident set size, from /proc/self/statm
// (0 when it cannot be read).
func residentBytes() int64 {
	raw, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	var size, resident int64
	if _, err := fmt.Sscan(string(raw), &size, &resident); err != nil {
		return 0
	}
	return resident * int64(os.Getpagesize())
}
