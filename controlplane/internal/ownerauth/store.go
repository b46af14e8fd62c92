package ownerauth

import (
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/idnhq/idn/controlplane/internal/sqldb"
	"github.com/idnhq/idn/controlplane/internal/web"
	"time"

	"github.com/go-webauthn/webauthn/protocol/webauthncbor"
	"github.com/go-webauthn/webauthn/protocol/webauthncose"
	"github.com/go-webauthn/webauthn/webauthn"
)

// Ceremony kinds a challenge is bound to.
const (
	ceremonySignup  = "signup"
	ceremonyLogin   = "login"
	ceremonyPasskey = "passkey"
	ceremonyVerify  = "verify"
)

// saveChallenge stores the server side of a ceremony until expires.
func (s store) saveChallenge(ctx context.Context, kind, ns, sid string, sd *webauthn.SessionData, expires time.Time) error {
	data, err := json.Marshal(sd)
	if err != nil {
		return fmt.Errorf("controlplane: encode challenge: %w", err)
	}
	_, err = s.db.Exec(ctx, `INSERT INTO webauthn_challenges (challenge, kind, namespace, session_id, data, expires_at)
		VALUES ($1, $2, $3, $4, $5, $6)`, sd.Challenge, kind, ns, sid, string(data), sqldb.Micros(expires))
	return sqldb.Err("insert challenge", err)
}

// takeChallenge consumes a challenge of the given kind, namespace and
// session: the DELETE makes it single-use even across instances. A
// challenge issued for another kind, namespace or session is not found
// (and stays usable by its own ceremony).
func (s store) takeChallenge(ctx context.Context, challenge, kind, ns, sid string, now time.Time) (webauthn.SessionData, error) {
	var (
		sd      webauthn.SessionData
		data    string
		expires int64
	)
	err := s.db.WriteRow(ctx, `DELETE FROM webauthn_challenges
		WHERE challenge = $1 AND kind = $2 AND namespace = $3 AND session_id = $4 RETURNING data, expires_at`,
		challenge, kind, ns, sid).Scan(&data, &expires)
	if errors.Is(err, sql.ErrNoRows) {
		return sd, errChallengeInvalid
	}
	if err != nil {
		return sd, sqldb.Err("take challenge", err)
	}
	if expires <= sqldb.Micros(now) {
		return sd, errChallengeExpired
	}
	if err := json.Unmarshal([]byte(data), &sd); err != nil {
		return sd, fmt.Errorf("controlplane: decode stored challenge: %w", err)
	}
	return sd, nil
}

// passkey is a stored WebAuthn credential of a namespace's owner.
type passkey struct {
	ID         string
	Name       string
	Algorithm  int64
	CreatedAt  time.Time
	LastUsedAt time.Time
	Credential webauthn.Credential
}

// store is the accounts' and sessions' view of the database: accounts,
// passkeys, WebAuthn challenges, sessions and rate-limit counters.
type store struct{ db *sqldb.DB }

// credentialID is the stored (base64url) form of a raw credential id.
func credentialID(raw []byte) string { return base64.RawURLEncoding.EncodeToString(raw) }

const passkeyColumns = `id, name, algorithm, sign_count, credential, created_at, last_used_at`

func scanPasskey(row interface{ Scan(...any) error }) (passkey, error) {
	var (
		p       passkey
		count   int64
		cred    string
		created int64
		used    sql.NullInt64
	)
	if err := row.Scan(&p.ID, &p.Name, &p.Algorithm, &count, &cred, &created, &used); err != nil {
		return p, err
	}
	if err := json.Unmarshal([]byte(cred), &p.Credential); err != nil {
		return p, fmt.Errorf("controlplane: decode passkey %s: %w", p.ID, err)
	}
	// The column is the authority on the counter; a clone warning is never
	// carried over, it is decided per assertion.
	p.Credential.Authenticator.SignCount = uint32(count)
	p.Credential.Authenticator.CloneWarning = false
	p.CreatedAt, p.LastUsedAt = sqldb.FromMicros(created), sqldb.FromNullMicros(used)
	return p, nil
}

