package controlplane

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/idnhq/idn/controlplane/internal/sqldb"
	"github.com/idnhq/idn/controlplane/internal/web"
	"strings"
	"time"

	"github.com/idnhq/idn/httpsig"
	"github.com/idnhq/idn/identity"
)

// reservedNamespaces are the literal segments of the API's paths that are
// valid namespace names. A namespace so named could be shadowed by a route
// (GET /v1/namespaces/claims is the feed, not the namespace "claims"), now
// or when a route is added, so no new namespace may take one. Compared in
// lower case, so a look-alike in another case is refused too.
var reservedNamespaces = map[string]bool{
	"account": true, "assets": true, "auth": true, "claims": true, "connect": true, "deliveries": true,
	"gateways": true, "pairings": true, "rpc": true,
	"did": true, "health": true, "identifiers": true, "keys": true, "live": true,
	"login": true, "logout": true, "metrics": true, "namespaces": true, "options": true,
	"passkeys": true, "ready": true, "reject-pending": true, "seed": true,
	"services": true, "sessions": true, "settings": true, "signin": true,
	"signin-link": true, "signin-links": true, "signup": true, "test": true,
	"verify": true, "webhooks": true, "well-known": true,
}

// newNamespaceProblem returns a *namespaceError saying why ns cannot name a
// new namespace, or nil: it must pass the identity rule and not be a
// reserved word.
func newNamespaceProblem(ns string) error {
	if identity.ValidNamespace(ns) != nil {
		return &namespaceError{Namespace: ns}
	}
	if reservedNamespaces[strings.ToLower(ns)] {
		return &namespaceError{Namespace: ns, Reserved: true}
	}
	return nil
}

// newID returns prefix + 32 lower-hex characters of fresh randomness.
func newID(prefix string) string {
	var b [16]byte
	rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// namespaceRecord is a namespace row plus its count of approved claims.
type namespaceRecord struct {
	Namespace    string
	Owner        string
	CreatedAt    time.Time
	UpdatedAt    time.Time
	Deactivated  time.Time // zero while active
	ActiveClaims int64
}

// ensureNamespace creates the namespace and its owning account when absent
// (used by the seed endpoint; signup in a later issue does the same with a
// passkey). An existing namespace is left untouched.
func (s *Store) ensureNamespace(ctx context.Context, ns string, now time.Time) error {
	return s.db.Tx(ctx, func(tx *sql.Tx) error {
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM namespaces WHERE namespace = $1`, ns).Scan(&n); err != nil {
			return sqldb.Err("namespace lookup", err)
		}
		if n > 0 {
			return nil
		}
		acct := newID("usr_")
		if _, err := tx.ExecContext(ctx, `INSERT INTO accounts (id, created_at) VALUES ($1, $2)`, acct, sqldb.Micros(now)); err != nil {
			return sqldb.Err("insert account", err)
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO namespaces (namespace, owner_id, created_at, updated_at) VALUES ($1, $2, $3, $3)`,
			ns, acct, sqldb.Micros(now))
		return sqldb.Err("insert namespace", err)
	})
}

func (s *Store) namespace(ctx context.Context, ns string) (namespaceRecord, error) {
	var (
		rec         namespaceRecord
		created     int64
		updated     int64
		deactivated sql.NullInt64
	)
	err := s.db.QueryRowContext(ctx, `SELECT n.owner_id, n.created_at, n.updated_at, n.deactivated_at,
			(SELECT COUNT(*) FROM claims c WHERE c.namespace = n.namespace AND c.status = 'approved')
		FROM namespaces n WHERE n.namespace = $1`, ns).Scan(&rec.Owner, &created, &updated, &deactivated, &rec.ActiveClaims)
	if errors.Is(err, sql.ErrNoRows) {
		return rec, errNamespaceNotFound
	}
	if err != nil {
		return rec, sqldb.Err("namespace", err)
	}
	rec.Namespace = ns
	rec.CreatedAt, rec.UpdatedAt, rec.Deactivated = sqldb.FromMicros(created), sqldb.FromMicros(updated), sqldb.FromNullMicros(deactivated)
	return rec, nil
}

