package stall

import (
	"sync"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func TestDetector(t *testing.T) {
	const timeout = 10 * time.Second
	// Each step acts at t0+at: enter a request (it gets the next number),
	// leave request n, or check and expect stuck or not.
	type step struct {
		at    time.Duration
		op    string // "enter", "leave", "check"
		n     int    // request to leave
		stuck bool
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"idle phase is never stuck", []step{
			{0, "check", 0, false}, {time.Hour, "check", 0, false}, {2 * time.Hour, "check", 0, false},
		}},
		{"wedged request is reported a timeout after the check that closed its generation", []step{
			{0, "enter", 0, false},
			{time.Second, "check", 0, false},
			{time.Second + timeout - 1, "check", 0, false},
			{time.Second + timeout, "check", 0, true},
			{time.Hour, "check", 0, true},
		}},
		{"wedged request entered after a check is reported one generation later", []step{
			{0, "check", 0, false},
			{time.Second, "enter", 0, false},
			{time.Minute, "check", 0, false}, // closes the generation it is in
			{time.Minute + timeout, "check", 0, true},
		}},
		{"slow request that ends is not stuck", []step{
			{0, "enter", 0, false},
			{time.Second, "check", 0, false},
			{timeout - time.Second, "leave", 0, false},
			{time.Hour, "check", 0, false},
		}},
		{"stuck phase recovers once the request leaves", []step{
			{0, "enter", 0, false},
			{0, "check", 0, false},
			{timeout, "check", 0, true},
			{timeout, "leave", 0, false},
			{timeout, "check", 0, false},
		}},
		{"new traffic does not hide a wedged request", []step{
			{0, "enter", 0, false},
			{0, "check", 0, false},
			{time.Second, "enter", 0, false},
			{time.Second, "leave", 1, false},
			{2 * time.Second, "check", 0, false},
			{3 * time.Second, "enter", 0, false},
			{3 * time.Second, "leave", 2, false},
			{timeout, "check", 0, true},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := &Detector{Timeout: timeout}
			var tickets []Ticket
			for i, st := range tt.steps {
				switch st.op {
				case "enter":
					tickets = append(tickets, d.Enter())
				case "leave":
					tickets[st.n].Leave()
				case "check":
					if err := d.Check(t0.Add(st.at)); (err != nil) != st.stuck {
						t.Fatalf("step %d: Check = %v, want stuck %v", i, err, st.stuck)
					}
				}
			}
		})
	}
}

func TestZeroDetectorUsesDefaultTimeout(t *testing.T) {
	var d Detector
	d.Enter()
	d.Check(t0)
	if err := d.Check(t0.Add(DefaultTimeout - time.Nanosecond)); err != nil {
		t.Fatalf("before DefaultTimeout: %v", err)
	}
	if err := d.Check(t0.Add(DefaultTimeout)); err == nil {
		t.Fatal("at DefaultTimeout: not stuck")
	}
}

// TestConcurrentEnterLeaveAndCheck runs requests that always leave against
// checks that keep closing generations; once they have all left, the
// counts are back to zero and the phase is not stuck.
func TestConcurrentEnterLeaveAndCheck(t *testing.T) {
	d := &Detector{Timeout: time.Second}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
					d.Enter().Leave()
				}
			}
		})
	}
	now := t0
	for range 2000 {
		_ = d.Check(now) // a request preempted mid-phase may read as stuck here
		now = now.Add(100 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	if err := d.Check(now); err != nil {
		t.Fatal(err)
	}
	if err := d.Check(now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if a, b := d.counts[0].Load(), d.counts[1].Load(); a != 0 || b != 0 {
		t.Fatalf("counts %d, %d after every request left", a, b)
	}
}
