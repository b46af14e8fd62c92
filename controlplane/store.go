package controlplane

import (
	"context"
	"github.com/idnhq/idn/controlplane/internal/claims"

	"github.com/idnhq/idn/controlplane/internal/sqldb"
)

// Storage providers accepted in StoreConfig.Provider (ADAPTER_PROVIDER).
const (
	ProviderSQLite   = sqldb.ProviderSQLite
	ProviderPostgres = sqldb.ProviderPostgres
)

// ErrUnavailable wraps every store error caused by the database itself
// (connection refused, closed pool, I/O error) rather than by the request.
// The HTTP layer answers it with 503 DATABASE_UNAVAILABLE.
var ErrUnavailable = sqldb.ErrUnavailable

// ErrBusy is a write refused because SQLite's single writer stayed taken
// for StoreConfig.WriteWait. The HTTP layer answers it with 503
// DATABASE_BUSY and a Retry-After, rather than holding the request.
var ErrBusy = sqldb.ErrBusy

// StoreConfig selects and locates the database: the provider, the SQLite
// file or PostgreSQL URL, the pool size, the tracer and SQLite's WriteWait.
type StoreConfig = sqldb.Config

// Store is the control plane's database: SQLite or PostgreSQL behind one
// schema. Every piece of shared state (nonces, sessions, claims) lives here,
// so several control-plane instances can share one PostgreSQL database.
// A Store is safe for concurrent use.
type Store struct {
	db     *sqldb.DB
	claims *claims.Store
}

// Open connects to the database and applies pending migrations. Concurrent
// Opens against one PostgreSQL database serialise their migrations.
func Open(ctx context.Context, cfg StoreConfig) (*Store, error) {
	db, err := sqldb.Open(ctx, cfg)
	if err != nil {
		return nil, err
	}
	cs, err := claims.NewStore(ctx, db)
	if err != nil {
		db.Close()
		return nil, err
	}
	return &Store{db: db, claims: cs}, nil
}

// Close closes the database.
func (s *Store) Close() error { return s.db.Close() }

// Ping reports whether the database answers; the error wraps ErrUnavailable.
func (s *Store) Ping(ctx context.Context) error { return s.db.Ping(ctx) }