// createSession stores a new session of ns valid until expires and returns
// its id, unless ns already has max live sessions (a *web.RetryLater wrapping
// errSessionLimit).
func (s *Store) createSession(ctx context.Context, ns string, max int, now, expires time.Time) (string, error) {
	id := newID("ses_")
	err := s.db.Tx(ctx, func(tx *sql.Tx) error {
		if err := s.lockNamespace(ctx, tx, ns); err != nil {
			return err
		}
		var (
			live     int
			earliest sql.NullInt64
		)
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*), MIN(expires_at) FROM sessions WHERE namespace = $1 AND expires_at > $2`,
			ns, sqldb.Micros(now)).Scan(&live, &earliest); err != nil {
			return sqldb.Err("count sessions", err)
		}
		if live >= max {
			return &web.RetryLater{Err: errSessionLimit, Wait: expiryWait(earliest.Int64, now)}
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO sessions (id, namespace, created_at, expires_at) VALUES ($1, $2, $3, $4)`,
			id, ns, sqldb.Micros(now), sqldb.Micros(expires))
		return sqldb.Err("insert session", err)
	})
	return id, err
}

// checkSession reports errSessionInvalid unless session sid of ns exists,
// has not expired and its namespace is active.
func (s *Store) checkSession(ctx context.Context, sid, ns string, now time.Time) error {
	var n int
	err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM sessions s JOIN namespaces n ON n.namespace = s.namespace
		WHERE s.id = $1 AND s.namespace = $2 AND s.expires_at > $3 AND n.deactivated_at IS NULL`,
		sid, ns, sqldb.Micros(now)).Scan(&n)
	if err != nil {
		return sqldb.Err("session", err)
	}
	if n == 0 {
		return errSessionInvalid
	}
	return nil
}

// nonceChecker is the database-backed httpsig.NonceChecker: a nonce is a
// row keyed by (scope, nonce) that lives until the signature carrying it
// can no longer be accepted. Every instance sharing the database sees it.
type nonceChecker struct {
	store *Store
	now   func() time.Time
}

var _ httpsig.NonceChecker = nonceChecker{}

// CheckNonce records nonce in scope until the given time. A nonce already
// recorded and not yet expired is a replay: the error wraps
// httpsig.ErrReplayDetected. The insert is atomic (ON CONFLICT DO NOTHING on
// the primary key), so two instances racing on one nonce admit exactly one.
func (c nonceChecker) CheckNonce(ctx context.Context, scope, nonce string, until time.Time) error {
	res, err := c.store.db.Exec(ctx, `INSERT INTO nonces (scope, nonce, expires_at) VALUES ($1, $2, $3)
		ON CONFLICT (scope, nonce) DO NOTHING`, scope, nonce, sqldb.Micros(until))
	if err != nil {
		return sqldb.Err("insert nonce", err)
	}
	if n, _ := res.RowsAffected(); n == 1 {
		return nil
	}
	// A leftover row whose window has closed (cleanup not yet run) may be
	// taken over; the conditional UPDATE keeps that atomic too.
	res, err = c.store.db.Exec(ctx, `UPDATE nonces SET expires_at = $3 WHERE scope = $1 AND nonce = $2 AND expires_at <= $4`,
		scope, nonce, sqldb.Micros(until), sqldb.Micros(c.now()))
	if err != nil {
		return sqldb.Err("refresh nonce", err)
	}
	if n, _ := res.RowsAffected(); n == 1 {
		return nil
	}
	return fmt.Errorf("controlplane: nonce %q already used: %w", nonce, httpsig.ErrReplayDetected)
}

// cleanup deletes expired nonces and sessions.
func (s *Store) cleanup(ctx context.Context, now time.Time) error {
	if _, err := s.db.Exec(ctx, `DELETE FROM nonces WHERE expires_at <= $1`, sqldb.Micros(now)); err != nil {
		return sqldb.Err("delete nonces", err)
	}
	_, err := s.db.Exec(ctx, `DELETE FROM sessions WHERE expires_at <= $1`, sqldb.Micros(now))
	return sqldb.Err("delete sessions", err)
}
