package dashboard

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"github.com/idnhq/idn/controlplane/internal/sqldb"
	"time"
)

// hashSigninToken is the stored form of a sign-in link token.
func hashSigninToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// createSigninLink stores the hash of token as a sign-in link of ns valid
// until expires, and deletes links that have expired by now.
func (s store) createSigninLink(ctx context.Context, ns, token string, now, expires time.Time) error {
	return s.db.Tx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `DELETE FROM signin_links WHERE expires_at <= $1`, sqldb.Micros(now)); err != nil {
			return sqldb.Err("prune sign-in links", err)
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO signin_links (token_hash, namespace, created_at, expires_at) VALUES ($1, $2, $3, $4)`,
			hashSigninToken(token), ns, sqldb.Micros(now), sqldb.Micros(expires))
		return sqldb.Err("insert sign-in link", err)
	})
}

// takeSigninLink consumes the link of token and returns its namespace. The
// row is deleted by the statement that reads it, so of two concurrent
// redemptions only one gets the namespace; an expired link is consumed as
// well and reported like an unknown one.
func (s store) takeSigninLink(ctx context.Context, token string, now time.Time) (string, error) {
	var (
		ns      string
		expires int64
	)
	err := s.db.WriteRow(ctx, `DELETE FROM signin_links WHERE token_hash = $1 RETURNING namespace, expires_at`,
		hashSigninToken(token)).Scan(&ns, &expires)
	if errors.Is(err, sql.ErrNoRows) || err == nil && expires <= sqldb.Micros(now) {
		return "", errSigninLinkInvalid
	}
	return ns, sqldb.Err("take sign-in link", err)
}
