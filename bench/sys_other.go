//go:build !linux

package main

import "time"

// preciseTimer does nothing here: only Linux lets a thread shrink its
// timer slack, so elsewhere open-loop send times may lag by the runtime
// timer's resolution (the report's send-lag figure shows by how much).
func preciseTimer() {}

func sleep(d time.Duration) { time.Sleep(d) }

// processCPU is not measured here; the report then shows no CPU figure.
func processCPU() time.Duration { return 0 }
