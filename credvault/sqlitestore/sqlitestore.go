// Package sqlitestore keeps a credvault.Vault's records in one SQLite file
// in WAL mode. The command-line tool and a running gateway share the file:
// each write is one transaction, and every commit is visible to the other
// process's Vault at its next poll.
//
// Store.Holds keeps the gateway's calls held for their owner's approval
// (approval.Store) in the same file, so a restart honours an approval.
//
// It is the gateway's default store. A program that keeps its connections
// elsewhere (credvault.MemoryStore, or a store of its own) does not import
// it, and so links no SQL driver.
//
//	st, err := sqlitestore.Open(ctx, filepath.Join(dir, sqlitestore.DefaultFileName))
//	if err != nil {
//		return err
//	}
//	defer st.Close()
//	vault, err := credvault.New(ctx, credvault.Config{Store: st, MasterKey: key})
package sqlitestore

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"sync"

	"github.com/idnhq/idn/credvault"
	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// DefaultFileName is the name of the store file in the gateway's data
// directory.
const DefaultFileName = "gateway.db"

// migrations are applied in order; PRAGMA user_version records how many
// have run. Append, never edit.
var migrations = []string{
	`CREATE TABLE meta (
		name  TEXT PRIMARY KEY,
		value BLOB NOT NULL
	);
	CREATE TABLE connections (
		id             TEXT PRIMARY KEY,
		doc            TEXT NOT NULL,
		secret_version INTEGER NOT NULL,
		sealed_secrets BLOB NOT NULL
	);
	CREATE TABLE credential_variables (
		key          TEXT PRIMARY KEY,
		doc          TEXT NOT NULL,
		version      INTEGER NOT NULL,
		sealed_value BLOB NOT NULL
	);`,
	// Tool pins live beside their connection, not in its record, so that
	// pinning never rewrites the connection.
	`CREATE TABLE tool_pins (
		connection_id TEXT PRIMARY KEY,
		doc           BLOB NOT NULL
	);`,
	// Holds of owner-approved actions (Store.Holds), so that a restart
	// honours an approval. Times are Unix nanoseconds, 0 for none.
	`CREATE TABLE approval_holds (
		binding    TEXT PRIMARY KEY,
		id         TEXT NOT NULL,
		salt       BLOB NOT NULL,
		digest     TEXT NOT NULL,
		expires_ns INTEGER NOT NULL,
		ends_ns    INTEGER NOT NULL,
		uses       INTEGER NOT NULL DEFAULT 0,
		until_ns   INTEGER NOT NULL DEFAULT 0,
		assertion  TEXT,
		spent      INTEGER NOT NULL DEFAULT 0
	);
	CREATE INDEX approval_holds_ends ON approval_holds (ends_ns);`,
}

// Store is a credvault.Store on one SQLite file in WAL mode, safe to share
// between processes (the command-line tool and a running gateway).
// Writers take the database's write lock at the start of a transaction and
// wait up to five seconds for it; every commit is synced (synchronous=FULL),
// so an acknowledged write survives a crash of the process or the machine.
type Store struct {
	db *sql.DB

	mu     sync.Mutex // serializes use of probe
	probe  *sql.Conn  // dedicated connection polled for PRAGMA data_version
	closed bool
}

var _ credvault.Store = (*Store)(nil)

// Open opens (creating with mode 0600 if needed) the store file at
// path and applies pending migrations. The directory must exist. A file
// written by a newer version of this package is refused.
func Open(ctx context.Context, path string) (*Store, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: opening store: %w", err)
	}
	_ = f.Close()
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(5000)")
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(FULL)")
	q.Add("_pragma", "foreign_keys(1)")
	q.Set("_txlock", "immediate")
	db, err := sql.Open("sqlite", "file:"+(&url.URL{Path: path}).EscapedPath()+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: opening store: %w", err)
	}
	db.SetMaxOpenConns(4)
	s := &Store{db: db}
	if err := s.migrate(ctx); err != nil {
		_ = db.Close()
		return nil, err
	}
	if s.probe, err = db.Conn(ctx); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("sqlitestore: opening store: %w", err)
	}
	return s, nil
}

