// Package stall tells whether a phase of request handling that always ends
// quickly has stopped ending: a wedged lock, a goroutine waiting forever.
// The gateway's readiness reports it, so an orchestrator sees a gateway
// whose request path is stuck even though its liveness endpoint, which
// takes no part in that path, still answers.
//
// It works as a grace-period detector. Requests entering the phase are
// counted in the current of two generations. Each Check closes the current
// generation once the one before it has drained; a closed generation that
// still holds requests a Timeout after it was closed holds requests that
// entered before that moment, so they have been in the phase for at least
// Timeout. Entering and leaving cost one atomic add each and take no lock.
package stall

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Detector watches one phase. Its zero value is ready to use with a
// Timeout of DefaultTimeout.
type Detector struct {
	// Timeout is how long a request may stay in the phase before the phase
	// counts as stuck. Zero means DefaultTimeout.
	Timeout time.Duration

	gen    atomic.Uint64
	counts [2]atomic.Int64

	mu     sync.Mutex // serialises Check
	closed time.Time  // when generation gen-1 was closed
}

// DefaultTimeout is the zero Detector's Timeout.
const DefaultTimeout = 15 * time.Second

// Ticket is one request in the phase; Leave it exactly once.
type Ticket struct {
	d   *Detector
	gen uint64
}

// Enter counts a request entering the phase.
func (d *Detector) Enter() Ticket {
	g := d.gen.Load()
	d.counts[g&1].Add(1)
	return Ticket{d, g}
}

// Leave counts the request leaving the phase.
func (t Ticket) Leave() { t.d.counts[t.gen&1].Add(-1) }

// Check returns an error when requests have been in the phase for at least
// Timeout. It must be called now and then (a readiness probe does) for the
// generations to advance; a request that got stuck is reported by the
// first Check at least Timeout after the Check that followed its entry.
func (d *Detector) Check(now time.Time) error {
	timeout := d.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	g := d.gen.Load()
	if n := d.counts[(g+1)&1].Load(); n > 0 {
		if waited := now.Sub(d.closed); waited >= timeout {
			return fmt.Errorf("stall: %d still in the phase after %s", n, waited.Truncate(time.Second))
		}
		return nil
	}
	// The closed generation drained: close the current one.
	d.gen.Add(1)
	d.closed = now
	return nil
}
