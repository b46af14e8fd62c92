package controlplane

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// migration is one schema step. The SQL is shared by both engines: only
// portable types (TEXT, BIGINT, INTEGER), partial indexes and
// ON CONFLICT are used. Applied versions are recorded in schema_migrations;
// a released migration is never edited, only followed by a new one.
type migration struct {
	version int
	name    string
	stmts   []string
}

var migrations = []migration{{
	version: 1,
	name:    "core: accounts, namespaces, sessions, services, api keys, claims, nonces",
	stmts: []string{
		`CREATE TABLE accounts (
			id TEXT PRIMARY KEY,
			created_at BIGINT NOT NULL
		)`,
		// A namespace row is never deleted: account deletion leaves a
		// tombstone (deactivated_at) so the name cannot be taken again and
		// the DID keeps resolving as deactivated.
		`CREATE TABLE namespaces (
			namespace TEXT PRIMARY KEY,
			owner_id TEXT NOT NULL REFERENCES accounts(id),
			created_at BIGINT NOT NULL,
			updated_at BIGINT NOT NULL,
			deactivated_at BIGINT
		)`,
		`CREATE TABLE sessions (
			id TEXT PRIMARY KEY,
			namespace TEXT NOT NULL REFERENCES namespaces(namespace),
			created_at BIGINT NOT NULL,
			expires_at BIGINT NOT NULL,
			verified_at BIGINT
		)`,
		`CREATE INDEX sessions_namespace ON sessions(namespace)`,
		`CREATE INDEX sessions_expires ON sessions(expires_at)`,
		`CREATE TABLE services (
			id TEXT PRIMARY KEY,
			slug TEXT NOT NULL UNIQUE,
			name TEXT NOT NULL,
			service_endpoint TEXT NOT NULL,
			owner TEXT NOT NULL REFERENCES namespaces(namespace),
			created_at BIGINT NOT NULL,
			updated_at BIGINT NOT NULL
		)`,
		`CREATE INDEX services_owner ON services(owner)`,
		`CREATE TABLE api_keys (
			id TEXT PRIMARY KEY,
			service_id TEXT NOT NULL REFERENCES services(id) ON DELETE CASCADE,
			key_hash TEXT NOT NULL UNIQUE,
			prefix TEXT NOT NULL,
			created_at BIGINT NOT NULL,
			last_used_at BIGINT,
			revoked_at BIGINT
		)`,
		`CREATE INDEX api_keys_service ON api_keys(service_id)`,
		`CREATE TABLE claims (
			id TEXT PRIMARY KEY,
			namespace TEXT NOT NULL REFERENCES namespaces(namespace),
			public_key TEXT NOT NULL,
			service TEXT NOT NULL,
			agent_ip TEXT NOT NULL,
			subject TEXT NOT NULL,
			agent_id TEXT NOT NULL,
			agent_name TEXT NOT NULL,
			status TEXT NOT NULL,
			created_at BIGINT NOT NULL,
			updated_at BIGINT NOT NULL,
			approved_at BIGINT,
			rejected_at BIGINT,
			revoked_at BIGINT,
			expired_at BIGINT,
			approval_tx_hash TEXT,
			revocation_tx_hash TEXT
		)`,
		// At most one live (pending or approved) claim per tuple: this is
		// what makes submission idempotent even under concurrency.
		`CREATE UNIQUE INDEX claims_live_tuple ON claims(namespace, public_key, service)
			WHERE status IN ('pending', 'approved')`,
		// The feed: approved claims of one service in (approved_at, id) order.
		`CREATE INDEX claims_feed ON claims(service, status, approved_at, id)`,
		`CREATE INDEX claims_owner ON claims(namespace, status, created_at)`,
		`CREATE INDEX claims_pending_age ON claims(status, created_at)`,
		`CREATE TABLE nonces (
			scope TEXT NOT NULL,
			nonce TEXT NOT NULL,
			expires_at BIGINT NOT NULL,
			PRIMARY KEY (scope, nonce)
		)`,
		`CREATE INDEX nonces_expires ON nonces(expires_at)`,
	},
}}

// migrate applies every migration newer than the recorded version, each in
// its own transaction. On PostgreSQL a transaction-scoped advisory lock makes
// concurrent instances wait for each other instead of racing.
func (s *Store) migrate(ctx context.Context) error {
	if _, err := s.db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version INTEGER PRIMARY KEY,
		name TEXT NOT NULL,
		applied_at BIGINT NOT NULL
	)`); err != nil {
		return dbErr("migrate: create schema_migrations", err)
	}
	for _, m := range migrations {
		err := s.tx(ctx, func(tx *sql.Tx) error {
			if s.pg {
				if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(7291046311)`); err != nil {
					return dbErr("migrate: lock", err)
				}
			}
			var n int
			if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM schema_migrations WHERE version = $1`, m.version).Scan(&n); err != nil {
				return dbErr("migrate: read version", err)
			}
			if n > 0 {
				return nil
			}
			for _, stmt := range m.stmts {
				if _, err := tx.ExecContext(ctx, stmt); err != nil {
					return fmt.Errorf("controlplane: migration %d (%s): %w", m.version, m.name, err)
				}
			}
			_, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)`,
				m.version, m.name, micros(time.Now()))
			return dbErr("migrate: record version", err)
		})
		if err != nil {
			return err
		}
	}
	return nil
}