func (s *Store) migrate(ctx context.Context) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("sqlitestore: migrating store: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	var v int
	if err := tx.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
		return fmt.Errorf("sqlitestore: migrating store: %w", err)
	}
	if v > len(migrations) {
		return fmt.Errorf("sqlitestore: store schema version %d is newer than this program understands (%d); upgrade the gateway", v, len(migrations))
	}
	if v == len(migrations) {
		return nil
	}
	for i := v; i < len(migrations); i++ {
		if _, err := tx.ExecContext(ctx, migrations[i]); err != nil {
			return fmt.Errorf("sqlitestore: migration %d: %w", i+1, err)
		}
	}
	if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", len(migrations))); err != nil {
		return fmt.Errorf("sqlitestore: migrating store: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("sqlitestore: migrating store: %w", err)
	}
	return nil
}

// Close releases the database. The Vault on top must be closed first.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	err := s.probe.Close()
	return errors.Join(err, s.db.Close())
}

// Generation returns SQLite's data_version as seen by a dedicated
// connection: it changes after every commit made through any other
// connection, in this process or another.
func (s *Store) Generation(ctx context.Context) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return 0, errors.New("sqlitestore: store is closed")
	}
	var v uint64
	if err := s.probe.QueryRowContext(ctx, "PRAGMA data_version").Scan(&v); err != nil {
		return 0, fmt.Errorf("sqlitestore: polling store: %w", err)
	}
	return v, nil
}

type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// Load reads every record in one read transaction.
func (s *Store) Load(ctx context.Context) (*credvault.Records, error) {
	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: loading store: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	return loadRecords(ctx, tx)
}

func loadRecords(ctx context.Context, q querier) (*credvault.Records, error) {
	r := &credvault.Records{Connections: map[string]*credvault.ConnectionRecord{}, Variables: map[string]*credvault.VariableRecord{}, ToolPins: map[string][]byte{}}
	rows, err := q.QueryContext(ctx, "SELECT name, value FROM meta")
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: loading store: %w", err)
	}
	for rows.Next() {
		var (
			name  string
			value []byte
		)
		if err := rows.Scan(&name, &value); err != nil {
			rows.Close()
			return nil, fmt.Errorf("sqlitestore: loading store: %w", err)
		}
		credvault.SetMeta(r, name, value)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return nil, fmt.Errorf("sqlitestore: loading store: %w", err)
	}
	rows, err = q.QueryContext(ctx, "SELECT id, doc, secret_version, sealed_secrets FROM connections")
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: loading connections: %w", err)
	}
	for rows.Next() {
		var (
			id, doc string
			ver     int64
			rec     credvault.ConnectionRecord
		)
		if err := rows.Scan(&id, &doc, &ver, &rec.SealedSecrets); err != nil {
			rows.Close()
			return nil, fmt.Errorf("sqlitestore: loading connections: %w", err)
		}
		if err := json.Unmarshal([]byte(doc), &rec.Connection); err != nil {
			rows.Close()
			return nil, fmt.Errorf("sqlitestore: connection %q: corrupt record: %w", id, err)
		}
		rec.Connection.ID, rec.Connection.SecretVersion = id, ver
		r.Connections[id] = &rec
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return nil, fmt.Errorf("sqlitestore: loading connections: %w", err)
	}
	if err := loadToolPins(ctx, q, r); err != nil {
		return nil, err
	}
	rows, err = q.QueryContext(ctx, "SELECT key, doc, version, sealed_value FROM credential_variables")
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: loading variables: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			key, doc string
			ver      int64
			rec      credvault.VariableRecord
		)
		if err := rows.Scan(&key, &doc, &ver, &rec.SealedValue); err != nil {
			return nil, fmt.Errorf("sqlitestore: loading variables: %w", err)
		}
		if err := json.Unmarshal([]byte(doc), &rec.Variable); err != nil {
			return nil, fmt.Errorf("sqlitestore: variable %q: corrupt record: %w", key, err)
		}
		rec.Variable.Key, rec.Variable.Version = key, ver
		r.Variables[key] = &rec
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlitestore: loading variables: %w", err)
	}
	return r, nil
}

// Update runs fn inside a write transaction (BEGIN IMMEDIATE) and writes
// the records fn added, changed or removed.
func (s *Store) Update(ctx context.Context, fn func(*credvault.Records) error) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("sqlitestore: starting write: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	before, err := loadRecords(ctx, tx)
	if err != nil {
		return err
	}
	after := before.Clone()
	if err := fn(after); err != nil {
		return err
	}
	if err := writeDiff(ctx, tx, before, after); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("sqlitestore: committing write: %w", err)
	}
	return nil
}

