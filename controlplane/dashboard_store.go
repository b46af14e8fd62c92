package controlplane

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"github.com/idnhq/idn/controlplane/internal/sqldb"
	"time"
)

// claimCounts returns how many claims of ns are in each status, only those
// of service slug when it is not empty: a few rows of claim_counts, at any
// number of claims.
func (s *Store) claimCounts(ctx context.Context, ns, slug string) (map[string]int64, error) {
	q, args := `SELECT status, CAST(SUM(n) AS BIGINT) FROM claim_counts WHERE namespace = $1`, []any{ns}
	if slug != "" {
		q, args = q+` AND service = $2`, append(args, slug)
	}
	rows, err := s.db.QueryContext(ctx, q+` GROUP BY status`, args...)
	if err != nil {
		return nil, sqldb.Err("count claims", err)
	}
	defer rows.Close()
	out := make(map[string]int64, 5)
	for rows.Next() {
		var (
			status string
			n      int64
		)
		if err := rows.Scan(&status, &n); err != nil {
			return nil, sqldb.Err("count claims", err)
		}
		out[status] = n
	}
	return out, sqldb.Err("count claims", rows.Err())
}

// claimServices returns the distinct service slugs that hold claims of ns,
// in order: the choices of the claims page's service filter, read from
// claim_counts.
func (s *Store) claimServices(ctx context.Context, ns string) ([]string, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT service FROM claim_counts WHERE namespace = $1
		GROUP BY service HAVING SUM(n) > 0 ORDER BY service`, ns)
	if err != nil {
		return nil, sqldb.Err("claim services", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var slug string
		if err := rows.Scan(&slug); err != nil {
			return nil, sqldb.Err("claim services", err)
		}
		out = append(out, slug)
	}
	return out, sqldb.Err("claim services", rows.Err())
}

// hashSigninToken is the stored form of a sign-in link token.
func hashSigninToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// createSigninLink stores the hash of token as a sign-in link of ns valid
// until expires, and deletes links that have expired by now.
func (s *Store) createSigninLink(ctx context.Context, ns, token string, now, expires time.Time) error {
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
func (s *Store) takeSigninLink(ctx context.Context, token string, now time.Time) (string, error) {
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
