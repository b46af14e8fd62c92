package limit

import (
	"sync"
	"time"
)

// Breaker is the per-connection circuit breaker: closed → open after
// Threshold consecutive upstream failures; open answers at once until the
// Cooldown ends; then exactly one probe goes through (half-open); its
// success closes the breaker, its failure reopens it for a new Cooldown.
type Breaker struct {
	Threshold int              // consecutive failures that open it; zero or less disables it
	Cooldown  time.Duration    // how long it stays open before a probe
	Now       func() time.Time // the clock

	mu        sync.Mutex
	failures  int
	open      bool
	openUntil time.Time
	probing   bool // a half-open probe is in flight
}

// probeRetryAfter is what callers refused during a half-open probe are told
// to wait: the probe's outcome is typically known within this.
const probeRetryAfter = time.Second

// Allow reports whether an upstream operation may start. When it may not,
// retryAfter says how long the caller should wait. probe is true for the one
// half-open probe; the caller must report its outcome with Done.
func (b *Breaker) Allow() (ok, probe bool, retryAfter time.Duration) {
	if b.Threshold <= 0 {
		return true, false, 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.open {
		return true, false, 0
	}
	if b.probing {
		return false, false, probeRetryAfter
	}
	if wait := b.openUntil.Sub(b.Now()); wait > 0 {
		return false, false, wait
	}
	b.probing = true
	return true, true, 0
}

// Done records the outcome of an operation that Allow let through.
func (b *Breaker) Done(probe, success bool) {
	if b.Threshold <= 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if probe {
		b.probing = false
		if success {
			b.open, b.failures = false, 0
		} else {
			b.openUntil = b.Now().Add(b.Cooldown)
		}
		return
	}
	if b.open {
		// A straggler that started before the breaker opened decides nothing.
		return
	}
	if success {
		b.failures = 0
		return
	}
	b.failures++
	if b.failures >= b.Threshold {
		b.open = true
		b.openUntil = b.Now().Add(b.Cooldown)
	}
}

// Abandon releases an operation allow let through whose outcome will never
// be known (its caller gave up); it decides nothing, and a probe's slot is
// freed for the next caller.
func (b *Breaker) Abandon(probe bool) {
	if b.Threshold <= 0 || !probe {
		return
	}
	b.mu.Lock()
	b.probing = false
	b.mu.Unlock()
}
