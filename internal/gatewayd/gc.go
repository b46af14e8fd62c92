package gatewayd

import (
	"runtime/debug"
	"strconv"
)

// GCPercent is the garbage collector's target (GOGC) a gateway process runs
// with unless the GOGC variable is set. A gateway's live heap is small, so
// at Go's default of 100 every few megabytes of per-request garbage start a
// collection; at 3,000 requests/s that is several a second, and requests
// that meet one pay for it at p99 (bench/README.md has the figures). At 400
// the heap may grow to five times the live data before a collection, a few
// tens of megabytes for a typical gateway; GOMEMLIMIT caps it.
const GCPercent = 400

// TuneGC sets the collector's target to GCPercent unless getenv("GOGC") is
// set, and returns the target in force (-1: collection is off).
func TuneGC(getenv func(string) string) int {
	if v := getenv("GOGC"); v != "" {
		if v == "off" {
			return -1
		}
		n, err := strconv.Atoi(v)
		if err != nil {
			return 100 // the runtime ignores a malformed GOGC
		}
		return n
	}
	debug.SetGCPercent(GCPercent)
	return GCPercent
}
