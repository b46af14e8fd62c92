package ownerauth

import (
	"context"
	"database/sql"
	"github.com/idnhq/idn/controlplane/internal/sqldb"
	"github.com/idnhq/idn/controlplane/internal/web"
	"net/http"
	"time"

	"github.com/idnhq/idn/apierror"
)

// Auth rate limits. Every counter is keyed by the client address (an IPv4
// address, or the /64 of an IPv6 one), so no stranger can lock an owner out
// from elsewhere: a passkey assertion cannot be guessed, so the limits only
// bound the work an address can cause.
//
//   - Ceremony options (signup, login, verification, adding a passkey) are
//     not attempts: an address may ask for OptionsPerAddressPerHour of them.
//   - Signup: SignupsPerAddressPerHour accounts per address per hour.
//   - Failed assertions (login, verification) back off exponentially per
//     namespace and address, from backoffBase doubling up to backoffMax; a
//     success clears that backoff. An address's failed assertions across
//     all namespaces are capped at AssertFailuresPerAddressPerHour, so
//     spraying made-up namespaces gains nothing either.
//   - Failed signups back off per address the same way.
//
// The counters live in the database, so instances sharing PostgreSQL share
// them.
const (
	SignupsPerAddressPerHour        = 5
	OptionsPerAddressPerHour        = 200
	AssertFailuresPerAddressPerHour = 100
	limitWindow                     = time.Hour
	backoffBase                     = time.Second
	backoffMax                      = 15 * time.Minute
)

func (l *limiter) signupLimitKey(r *http.Request) string  { return "signup:" + l.kit.ClientKey(r) }
func (l *limiter) optionsLimitKey(r *http.Request) string { return "options:" + l.kit.ClientKey(r) }
func (l *limiter) failuresLimitKey(r *http.Request) string {
	return "assert-failures:" + l.kit.ClientKey(r)
}

// assertLimitKey keys the backoff of failed assertions for ns from the
// request's client ('@' never occurs in a namespace).
func (l *limiter) assertLimitKey(r *http.Request, ns string) string {
	return "assert:" + ns + "@" + l.kit.ClientKey(r)
}

// limitAttempt counts one attempt under key, allowing max per window. It
// returns how long the caller must wait instead (0: go ahead); a refused
// attempt is not counted.
func (s store) limitAttempt(ctx context.Context, key string, max int, now time.Time) (wait time.Duration, err error) {
	err = s.db.Tx(ctx, func(tx *sql.Tx) error {
		st, err := s.lockLimit(ctx, tx, key, now)
		if err != nil {
			return err
		}
		if wait = st.wait(max, now); wait > 0 {
			return nil
		}
		if st.windowStart+limitWindow.Microseconds() <= sqldb.Micros(now) {
			st.windowStart, st.attempts = sqldb.Micros(now), 0
		}
		_, err = tx.ExecContext(ctx, `UPDATE auth_limits SET window_start = $2, attempts = $3 WHERE limit_key = $1`,
			key, st.windowStart, st.attempts+1)
		return sqldb.Err("count attempt", err)
	})
	return wait, err
}

// limitWait reports how long key still refuses: its backoff, or the rest of
// its window once max attempts were counted in it (max 0: no window cap).
// It counts nothing and creates no row.
func (s store) limitWait(ctx context.Context, key string, max int, now time.Time) (time.Duration, error) {
	var st limitState
	err := s.db.QueryRowContext(ctx, `SELECT window_start, attempts, failures, blocked_until FROM auth_limits WHERE limit_key = $1`, key).
		Scan(&st.windowStart, &st.attempts, &st.failures, &st.blockedUntil)
	if err == sql.ErrNoRows {
		return 0, nil
	}
	if err != nil {
		return 0, sqldb.Err("rate limit", err)
	}
	return st.wait(max, now), nil
}

// limitFailure records a failed attempt under key and starts the next,
// doubled backoff.
func (s store) limitFailure(ctx context.Context, key string, now time.Time) error {
	return s.db.Tx(ctx, func(tx *sql.Tx) error {
		st, err := s.lockLimit(ctx, tx, key, now)
		if err != nil {
			return err
		}
		backoff := backoffMax
		if st.failures < 20 {
			backoff = min(backoffBase<<st.failures, backoffMax)
		}
		_, err = tx.ExecContext(ctx, `UPDATE auth_limits SET failures = $2, blocked_until = $3 WHERE limit_key = $1`,
			key, st.failures+1, sqldb.Micros(now.Add(backoff)))
		return sqldb.Err("record failure", err)
	})
}

// limitSuccess clears the backoff of key after a ceremony succeeded.
func (s store) limitSuccess(ctx context.Context, key string) error {
	_, err := s.db.Exec(ctx, `UPDATE auth_limits SET failures = 0, blocked_until = 0 WHERE limit_key = $1`, key)
	return sqldb.Err("clear failures", err)
}

type limitState struct {
	windowStart, blockedUntil int64
	attempts, failures        int
}

// wait is how long the key refuses at now, given max attempts per window
// (0: uncapped).
func (st limitState) wait(max int, now time.Time) time.Duration {
	t := sqldb.Micros(now)
	if st.blockedUntil > t {
		return time.Duration(st.blockedUntil-t) * time.Microsecond
	}
	if end := st.windowStart + limitWindow.Microseconds(); max > 0 && st.attempts >= max && end > t {
		return time.Duration(end-t) * time.Microsecond
	}
	return 0
}

// lockLimit returns the row of key inside tx, creating it when absent, and
// locks it on PostgreSQL (SQLite transactions are already exclusive).
func (s store) lockLimit(ctx context.Context, tx *sql.Tx, key string, now time.Time) (limitState, error) {
	var st limitState
	if _, err := tx.ExecContext(ctx, `INSERT INTO auth_limits (limit_key, window_start, attempts, failures, blocked_until)
		VALUES ($1, $2, 0, 0, 0) ON CONFLICT (limit_key) DO NOTHING`, key, sqldb.Micros(now)); err != nil {
		return st, sqldb.Err("insert rate limit", err)
	}
	err := tx.QueryRowContext(ctx, `SELECT window_start, attempts, failures, blocked_until FROM auth_limits WHERE limit_key = $1`+s.db.ForUpdate(),
		key).Scan(&st.windowStart, &st.attempts, &st.failures, &st.blockedUntil)
	return st, sqldb.Err("rate limit", err)
}

// checkAttempt counts an attempt under key; false means the answer (429 or
// an error) has been written.
func (l *limiter) checkAttempt(w http.ResponseWriter, r *http.Request, key string, max int) bool {
	wait, err := l.store.limitAttempt(r.Context(), key, max, l.kit.Now())
	return l.limitAnswer(w, r, wait, err)
}

// checkWait refuses the request while key is backing off or (max > 0) has
// used up its window; it counts nothing.
func (l *limiter) checkWait(w http.ResponseWriter, r *http.Request, key string, max int) bool {
	wait, err := l.store.limitWait(r.Context(), key, max, l.kit.Now())
	return l.limitAnswer(w, r, wait, err)
}

func (l *limiter) limitAnswer(w http.ResponseWriter, r *http.Request, wait time.Duration, err error) bool {
	if err != nil {
		l.kit.Error(w, r, answer(err))
		return false
	}
	if wait > 0 {
		apierror.Write(w, r, web.RateLimited(wait))
		return false
	}
	return true
}

// checkOptions bounds the ceremonies an address may begin.
func (l *limiter) checkOptions(w http.ResponseWriter, r *http.Request) bool {
	return l.checkAttempt(w, r, l.optionsLimitKey(r), OptionsPerAddressPerHour)
}
