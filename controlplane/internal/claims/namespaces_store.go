package claims

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/idnhq/idn/controlplane/internal/sqldb"
)

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
		acct := sqldb.NewID("usr_")
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
