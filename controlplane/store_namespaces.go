package controlplane

import (
	"context"
	"github.com/idnhq/idn/controlplane/internal/sqldb"
	"time"
)

// cleanup deletes expired nonces and sessions.
func (s *Store) cleanup(ctx context.Context, now time.Time) error {
	if _, err := s.db.Exec(ctx, `DELETE FROM nonces WHERE expires_at <= $1`, sqldb.Micros(now)); err != nil {
		return sqldb.Err("delete nonces", err)
	}
	_, err := s.db.Exec(ctx, `DELETE FROM sessions WHERE expires_at <= $1`, sqldb.Micros(now))
	return sqldb.Err("delete sessions", err)
}