// passkeys returns the passkeys of ns, oldest first.
func (s store) passkeys(ctx context.Context, ns string) ([]passkey, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+passkeyColumns+` FROM passkeys WHERE namespace = $1 ORDER BY created_at, id`, ns)
	if err != nil {
		return nil, sqldb.Err("list passkeys", err)
	}
	defer rows.Close()
	out := []passkey{}
	for rows.Next() {
		p, err := scanPasskey(rows)
		if err != nil {
			return nil, sqldb.Err("scan passkey", err)
		}
		out = append(out, p)
	}
	return out, sqldb.Err("list passkeys", rows.Err())
}

// insertPasskey stores cred as a passkey of ns inside tx, able to confirm
// credential changes from trusted on (see NewPasskeyHold).
func insertPasskey(ctx context.Context, tx *sql.Tx, ns, name string, cred *webauthn.Credential, now, trusted time.Time) (passkey, error) {
	data, err := json.Marshal(cred)
	if err != nil {
		return passkey{}, fmt.Errorf("controlplane: encode passkey: %w", err)
	}
	// The algorithm is read from the verified COSE key, not from the
	// client's optional publicKeyAlgorithm member.
	var key webauthncose.PublicKeyData
	if err := webauthncbor.Unmarshal(cred.PublicKey, &key); err != nil {
		return passkey{}, fmt.Errorf("controlplane: decode passkey public key: %w", err)
	}
	p := passkey{ID: sqldb.NewID("pk_"), Name: name, Algorithm: key.Algorithm,
		CreatedAt: now.UTC().Truncate(time.Microsecond), Credential: *cred}
	_, err = tx.ExecContext(ctx, `INSERT INTO passkeys (id, namespace, credential_id, name, algorithm, sign_count, credential, created_at, trusted_from)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
		p.ID, ns, credentialID(cred.ID), name, p.Algorithm, int64(cred.Authenticator.SignCount), string(data), sqldb.Micros(now), sqldb.Micros(trusted))
	if sqldb.IsUniqueViolation(err) {
		return p, errPasskeyExists
	}
	return p, sqldb.Err("insert passkey", err)
}

// createAccount registers ns for a new account whose first passkey is
// cred. A namespace that exists, even deactivated, is never taken again.
func (s store) createAccount(ctx context.Context, ns, accountID, name string, cred *webauthn.Credential, now time.Time) (passkey, error) {
	var p passkey
	err := s.db.Tx(ctx, func(tx *sql.Tx) error {
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM namespaces WHERE namespace = $1`, ns).Scan(&n); err != nil {
			return sqldb.Err("namespace lookup", err)
		}
		if n > 0 {
			return errNamespaceTaken
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO accounts (id, created_at) VALUES ($1, $2)`, accountID, sqldb.Micros(now)); err != nil {
			return sqldb.Err("insert account", err)
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO namespaces (namespace, owner_id, created_at, updated_at) VALUES ($1, $2, $3, $3)`,
			ns, accountID, sqldb.Micros(now))
		if sqldb.IsUniqueViolation(err) {
			return errNamespaceTaken
		}
		if err != nil {
			return sqldb.Err("insert namespace", err)
		}
		// The account's first passkey is established at once.
		p, err = insertPasskey(ctx, tx, ns, name, cred, now, now)
		return err
	})
	return p, err
}

// addPasskey stores another passkey of ns, a credential change that
// session sid must be entitled to (see credentialChange). Only a
// namespace's first passkey is established at once.
func (s store) addPasskey(ctx context.Context, ns, sid, name string, cred *webauthn.Credential, now time.Time) (passkey, error) {
	var p passkey
	err := s.credentialChange(ctx, ns, sid, now, func(tx *sql.Tx, existing int) error {
		trusted := now
		if existing > 0 {
			trusted = now.Add(NewPasskeyHold)
		}
		var err error
		p, err = insertPasskey(ctx, tx, ns, name, cred, now, trusted)
		return err
	})
	return p, err
}

