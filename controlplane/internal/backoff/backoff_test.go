package backoff

import (
	"testing"
	"time"
)

func TestDelay(t *testing.T) {
	t.Parallel()
	window := 24 * time.Hour
	var sum time.Duration
	prev := time.Duration(0)
	for failed := 1; failed < 10; failed++ {
		d := Delay(failed, 10, window)
		if d <= 0 || d < prev {
			t.Fatalf("delay %d = %v after %v", failed, d, prev)
		}
		prev = d
		sum += d
	}
	if sum > window {
		t.Fatalf("nine delays sum to %v, beyond the %v window", sum, window)
	}
	if Delay(10, 10, window) != 0 || Delay(1, 1, window) != 0 || Delay(0, 10, window) != 0 {
		t.Fatal("no delay expected at the threshold or before a failure")
	}
	if d := Delay(99, 200, window); d > window {
		t.Fatalf("huge attempt count gave %v", d)
	}
}
