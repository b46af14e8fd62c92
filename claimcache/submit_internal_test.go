package claimcache

import (
	"fmt"
	"sync"
	"testing"
	"time"
)

// submitted runs one led submission of tuple through m.
func submitted(t *testing.T, m *receipts, tuple string, rc Receipt, now time.Time) {
	t.Helper()
	if _, _, lead := m.begin(tuple, now); !lead {
		t.Fatalf("%q: not led", tuple)
	}
	m.end(tuple, rc, nil, now)
}

// A flood of distinct tuples (self-made keys, random namespaces) keeps the
// receipts at their bound, entries past their age are dropped as new ones
// arrive, and nothing stays in flight.
func TestReceiptsStayBounded(t *testing.T) {
	t.Parallel()
	m := newReceipts(time.Minute, 100)
	now := time.Now()
	for i := range 10_000 {
		submitted(t, m, fmt.Sprintf("github\x00rand-%d\x00key\x00github", i), Receipt{ClaimID: fmt.Sprint(i)}, now)
	}
	if len(m.byTuple) != 100 || m.order.Len() != 100 || len(m.inflight) != 0 {
		t.Fatalf("%d receipts and %d in flight held, want 100 and 0", len(m.byTuple), len(m.inflight))
	}
	if rc, _, lead := m.begin("github\x00rand-9999\x00key\x00github", now); lead || rc.ClaimID != "9999" {
		t.Fatalf("newest receipt lost: %+v", rc)
	}
	if _, _, lead := m.begin("github\x00rand-0\x00key\x00github", now); !lead {
		t.Fatal("oldest receipt kept past the bound")
	}
	m.end("github\x00rand-0\x00key\x00github", Receipt{}, errFailed, now)
	submitted(t, m, "github\x00late\x00key\x00github", Receipt{ClaimID: "late"}, now.Add(time.Minute))
	if len(m.byTuple) != 1 || len(m.inflight) != 0 {
		t.Fatalf("%d receipts and %d in flight after the others aged out, want 1 and 0", len(m.byTuple), len(m.inflight))
	}
}

var errFailed = fmt.Errorf("failed")

// TestFullReceiptsAndLimitersKeepMakingProgress fills the receipts and the
// rate limiters past their bounds from many goroutines at once, some
// waiting on each other's submissions in flight: every call must return.
// (Each store has one lock, taken alone; a store that took another lock
// while holding its own when full would hang here.)
func TestFullReceiptsAndLimitersKeepMakingProgress(t *testing.T) {
	t.Parallel()
	m, l := newReceipts(time.Minute, 16), newLimiters(1, 16)
	now := time.Now()
	done := make(chan struct{})
	go func() {
		defer close(done)
		var wg sync.WaitGroup
		for w := range 16 {
			wg.Go(func() {
				for i := range 500 {
					tuple := fmt.Sprintf("github\x00ns-%d\x00key\x00github", (w*500+i)%300)
					l.allow(tuple, now)
					_, f, lead := m.begin(tuple, now)
					switch {
					case lead:
						m.end(tuple, Receipt{ClaimID: tuple}, nil, now)
					case f != nil:
						<-f.done
					}
				}
			})
		}
		wg.Wait()
	}()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("full receipts and limiters made no progress for 20 s")
	}
	if len(m.byTuple) > 16 || len(m.inflight) != 0 || len(l.byKey) > 16 {
		t.Fatalf("%d receipts, %d in flight, %d limiters; want at most 16, 0, 16", len(m.byTuple), len(m.inflight), len(l.byKey))
	}
}