// usePasskey records a verified assertion of cred: the new counter and
// flags. The UPDATE only applies while the stored counter is below the
// asserted one (or both are zero: authenticators without a counter), so of
// two assertions racing with one counter value exactly one passes, and a
// regression is errPasskeyCloned. It returns the passkey's id.
func (s store) usePasskey(ctx context.Context, ns string, cred *webauthn.Credential, now time.Time) (string, error) {
	data, err := json.Marshal(cred)
	if err != nil {
		return "", fmt.Errorf("controlplane: encode passkey: %w", err)
	}
	count := int64(cred.Authenticator.SignCount)
	var id string
	err = s.db.WriteRow(ctx, `UPDATE passkeys SET sign_count = $3, credential = $4, last_used_at = $5
		WHERE credential_id = $1 AND namespace = $2 AND (sign_count < $3 OR (sign_count = 0 AND $3 = 0)) RETURNING id`,
		credentialID(cred.ID), ns, count, string(data), sqldb.Micros(now)).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return "", errPasskeyCloned
	}
	return id, sqldb.Err("update passkey", err)
}

// renamePasskey renames passkey id of ns.
func (s store) renamePasskey(ctx context.Context, ns, id, name string) (passkey, error) {
	p, err := scanPasskey(s.db.WriteRow(ctx, `UPDATE passkeys SET name = $3 WHERE id = $1 AND namespace = $2 RETURNING `+passkeyColumns,
		id, ns, name))
	if errors.Is(err, sql.ErrNoRows) {
		return p, errPasskeyNotFound
	}
	return p, sqldb.Err("rename passkey", err)
}

