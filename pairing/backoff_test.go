package pairing

import (
	"testing"
	"time"
)

func TestBackoff(t *testing.T) {
	max := 30 * time.Second
	for n, want := range map[int]time.Duration{0: 500 * time.Millisecond, 1: time.Second, 3: 4 * time.Second, 6: max, 40: max} {
		for range 50 {
			if d := backoff(n, max); d < want/2 || d > want {
				t.Fatalf("backoff(%d) = %v, want within [%v, %v]", n, d, want/2, want)
			}
		}
	}
}
