package limit

import (
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Limiter is the tool-call rate limit per connection_id + namespace: a
// token bucket refilling perMinute tokens a minute with a burst of
// perMinute. The map is bounded: when it is full, buckets that are full
// again (idle keys, indistinguishable from new ones) are dropped; if none
// is, new keys are refused rather than letting memory grow, which fails
// closed.
type Limiter struct {
	perMinute int
	maxKeys   int

	mu       sync.Mutex
	limiters map[limiterKey]*rate.Limiter
}

type limiterKey struct{ connection, namespace string }

// Allow takes one token for the key at now. When none is available it
// returns how long until one is.
func (s *Limiter) Allow(connection, namespace string, now time.Time) (bool, time.Duration) {
	if s.perMinute <= 0 {
		return true, 0
	}
	key := limiterKey{connection, namespace}
	s.mu.Lock()
	lim, ok := s.limiters[key]
	if !ok {
		if len(s.limiters) >= s.maxKeys {
			s.sweep(now)
		}
		if len(s.limiters) >= s.maxKeys {
			s.mu.Unlock()
			return false, time.Minute / time.Duration(s.perMinute)
		}
		lim = rate.NewLimiter(rate.Limit(float64(s.perMinute)/60), s.perMinute)
		s.limiters[key] = lim
	}
	s.mu.Unlock()
	r := lim.ReserveN(now, 1)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return false, d
	}
	return true, 0
}

// sweep drops buckets that have refilled completely. Callers hold s.mu.
func (s *Limiter) sweep(now time.Time) {
	for k, lim := range s.limiters {
		if lim.TokensAt(now) >= float64(lim.Burst()) {
			delete(s.limiters, k)
		}
	}
}

// NewLimiter returns a Limiter of perMinute calls a minute per key (zero or
// less: no limit) that holds at most maxKeys buckets.
func NewLimiter(perMinute, maxKeys int) *Limiter {
	return &Limiter{perMinute: perMinute, maxKeys: maxKeys, limiters: make(map[limiterKey]*rate.Limiter)}
}
