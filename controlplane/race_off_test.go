//go:build !race

package controlplane

// raceEnabled: the race detector slows every request many times over, so
// latency comparisons are not asserted under it.
const raceEnabled = false
