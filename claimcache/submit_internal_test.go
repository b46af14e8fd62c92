package claimcache

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/idnhq/idn/kit/keyrate"
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

// One namespace submitting past its share of the receipts forgets its own
// oldest, never another namespace's.
func TestReceiptsFloodOfOneNamespaceForgetsOnlyItsOwn(t *testing.T) {
	t.Parallel()
	m := newReceipts(time.Minute, 10)
	m.perNamespace = 3
	now := time.Now()
	victim := "github\x00alice\x00key-a\x00github"
	submitted(t, m, victim, Receipt{ClaimID: "alice's"}, now)
	for i := range 1000 {
		submitted(t, m, fmt.Sprintf("github\x00mallory\x00key-%d\x00github", i), Receipt{ClaimID: fmt.Sprint(i)}, now)
	}
	if rc, _, lead := m.begin(victim, now); lead || rc.ClaimID != "alice's" {
		t.Fatalf("the victim's receipt was pushed out by another namespace's flood: %+v", rc)
	}
	if len(m.byTuple) != 4 || m.order.Len() != 4 || m.byNamespace["mallory"].Len() != 3 {
		t.Fatalf("%d receipts held (%d of the flooding namespace), want 4 (3)", len(m.byTuple), m.byNamespace["mallory"].Len())
	}
	if rc, _, lead := m.begin("github\x00mallory\x00key-999\x00github", now); lead || rc.ClaimID != "999" {
		t.Fatalf("the flooding namespace's newest receipt lost: %+v", rc)
	}
}

// TestFullReceiptsAndLimitersKeepMakingProgress fills the receipts and the
// rate limiters past their bounds from many goroutines at once, some
// waiting on each other's submissions in flight: every call must return.
// (Each store has one lock, taken alone; a store that took another lock
// while holding its own when full would hang here.)
func TestFullReceiptsAndLimitersKeepMakingProgress(t *testing.T) {
	t.Parallel()
	m, l := newReceipts(time.Minute, 16), keyrate.New(1, 16)
	now := time.Now()
	done := make(chan struct{})
	go func() {
		defer close(done)
		var wg sync.WaitGroup
		for w := range 16 {
			wg.Go(func() {
				for i := range 500 {
					tuple := fmt.Sprintf("github\x00ns-%d\x00key\x00github", (w*500+i)%300)
					l.Take(tuple, now)
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
	if len(m.byTuple) > 16 || len(m.inflight) != 0 {
		t.Fatalf("%d receipts, %d in flight; want at most 16, 0", len(m.byTuple), len(m.inflight))
	}
}