func writeDiff(ctx context.Context, tx *sql.Tx, before, after *credvault.Records) error {
	for name, value := range credvault.MetaChanges(before, after) {
		var err error
		if value == nil {
			_, err = tx.ExecContext(ctx, "DELETE FROM meta WHERE name = ?", name)
		} else {
			_, err = tx.ExecContext(ctx, "INSERT INTO meta (name, value) VALUES (?, ?) ON CONFLICT (name) DO UPDATE SET value = excluded.value", name, value)
		}
		if err != nil {
			return fmt.Errorf("sqlitestore: writing %s: %w", name, err)
		}
	}
	for id := range before.Connections {
		if _, ok := after.Connections[id]; !ok {
			if _, err := tx.ExecContext(ctx, "DELETE FROM connections WHERE id = ?", id); err != nil {
				return fmt.Errorf("sqlitestore: deleting connection: %w", err)
			}
		}
	}
	for id, rec := range after.Connections {
		doc, err := json.Marshal(&rec.Connection)
		if err != nil {
			return fmt.Errorf("sqlitestore: encoding connection: %w", err)
		}
		if old, ok := before.Connections[id]; ok {
			oldDoc, _ := json.Marshal(&old.Connection)
			if bytes.Equal(doc, oldDoc) && bytes.Equal(old.SealedSecrets, rec.SealedSecrets) {
				continue
			}
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO connections (id, doc, secret_version, sealed_secrets) VALUES (?, ?, ?, ?)
			ON CONFLICT (id) DO UPDATE SET doc = excluded.doc, secret_version = excluded.secret_version, sealed_secrets = excluded.sealed_secrets`,
			id, string(doc), rec.Connection.SecretVersion, rec.SealedSecrets); err != nil {
			return fmt.Errorf("sqlitestore: writing connection: %w", err)
		}
	}
	if err := writeToolPins(ctx, tx, before, after); err != nil {
		return err
	}
	for key := range before.Variables {
		if _, ok := after.Variables[key]; !ok {
			if _, err := tx.ExecContext(ctx, "DELETE FROM credential_variables WHERE key = ?", key); err != nil {
				return fmt.Errorf("sqlitestore: deleting variable: %w", err)
			}
		}
	}
	for key, rec := range after.Variables {
		if old, ok := before.Variables[key]; ok && old.Variable == rec.Variable && bytes.Equal(old.SealedValue, rec.SealedValue) {
			continue
		}
		doc, err := json.Marshal(&rec.Variable)
		if err != nil {
			return fmt.Errorf("sqlitestore: encoding variable: %w", err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO credential_variables (key, doc, version, sealed_value) VALUES (?, ?, ?, ?)
			ON CONFLICT (key) DO UPDATE SET doc = excluded.doc, version = excluded.version, sealed_value = excluded.sealed_value`,
			key, string(doc), rec.Variable.Version, rec.SealedValue); err != nil {
			return fmt.Errorf("sqlitestore: writing variable: %w", err)
		}
	}
	return nil
}

func loadToolPins(ctx context.Context, q querier, r *credvault.Records) error {
	rows, err := q.QueryContext(ctx, "SELECT connection_id, doc FROM tool_pins")
	if err != nil {
		return fmt.Errorf("sqlitestore: loading tool pins: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var doc []byte
		if err := rows.Scan(&id, &doc); err != nil {
			return fmt.Errorf("sqlitestore: loading tool pins: %w", err)
		}
		r.ToolPins[id] = doc
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("sqlitestore: loading tool pins: %w", err)
	}
	return nil
}

func writeToolPins(ctx context.Context, tx *sql.Tx, before, after *credvault.Records) error {
	for id := range before.ToolPins {
		if _, ok := after.ToolPins[id]; !ok {
			if _, err := tx.ExecContext(ctx, "DELETE FROM tool_pins WHERE connection_id = ?", id); err != nil {
				return fmt.Errorf("sqlitestore: deleting tool pins: %w", err)
			}
		}
	}
	for id, doc := range after.ToolPins {
		if old, ok := before.ToolPins[id]; ok && bytes.Equal(old, doc) {
			continue
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO tool_pins (connection_id, doc) VALUES (?, ?)
			ON CONFLICT (connection_id) DO UPDATE SET doc = excluded.doc`, id, doc); err != nil {
			return fmt.Errorf("sqlitestore: writing tool pins: %w", err)
		}
	}
	return nil
}
