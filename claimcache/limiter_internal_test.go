package claimcache

import (
	"fmt"
	"testing"
	"time"
)

func TestLimitersStayBounded(t *testing.T) {
	t.Parallel()
	l := newLimiters(1, 100)
	now := time.Now()
	// An attacker cycling through random namespaces.
	for i := range 10_000 {
		if !l.allow(fmt.Sprintf("github\x00rand-%d", i), now) {
			t.Fatalf("fresh pair %d refused", i)
		}
	}
	if len(l.byKey) != 100 || l.order.Len() != 100 {
		t.Fatalf("%d limiters held, want 100", len(l.byKey))
	}
	// The most recent pairs are still limited.
	if l.allow("github\x00rand-9999", now) {
		t.Fatal("recent pair allowed twice within a minute")
	}
}
