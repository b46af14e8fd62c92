package main

import (
	"runtime/debug"
	"strconv"

	"github.com/idnhq/idn/gateway"
)

// tuneGC sets the collector's target to gateway.GCPercent unless GOGC is
// set (gogc is its value), and returns the target in force (-1: collection
// is off). Without GOGC, serve then runs gateway.TuneGC, which keeps the
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
	debug.SetGCPercent(gateway.GCPercent)
	return gateway.GCPercent
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
