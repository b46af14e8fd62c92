package sqldb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// migration is one schema step. Tables and indexes are shared by both
// engines (portable types TEXT, BIGINT, INTEGER; partial indexes;
// ON CONFLICT); only trigger bodies differ. Applied versions are recorded in schema_migrations;
// a released migration is never edited, only followed by a new one.
type migration struct {
	version  int
	name     string
	stmts    []string
	sqlite   []string // after stmts, SQLite only (trigger syntax differs)
	postgres []string // after stmts, PostgreSQL only
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
}, {
	version: 2,
	name:    "feed state: approved count and change version per service, kept by triggers",
	// The feed answers total, ETag and 304 from this row in O(1), and its
	// version tells when a remembered page cursor is still exact.
	stmts: []string{
		`CREATE TABLE feed_state (
			service TEXT PRIMARY KEY,
			approved BIGINT NOT NULL,
			version BIGINT NOT NULL
		)`,
		`INSERT INTO feed_state (service, approved, version)
			SELECT service, COUNT(*), 1 FROM claims WHERE status = 'approved' GROUP BY service`,
	},
	sqlite: []string{
		`CREATE TRIGGER claims_feed_insert AFTER INSERT ON claims WHEN NEW.status = 'approved' BEGIN
			INSERT INTO feed_state (service, approved, version) VALUES (NEW.service, 1, 1)
			ON CONFLICT (service) DO UPDATE SET approved = approved + 1, version = version + 1;
		END`,
		`CREATE TRIGGER claims_feed_update AFTER UPDATE OF status ON claims
			WHEN OLD.status = 'approved' OR NEW.status = 'approved' BEGIN
			INSERT INTO feed_state (service, approved, version)
				VALUES (NEW.service, (NEW.status = 'approved') - (OLD.status = 'approved'), 1)
			ON CONFLICT (service) DO UPDATE SET approved = approved + excluded.approved, version = version + 1;
		END`,
		`CREATE TRIGGER claims_feed_delete AFTER DELETE ON claims WHEN OLD.status = 'approved' BEGIN
			UPDATE feed_state SET approved = approved - 1, version = version + 1 WHERE service = OLD.service;
		END`,
	},
	postgres: []string{
		`CREATE FUNCTION claims_feed_state() RETURNS trigger LANGUAGE plpgsql AS $$
		DECLARE
			delta BIGINT := 0;
			svc TEXT;
		BEGIN
			IF TG_OP <> 'INSERT' THEN
				IF OLD.status = 'approved' THEN delta := delta - 1; svc := OLD.service; END IF;
			END IF;
			IF TG_OP <> 'DELETE' THEN
				IF NEW.status = 'approved' THEN delta := delta + 1; svc := NEW.service; END IF;
			END IF;
			IF svc IS NOT NULL THEN
				INSERT INTO feed_state (service, approved, version) VALUES (svc, delta, 1)
				ON CONFLICT (service) DO UPDATE
					SET approved = feed_state.approved + EXCLUDED.approved, version = feed_state.version + 1;
			END IF;
			RETURN NULL;
		END $$`,
		`CREATE TRIGGER claims_feed_state AFTER INSERT OR DELETE OR UPDATE OF status ON claims
			FOR EACH ROW EXECUTE FUNCTION claims_feed_state()`,
	},
}, authMigration, webhookMigration, sessionsMigration, pendingBudgetMigration, dashboardMigration, registryMigration, gatewaysMigration, alertsMigration, claimCountsMigration, feedChangesMigration, webhookNamesMigration, submitConcurrencyMigration, activityMigration, feedNotifyMigration, revokedTupleMigration, activityClassesMigration, activityChartMigration, rejectedTupleMigration, actionsMigration, ownerKeysMigration, connectFlowsMigration, activityEventsMigration}

// migrateWait bounds how long an instance starting beside others waits
// for SQLite's writer while they migrate. Their migrations hold it far
// longer than one request does, so WriteWait alone is too short.
const migrateWait = time.Minute

// migrate applies every migration of ms not yet recorded, each in its own
// transaction. On PostgreSQL a transaction-scoped advisory lock, on
// SQLite the immediate transaction's write lock, makes concurrent instances
// wait for each other instead of racing.
func (d *DB) migrate(ctx context.Context, ms []migration) error {
	deadline := time.Now().Add(migrateWait)
	for _, m := range ms {
		err := d.migrateOne(ctx, m)
		for errors.Is(err, ErrBusy) && time.Now().Before(deadline) {
			err = d.migrateOne(ctx, m)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// migrateOne applies m unless it is recorded, in one transaction.
func (d *DB) migrateOne(ctx context.Context, m migration) error {
	return d.Tx(ctx, func(tx *sql.Tx) error {
		if d.pg {
			if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(7291046311)`); err != nil {
				return Err("migrate: lock", err)
			}
		}
		if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
				version INTEGER PRIMARY KEY,
				name TEXT NOT NULL,
				applied_at BIGINT NOT NULL
			)`); err != nil {
			return Err("migrate: create schema_migrations", err)
		}
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM schema_migrations WHERE version = $1`, m.version).Scan(&n); err != nil {
			return Err("migrate: read version", err)
		}
		if n > 0 {
			return nil
		}
		stmts := append(append([]string(nil), m.stmts...), m.sqlite...)
		if d.pg {
			stmts = append(append([]string(nil), m.stmts...), m.postgres...)
		}
		for _, stmt := range stmts {
			if _, err := tx.ExecContext(ctx, stmt); err != nil {
				return fmt.Errorf("controlplane: migration %d (%s): %w", m.version, m.name, err)
			}
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)`,
			m.version, m.name, Micros(time.Now()))
		return Err("migrate: record version", err)
	})
}
