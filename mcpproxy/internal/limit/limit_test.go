package limit

import (
	"fmt"
	"sync"
	"testing"
	"time"
)

func TestLimiterSetIsBounded(t *testing.T) {
	t.Parallel()
	now := time.Unix(1000, 0)
	s := NewLimiter(1, 2)
	for _, ns := range []string{"a", "b"} {
		if ok, _ := s.Allow("c1", ns, now); !ok {
			t.Fatalf("first call of %s refused", ns)
		}
	}
	if ok, wait := s.Allow("c1", "flood", now); ok || wait <= 0 {
		t.Fatalf("new key admitted into a full map of busy buckets (ok=%v wait=%v)", ok, wait)
	}
	if len(s.limiters) != 2 {
		t.Fatalf("map grew to %d", len(s.limiters))
	}
	later := now.Add(time.Minute) // a and b have refilled: idle, droppable
	if ok, _ := s.Allow("c1", "flood", later); !ok {
		t.Fatal("new key refused after idle buckets could be dropped")
	}
	if ok, _ := s.Allow("c2", "a", now); !ok {
		t.Fatal("keys are per connection and namespace: another connection shares a's bucket")
	}
}

func TestLimiterDisabled(t *testing.T) {
	t.Parallel()
	s := NewLimiter(0, 1)
	for range 100 {
		if ok, _ := s.Allow("c", "n", time.Unix(0, 0)); !ok {
			t.Fatal("disabled limiter refused")
		}
	}
}

func TestBreakerDisabled(t *testing.T) {
	t.Parallel()
	b := &Breaker{Threshold: 0, Cooldown: time.Second, Now: time.Now}
	for range 10 {
		ok, probe, _ := b.Allow()
		if !ok || probe {
			t.Fatal("disabled breaker refused")
		}
		b.Done(probe, false)
	}
}

func TestBreakerStragglerDecidesNothing(t *testing.T) {
	t.Parallel()
	now := time.Unix(0, 0)
	b := &Breaker{Threshold: 1, Cooldown: time.Second, Now: func() time.Time { return now }}
	ok1, p1, _ := b.Allow() // a slow call starts while closed
	ok2, p2, _ := b.Allow()
	if !ok1 || !ok2 {
		t.Fatal("closed breaker refused")
	}
	b.Done(p2, false) // opens
	b.Done(p1, true)  // the straggler's success must not close it
	if ok, _, wait := b.Allow(); ok || wait != time.Second {
		t.Fatalf("allow = %v, %v; want refused for the cooldown", ok, wait)
	}
}

// TestFullLimiterSetKeepsMakingProgress has many goroutines take tokens for
// more keys than the set holds, so that most calls find it full and sweep:
// every call must return. (The set has one lock, taken alone.)
func TestFullLimiterSetKeepsMakingProgress(t *testing.T) {
	t.Parallel()
	s := NewLimiter(1, 8)
	start := time.Unix(1000, 0)
	done := make(chan struct{})
	go func() {
		defer close(done)
		var wg sync.WaitGroup
		for w := range 16 {
			wg.Go(func() {
				for i := range 500 {
					// Time moves a second per call, so buckets refill and
					// sweeps drop some while others are being filled.
					s.Allow("c", fmt.Sprint((w+i)%64), start.Add(time.Duration(i)*time.Second))
				}
			})
		}
		wg.Wait()
	}()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("a full limiter set made no progress for 20 s")
	}
	if len(s.limiters) > 8 {
		t.Fatalf("set grew to %d", len(s.limiters))
	}
}
