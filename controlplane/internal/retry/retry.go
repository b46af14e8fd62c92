// Package retry spaces the attempts of the control plane's deliveries to
// outside systems (webhooks, registry writes) over a window.
package retry

import (
	"math"
	"math/rand/v2"
	"time"
)

// Delay is the jittered delay after the failed-th failure of a delivery
// that may fail threshold times within window, zero when no attempt
// should follow. The delays double from a base chosen so that the
// threshold-th attempt falls near the end of window; each is drawn from
// its upper half.
func Delay(failed, threshold int, window time.Duration) time.Duration {
	if failed >= threshold || failed < 1 {
		return 0
	}
	base := float64(window) / (math.Exp2(float64(threshold-1)) - 1)
	base = math.Max(base, float64(time.Second))
	d := math.Min(base*math.Exp2(float64(failed-1)), float64(window))
	return time.Duration(d/2 + rand.Float64()*d/2)
}
