package claimcache

import (
	"fmt"
	"testing"
	"time"
)

// A flood of distinct tuples (self-made keys, random namespaces) keeps the
// receipts at their bound, and entries past their age are dropped as new
// ones arrive.
func TestReceiptsStayBounded(t *testing.T) {
	m := newReceipts(time.Minute, 100)
	now := time.Now()
	for i := range 10_000 {
		m.put(fmt.Sprintf("github\x00rand-%d\x00key\x00github", i), Receipt{ClaimID: fmt.Sprint(i)}, now)
	}
	if len(m.byTuple) != 100 || m.order.Len() != 100 {
		t.Fatalf("%d receipts held, want 100", len(m.byTuple))
	}
	if rc, ok := m.get("github\x00rand-9999\x00key\x00github", now); !ok || rc.ClaimID != "9999" {
		t.Fatalf("newest receipt lost: %+v %v", rc, ok)
	}
	if _, ok := m.get("github\x00rand-0\x00key\x00github", now); ok {
		t.Fatal("oldest receipt kept past the bound")
	}
	m.put("github\x00late\x00key\x00github", Receipt{ClaimID: "late"}, now.Add(time.Minute))
	if len(m.byTuple) != 1 {
		t.Fatalf("%d receipts held after the others aged out, want 1", len(m.byTuple))
	}
}