// deletePasskey removes passkey id of ns unless it is the last one, a
// credential change that session sid must be entitled to (see
// credentialChange), and ends the other sessions that passkey started. The
// namespace row is locked on PostgreSQL, so two concurrent deletions cannot
// remove the last two passkeys. It returns the removed passkey.
func (s store) deletePasskey(ctx context.Context, ns, sid, id string, now time.Time) (passkey, error) {
	var p passkey
	err := s.credentialChange(ctx, ns, sid, now, func(tx *sql.Tx, total int) error {
		var err error
		p, err = scanPasskey(tx.QueryRowContext(ctx, `SELECT `+passkeyColumns+` FROM passkeys WHERE id = $1 AND namespace = $2`, id, ns))
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return errPasskeyNotFound
		case err != nil:
			return sqldb.Err("passkey", err)
		case total <= 1:
			return errLastPasskey
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM passkeys WHERE id = $1 AND namespace = $2`, id, ns); err != nil {
			return sqldb.Err("delete passkey", err)
		}
		_, err = tx.ExecContext(ctx, `DELETE FROM sessions WHERE namespace = $1 AND passkey_id = $2 AND id <> $3`, ns, id, sid)
		return sqldb.Err("end sessions of passkey", err)
	})
	return p, err
}

// Settings are the owner's notification preferences: Email is the
// address alerts are mailed to ("" = none); EmailNotifications governs the
// account's own alerts (passkey changes), WebhookFailuresNotify the alerts
// of webhooks that fail for good.
type Settings struct {
	Email                 string `json:"email"`
	EmailNotifications    bool   `json:"email_notifications"`
	WebhookFailuresNotify bool   `json:"webhook_failures_notify"`
}

// account returns the account owning ns: its id (also its WebAuthn user
// handle), creation time and settings.
func (s store) account(ctx context.Context, ns string) (id string, created time.Time, set Settings, err error) {
	var at int64
	var email, webhook int
	var addr string
	err = s.db.QueryRowContext(ctx, `SELECT a.id, a.created_at, a.email_notifications, a.webhook_failures_notify, a.alert_email
		FROM namespaces n JOIN accounts a ON a.id = n.owner_id WHERE n.namespace = $1`, ns).Scan(&id, &at, &email, &webhook, &addr)
	if errors.Is(err, sql.ErrNoRows) {
		return "", time.Time{}, set, errNamespaceNotFound
	}
	if err != nil {
		return "", time.Time{}, set, sqldb.Err("account", err)
	}
	return id, sqldb.FromMicros(at), Settings{Email: addr, EmailNotifications: email == 1, WebhookFailuresNotify: webhook == 1}, nil
}

// updateSettings sets the non-nil settings of the account owning ns.
func (s store) updateSettings(ctx context.Context, ns string, addr *string, email, webhook *bool) error {
	flag := func(b *bool) sql.NullInt64 {
		if b == nil {
			return sql.NullInt64{}
		}
		if *b {
			return sql.NullInt64{Int64: 1, Valid: true}
		}
		return sql.NullInt64{Int64: 0, Valid: true}
	}
	var address sql.NullString
	if addr != nil {
		address = sql.NullString{String: *addr, Valid: true}
	}
	_, err := s.db.Exec(ctx, `UPDATE accounts SET
			email_notifications = COALESCE($2, email_notifications),
			webhook_failures_notify = COALESCE($3, webhook_failures_notify),
			alert_email = COALESCE($4, alert_email)
		WHERE id = (SELECT owner_id FROM namespaces WHERE namespace = $1)`, ns, flag(email), flag(webhook), address)
	return sqldb.Err("update settings", err)
}

// cleanupAuth deletes expired challenges, and rate-limit rows whose window
// has closed and whose backoff ended at least a window ago.
func (s store) cleanupAuth(ctx context.Context, now time.Time) error {
	if _, err := s.db.Exec(ctx, `DELETE FROM webauthn_challenges WHERE expires_at <= $1`, sqldb.Micros(now)); err != nil {
		return sqldb.Err("delete challenges", err)
	}
	old := sqldb.Micros(now.Add(-limitWindow))
	_, err := s.db.Exec(ctx, `DELETE FROM auth_limits WHERE window_start <= $1 AND blocked_until <= $1`, old)
	return sqldb.Err("delete rate limits", err)
}

// createSession stores a new session of ns valid until expires and returns
// its id, unless ns already has max live sessions (a *web.RetryLater wrapping
// ErrSessionLimit).
func (s store) createSession(ctx context.Context, ns string, max int, now, expires time.Time) (string, error) {
	id := sqldb.NewID("ses_")
	err := s.db.Tx(ctx, func(tx *sql.Tx) error {
		if err := s.db.LockNamespace(ctx, tx, ns); err != nil {
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
			return web.RetryUntil(ErrSessionLimit, sqldb.FromMicros(earliest.Int64), now)
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO sessions (id, namespace, created_at, expires_at) VALUES ($1, $2, $3, $4)`,
			id, ns, sqldb.Micros(now), sqldb.Micros(expires))
		return sqldb.Err("insert session", err)
	})
	return id, err
}

// checkSession reports errSessionInvalid unless session sid of ns exists,
// has not expired and its namespace is active.
func (s store) checkSession(ctx context.Context, sid, ns string, now time.Time) error {
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

// activeNamespace returns nil when namespace ns exists and is active.
func (s store) activeNamespace(ctx context.Context, ns string) error {
	var deactivated sql.NullInt64
	err := s.db.QueryRowContext(ctx, `SELECT deactivated_at FROM namespaces WHERE namespace = $1`, ns).Scan(&deactivated)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return errNamespaceNotFound
	case err != nil:
		return sqldb.Err("namespace", err)
	case deactivated.Valid:
		return errNamespaceDeactivated
	}
	return nil
}
