package ownerauth

import (
	"context"
	"database/sql"
	"errors"
	"github.com/idnhq/idn/controlplane/internal/sqldb"
	"net/http"
	"time"
)

// Step-up: what a stolen session cookie cannot do.
//
// Adding or removing a passkey and deleting the account need the session's
// last passkey assertion (login or POST /v1/auth/verify) to be
//
//   - at most RecentVerification old;
//   - made after the account's last credential change, so one verification
//     authorises one change: a thief who catches a freshly verified session
//     can enrol a passkey, but cannot then also remove the owner's;
//   - made with an established passkey: the account's first one, or one
//     registered at least NewPasskeyHold ago. A passkey the thief enrolled
//     cannot confirm anything, neither in the stolen session nor in a
//     session it logs in to itself, until the owner, alerted by mail, has
//     had a day to remove it (with their own passkey) and to end the
//     thief's sessions.
//
// A namespace without any passkey (created by the test seed) may add its
// first one with the session alone: there is nothing to verify with.
const (
	RecentVerification = 5 * time.Minute
	NewPasskeyHold     = 24 * time.Hour
)

// stepUp is what a session's step-up check reads.
type stepUp struct {
	verifiedAt        time.Time
	verifiedVersion   int64
	credentialVersion int64
	verifierFound     bool      // the verifying passkey is still registered
	verifierTrusted   time.Time // when that passkey became established
}

// check returns nil when the session may change credentials at now, else
// a *reauthError saying why.
func (st stepUp) check(now time.Time) error {
	reason := func(why string) error { return &reauthError{Reason: why} }
	switch {
	case st.verifiedAt.IsZero():
		return reason("not_verified")
	case now.Sub(st.verifiedAt) > RecentVerification:
		return reason("verification_expired")
	case st.verifiedVersion != st.credentialVersion:
		return reason("credentials_changed_since_verification")
	case !st.verifierFound:
		return reason("verifying_passkey_removed")
	case st.verifierTrusted.After(st.verifiedAt):
		return &reauthError{Reason: "passkey_too_new", TrustedFrom: st.verifierTrusted}
	}
	return nil
}

// queryRower is a *sql.DB or a *sql.Tx.
type queryRower interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// loadStepUp reads the step-up state of session sid of ns through q.
func loadStepUp(ctx context.Context, q queryRower, ns, sid string) (stepUp, error) {
	var (
		st       stepUp
		verified sql.NullInt64
		trusted  sql.NullInt64
	)
	err := q.QueryRowContext(ctx, `SELECT s.verified_at, s.verified_version, a.credential_version, p.trusted_from
		FROM sessions s
		JOIN namespaces n ON n.namespace = s.namespace
		JOIN accounts a ON a.id = n.owner_id
		LEFT JOIN passkeys p ON p.id = s.verified_passkey AND p.namespace = s.namespace
		WHERE s.id = $1 AND s.namespace = $2`, sid, ns).Scan(&verified, &st.verifiedVersion, &st.credentialVersion, &trusted)
	if errors.Is(err, sql.ErrNoRows) {
		return st, errSessionInvalid
	}
	if err != nil {
		return st, sqldb.Err("step-up state", err)
	}
	st.verifiedAt = sqldb.FromNullMicros(verified)
	st.verifierFound, st.verifierTrusted = trusted.Valid, sqldb.FromNullMicros(trusted)
	return st, nil
}

// requireStepUp answers 403 REAUTH_REQUIRED (and returns false) unless the
// session may change credentials now.
func (a *Accounts) requireStepUp(w http.ResponseWriter, r *http.Request, sess ownerSession) bool {
	st, err := loadStepUp(r.Context(), a.store.db, sess.namespace, sess.id)
	if err != nil {
		a.kit.Error(w, r, answer(err))
		return false
	}
	if err := st.check(a.kit.Now()); err != nil {
		a.kit.Error(w, r, answer(err))
		return false
	}
	return true
}

// markVerified records that the owner of session sid has just completed an
// assertion with passkey pk, at the account's current credential version.
func (s store) markVerified(ctx context.Context, sid, pk string, now time.Time) error {
	_, err := s.db.Exec(ctx, `UPDATE sessions SET verified_at = $2, verified_passkey = $3,
		verified_version = (SELECT a.credential_version FROM accounts a JOIN namespaces n ON n.owner_id = a.id
			WHERE n.namespace = sessions.namespace)
		WHERE id = $1`, sid, sqldb.Micros(now), pk)
	return sqldb.Err("mark session verified", err)
}

// credentialChange runs change inside a transaction that holds the
// namespace's lock, after the step-up check of session sid (skipped when
// the namespace has no passkey yet, and the change is then the first
// passkey). change gets the number of passkeys the namespace has; the
// account's credential version is bumped when it succeeds, which uses up
// every session's verification.
func (s store) credentialChange(ctx context.Context, ns, sid string, now time.Time, change func(tx *sql.Tx, passkeys int) error) error {
	return s.db.Tx(ctx, func(tx *sql.Tx) error {
		var owner string
		err := tx.QueryRowContext(ctx, `SELECT owner_id FROM namespaces WHERE namespace = $1`+s.db.ForUpdate(), ns).Scan(&owner)
		if errors.Is(err, sql.ErrNoRows) {
			return errNamespaceNotFound
		}
		if err != nil {
			return sqldb.Err("namespace", err)
		}
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM passkeys WHERE namespace = $1`, ns).Scan(&n); err != nil {
			return sqldb.Err("count passkeys", err)
		}
		if n > 0 {
			st, err := loadStepUp(ctx, tx, ns, sid)
			if err != nil {
				return err
			}
			if err := st.check(now); err != nil {
				return err
			}
		}
		if err := change(tx, n); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `UPDATE accounts SET credential_version = credential_version + 1 WHERE id = $1`, owner)
		return sqldb.Err("bump credential version", err)
	})
}
