package pgstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/idnhq/idn/credvault"
	"github.com/jackc/pgx/v5"
)

// migrations are applied in order; credvault_schema records how many have
// run. Append, never edit. Documents are kept as text, not jsonb, so that
// extensions read back byte for byte.
var migrations = []string{
	`CREATE TABLE credvault_meta (
		name  TEXT PRIMARY KEY,
		value BYTEA NOT NULL
	);
	CREATE TABLE credvault_connections (
		id             TEXT PRIMARY KEY,
		doc            TEXT NOT NULL,
		secret_version BIGINT NOT NULL,
		sealed_secrets BYTEA NOT NULL
	);
	CREATE TABLE credvault_variables (
		key          TEXT PRIMARY KEY,
		doc          TEXT NOT NULL,
		version      BIGINT NOT NULL,
		sealed_value BYTEA NOT NULL
	);
	CREATE TABLE credvault_generation (
		one   BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (one),
		value BIGINT NOT NULL
	);
	INSERT INTO credvault_generation (value) VALUES (0);`,
	// The pinned tool definitions of MCP connections, apart from the
	// connection so that pinning never rewrites it.
	`CREATE TABLE credvault_tool_pins (
		connection_id TEXT PRIMARY KEY,
		doc           BYTEA NOT NULL
	);`,
	// Holds of owner-approved actions (Store.Holds), shared by the fleet.
	// Times are Unix nanoseconds, 0 for none.
	`CREATE TABLE credvault_approval_holds (
		binding    TEXT PRIMARY KEY,
		id         TEXT NOT NULL,
		salt       BYTEA NOT NULL,
		digest     TEXT NOT NULL,
		expires_ns BIGINT NOT NULL,
		ends_ns    BIGINT NOT NULL,
		uses       INTEGER NOT NULL DEFAULT 0,
		until_ns   BIGINT NOT NULL DEFAULT 0,
		assertion  TEXT,
		spent      INTEGER NOT NULL DEFAULT 0
	);
	CREATE INDEX credvault_approval_holds_ends ON credvault_approval_holds (ends_ns);`,
}

// migrateLock is the advisory lock key under which replicas starting
// together migrate one at a time.
const migrateLock = 0x6964_6e5f_7661_756c // "idn_vaul"

func (s *Store) migrate(ctx context.Context) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return classify("migrating store", err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", int64(migrateLock)); err != nil {
		return classify("migrating store", err)
	}
	if _, err := tx.Exec(ctx, "CREATE TABLE IF NOT EXISTS credvault_schema (version INTEGER NOT NULL)"); err != nil {
		return classify("migrating store", err)
	}
	var v int
	err = tx.QueryRow(ctx, "SELECT version FROM credvault_schema").Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		_, err = tx.Exec(ctx, "INSERT INTO credvault_schema (version) VALUES (0)")
	}
	if err != nil {
		return classify("migrating store", err)
	}
	if v > len(migrations) {
		return fmt.Errorf("pgstore: store schema version %d is newer than this program understands (%d); upgrade the gateway", v, len(migrations))
	}
	for i := v; i < len(migrations); i++ {
		if _, err := tx.Exec(ctx, migrations[i]); err != nil {
			return fmt.Errorf("pgstore: migration %d: %w", i+1, classify("migrating store", err))
		}
	}
	if _, err := tx.Exec(ctx, "UPDATE credvault_schema SET version = $1", len(migrations)); err != nil {
		return classify("migrating store", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return classify("migrating store", err)
	}
	return nil
}

