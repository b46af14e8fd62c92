package controlplane

import (
	"context"
	"database/sql"
	"net/http"
	"net/netip"
	"time"

	"github.com/idnhq/idn/internal/apierror"
)

// Auth rate limits (control-plane.md, Authentication 6 and Limits): signup
// 5 attempts per client IP per hour, login 10 attempts per namespace per
// hour. An attempt is a ceremony begun (an options request). Every failed
// finish doubles a backoff, starting at backoffBase and capped at
// backoffMax, during which the key gets 429; a success clears it.
const (
	signupAttemptsPerHour = 5
	loginAttemptsPerHour  = 10
	limitWindow           = time.Hour
	backoffBase           = time.Second
	backoffMax            = 15 * time.Minute
)

// signupLimitKey keys signup limits by client address: an IPv4 address,
// or the /64 of an IPv6 one (a single client usually holds a whole /64).
func (s *Server) signupLimitKey(r *http.Request) string {
	a := s.proxy.ClientAddr(r)
	if a.Is6() {
		p, _ := a.Prefix(64)
		return "signup:" + p.String()
	}
	if !a.IsValid() {
		a = netip.IPv4Unspecified()
	}
	return "signup:" + a.String()
}

func loginLimitKey(ns string) string { return "login:" + ns }

// rateLimited is the 429 answer telling the client when to come back.
func rateLimited(wait time.Duration) *apierror.Error {
	e := *errRateLimited
	e.RetryAfter = wait
	return &e
}

// limitAttempt counts one attempt under key, allowing max per window. It
// returns how long the caller must wait instead (0: go ahead); a refused
// attempt is not counted.
func (s *Store) limitAttempt(ctx context.Context, key string, max int, now time.Time) (wait time.Duration, err error) {
	err = s.tx(ctx, func(tx *sql.Tx) error {
		st, err := s.lockLimit(ctx, tx, key, now)
		if err != nil {
			return err
		}
		if st.blockedUntil > micros(now) {
			wait = time.Duration(st.blockedUntil-micros(now)) * time.Microsecond
			return nil
		}
		if st.windowStart+limitWindow.Microseconds() <= micros(now) {
			st.windowStart, st.attempts = micros(now), 0
		}
		if st.attempts >= max {
			wait = time.Duration(st.windowStart+limitWindow.Microseconds()-micros(now)) * time.Microsecond
			return nil
		}
		_, err = tx.ExecContext(ctx, `UPDATE auth_limits SET window_start = $2, attempts = $3 WHERE limit_key = $1`,
			key, st.windowStart, st.attempts+1)
		return dbErr("count attempt", err)
	})
	return wait, err
}

// limitBlocked reports the backoff still running for key (0: none).
func (s *Store) limitBlocked(ctx context.Context, key string, now time.Time) (time.Duration, error) {
	var until int64
	err := s.db.QueryRowContext(ctx, `SELECT blocked_until FROM auth_limits WHERE limit_key = $1`, key).Scan(&until)
	if err == sql.ErrNoRows || err == nil && until <= micros(now) {
		return 0, nil
	}
	if err != nil {
		return 0, dbErr("rate limit", err)
	}
	return time.Duration(until-micros(now)) * time.Microsecond, nil
}

// limitFailure records a failed attempt under key and starts the next,
// doubled backoff.
func (s *Store) limitFailure(ctx context.Context, key string, now time.Time) error {
	return s.tx(ctx, func(tx *sql.Tx) error {
		st, err := s.lockLimit(ctx, tx, key, now)
		if err != nil {
			return err
		}
		backoff := backoffMax
		if st.failures < 20 {
			backoff = min(backoffBase<<st.failures, backoffMax)
		}
		_, err = tx.ExecContext(ctx, `UPDATE auth_limits SET failures = $2, blocked_until = $3 WHERE limit_key = $1`,
			key, st.failures+1, micros(now.Add(backoff)))
		return dbErr("record failure", err)
	})
}

// limitSuccess clears the backoff of key after a ceremony succeeded.
func (s *Store) limitSuccess(ctx context.Context, key string) error {
	_, err := s.db.ExecContext(ctx, `UPDATE auth_limits SET failures = 0, blocked_until = 0 WHERE limit_key = $1`, key)
	return dbErr("clear failures", err)
}

type limitState struct {
	windowStart, blockedUntil int64
	attempts, failures        int
}

// lockLimit returns the row of key inside tx, creating it when absent, and
// locks it on PostgreSQL (SQLite transactions are already exclusive).
func (s *Store) lockLimit(ctx context.Context, tx *sql.Tx, key string, now time.Time) (limitState, error) {
	var st limitState
	if _, err := tx.ExecContext(ctx, `INSERT INTO auth_limits (limit_key, window_start, attempts, failures, blocked_until)
		VALUES ($1, $2, 0, 0, 0) ON CONFLICT (limit_key) DO NOTHING`, key, micros(now)); err != nil {
		return st, dbErr("insert rate limit", err)
	}
	err := tx.QueryRowContext(ctx, `SELECT window_start, attempts, failures, blocked_until FROM auth_limits WHERE limit_key = $1`+s.forUpdate(),
		key).Scan(&st.windowStart, &st.attempts, &st.failures, &st.blockedUntil)
	return st, dbErr("rate limit", err)
}
