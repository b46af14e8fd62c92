// Package backoff spaces the retries of the control plane's outbound work
// (webhook deliveries, registry writes) over a retry window. Delays double
// from a base chosen so that the threshold's attempts span the window. Each
// delay is drawn from its upper half ("equal jitter"). So delays never
// shrink, and instances that failed together do not retry together.
package backoff

import (
	"math"
	"math/rand/v2"
	"time"
)

// Delay is the jittered delay after the failed-th failure, zero when no
// attempt should follow (failed reached threshold, or is below 1).
func Delay(failed, threshold int, window time.Duration) time.Duration {
	if failed >= threshold || failed < 1 {
		return 0
	}
	base := float64(window) / (math.Exp2(float64(threshold-1)) - 1)
	base = math.Max(base, float64(time.Second))
	d := math.Min(base*math.Exp2(float64(failed-1)), float64(window))
	return time.Duration(d/2 + rand.Float64()*d/2)
}
