//go:build !linux

package main

import (
	"os/exec"
	"strconv"
	"time"
)

// preciseTimer does nothing here: only Linux lets a thread shrink its
// timer slack, so elsewhere open-loop send times may lag by the runtime
// timer's resolution (the report's send-lag figure shows by how much).
func preciseTimer() {}

func sleep(d time.Duration) { time.Sleep(d) }

// processCPU is not measured here; the report then shows no CPU figure.
func processCPU() time.Duration { return 0 }

// startSplit starts cmd; CPUs are pinned on Linux only.
func startSplit(cmd *exec.Cmd) error { return cmd.Start() }

// startPinned starts cmd with GOMAXPROCS procs; CPUs are pinned on Linux
// only.
func startPinned(cmd *exec.Cmd, _, _ []int, procs int) error {
	cmd.Env = append(cmd.Env, "GOMAXPROCS="+strconv.Itoa(procs))
	return cmd.Start()
}

// allowedCPUs is not known here.
func allowedCPUs() []int { return nil }

// residentBytes is not measured here; the soak then shows no RSS.
func residentBytes() int64 { return 0 }
