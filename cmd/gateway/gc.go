package main

import (
	"github.com/idnhq/idn/gateway/gctune"
	"runtime/debug"
	"strconv"
)

// tuneGC sets the collector's target to gctune.Percent unless GOGC is
// set (gogc is its value), and returns the target in force (-1: collection
// is off). Without GOGC, serve then runs gctune.Tune, which keeps the
// claims snapshots out of the target's headroom.
func tuneGC(gogc string) int {
	if gogc != "" {
		if gogc == "off" {
			return -1
		}
		n, err := strconv.Atoi(gogc)
		if err != nil {
			return 100 // the runtime ignores a malformed GOGC
		}
		return n
	}
	debug.SetGCPercent(gctune.Percent)
	return gctune.Percent
}

// tuneMemory sets the runtime's memory limit to limit unless GOMEMLIMIT is
// set (gomemlimit is its value), and returns the limit in force.
func tuneMemory(limit int64, gomemlimit string) int64 {
	if gomemlimit != "" {
		return debug.SetMemoryLimit(-1) // the runtime applied GOMEMLIMIT at start
	}
	debug.SetMemoryLimit(limit)
	return limit
}