func loadRecords(ctx context.Context, tx pgx.Tx) (*credvault.Records, error) {
	r := &credvault.Records{Connections: map[string]*credvault.ConnectionRecord{}, Variables: map[string]*credvault.VariableRecord{}, ToolPins: map[string][]byte{}}
	rows, err := tx.Query(ctx, "SELECT name, value FROM credvault_meta")
	if err != nil {
		return nil, classify("loading store", err)
	}
	for rows.Next() {
		var (
			name  string
			value []byte
		)
		if err := rows.Scan(&name, &value); err != nil {
			rows.Close()
			return nil, classify("loading store", err)
		}
		credvault.SetMeta(r, name, value)
	}
	if err := rows.Err(); err != nil {
		return nil, classify("loading store", err)
	}
	rows, err = tx.Query(ctx, "SELECT id, doc, secret_version, sealed_secrets FROM credvault_connections")
	if err != nil {
		return nil, classify("loading connections", err)
	}
	for rows.Next() {
		var (
			id, doc string
			ver     int64
			rec     credvault.ConnectionRecord
		)
		if err := rows.Scan(&id, &doc, &ver, &rec.SealedSecrets); err != nil {
			rows.Close()
			return nil, classify("loading connections", err)
		}
		if err := json.Unmarshal([]byte(doc), &rec.Connection); err != nil {
			rows.Close()
			return nil, fmt.Errorf("pgstore: connection %q: corrupt record: %w", id, err)
		}
		rec.Connection.ID, rec.Connection.SecretVersion = id, ver
		r.Connections[id] = &rec
	}
	if err := rows.Err(); err != nil {
		return nil, classify("loading connections", err)
	}
	rows, err = tx.Query(ctx, "SELECT key, doc, version, sealed_value FROM credvault_variables")
	if err != nil {
		return nil, classify("loading variables", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			key, doc string
			ver      int64
			rec      credvault.VariableRecord
		)
		if err := rows.Scan(&key, &doc, &ver, &rec.SealedValue); err != nil {
			return nil, classify("loading variables", err)
		}
		if err := json.Unmarshal([]byte(doc), &rec.Variable); err != nil {
			return nil, fmt.Errorf("pgstore: variable %q: corrupt record: %w", key, err)
		}
		rec.Variable.Key, rec.Variable.Version = key, ver
		r.Variables[key] = &rec
	}
	if err := rows.Err(); err != nil {
		return nil, classify("loading variables", err)
	}
	rows, err = tx.Query(ctx, "SELECT connection_id, doc FROM credvault_tool_pins")
	if err != nil {
		return nil, classify("loading tool pins", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			id  string
			doc []byte
		)
		if err := rows.Scan(&id, &doc); err != nil {
			return nil, classify("loading tool pins", err)
		}
		r.ToolPins[id] = doc
	}
	if err := rows.Err(); err != nil {
		return nil, classify("loading tool pins", err)
	}
	return r, nil
}

// writeDiff queues the statements that turn before into after.
func writeDiff(before, after *credvault.Records) (*pgx.Batch, error) {
	b := &pgx.Batch{}
	for name, value := range credvault.MetaChanges(before, after) {
		if value == nil {
			b.Queue("DELETE FROM credvault_meta WHERE name = $1", name)
		} else {
			b.Queue(`INSERT INTO credvault_meta (name, value) VALUES ($1, $2)
				ON CONFLICT (name) DO UPDATE SET value = excluded.value`, name, value)
		}
	}
	for id := range before.Connections {
		if _, ok := after.Connections[id]; !ok {
			b.Queue("DELETE FROM credvault_connections WHERE id = $1", id)
		}
	}
	for id, rec := range after.Connections {
		doc, err := json.Marshal(&rec.Connection)
		if err != nil {
			return nil, fmt.Errorf("pgstore: encoding connection: %w", err)
		}
		if old, ok := before.Connections[id]; ok {
			oldDoc, _ := json.Marshal(&old.Connection)
			if bytes.Equal(doc, oldDoc) && bytes.Equal(old.SealedSecrets, rec.SealedSecrets) {
				continue
			}
		}
		b.Queue(`INSERT INTO credvault_connections (id, doc, secret_version, sealed_secrets) VALUES ($1, $2, $3, $4)
			ON CONFLICT (id) DO UPDATE SET doc = excluded.doc, secret_version = excluded.secret_version, sealed_secrets = excluded.sealed_secrets`,
			id, string(doc), rec.Connection.SecretVersion, rec.SealedSecrets)
	}
	for key := range before.Variables {
		if _, ok := after.Variables[key]; !ok {
			b.Queue("DELETE FROM credvault_variables WHERE key = $1", key)
		}
	}
	for key, rec := range after.Variables {
		if old, ok := before.Variables[key]; ok && old.Variable == rec.Variable && bytes.Equal(old.SealedValue, rec.SealedValue) {
			continue
		}
		doc, err := json.Marshal(&rec.Variable)
		if err != nil {
			return nil, fmt.Errorf("pgstore: encoding variable: %w", err)
		}
		b.Queue(`INSERT INTO credvault_variables (key, doc, version, sealed_value) VALUES ($1, $2, $3, $4)
			ON CONFLICT (key) DO UPDATE SET doc = excluded.doc, version = excluded.version, sealed_value = excluded.sealed_value`,
			key, string(doc), rec.Variable.Version, rec.SealedValue)
	}
	for id := range before.ToolPins {
		if _, ok := after.ToolPins[id]; !ok {
			b.Queue("DELETE FROM credvault_tool_pins WHERE connection_id = $1", id)
		}
	}
	for id, doc := range after.ToolPins {
		if old, ok := before.ToolPins[id]; ok && bytes.Equal(old, doc) {
			continue
		}
		b.Queue(`INSERT INTO credvault_tool_pins (connection_id, doc) VALUES ($1, $2)
			ON CONFLICT (connection_id) DO UPDATE SET doc = excluded.doc`, id, doc)
	}
	return b, nil
}
