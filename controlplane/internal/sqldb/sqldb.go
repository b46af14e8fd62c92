// Package sqldb is the control plane's database handle: SQLite or
// PostgreSQL behind one versioned schema (the migrations in this package),
// with the few rules every part of the control plane writes by.
//
//   - On SQLite, whose single writer excludes every other, each write (Tx,
//     Exec, WriteRow) first takes this process's write turn, first come
//     first served, for at most Config.WriteWait, and fails with ErrBusy
//     past it, so that a queue of writers is served in order instead of
//     polling the file lock. PostgreSQL writes go straight through.
//   - Err classifies a driver error: the database failing wraps
//     ErrUnavailable, SQLite's busy wraps ErrBusy; sql.ErrNoRows and context
//     errors pass unchanged.
//   - Times are stored as integer Unix microseconds (Micros) in both
//     engines, so ordering and comparison are identical everywhere.
//
// Reads (Query, QueryRow) need no turn: SQLite runs in WAL mode, where
// readers proceed beside the writer.
package sqldb

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" database/sql driver
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver

	"github.com/idnhq/idn/kit/tracing"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// Storage providers accepted in Config.Provider (ADAPTER_PROVIDER).
const (
	ProviderSQLite   = "sqlite"
	ProviderPostgres = "postgres"
)

// ErrUnavailable wraps every error caused by the database itself
// (connection refused, closed pool, I/O error) rather than by the request.
// The HTTP layer answers it with 503 DATABASE_UNAVAILABLE.
var ErrUnavailable = errors.New("controlplane: database unavailable")

// ErrBusy is a write refused because SQLite's single writer stayed taken
// for Config.WriteWait. The HTTP layer answers it with 503 DATABASE_BUSY
// and a Retry-After, rather than holding the request.
var ErrBusy = errors.New("controlplane: database busy")

// Config selects and locates the database.
type Config struct {
	// Provider is ProviderSQLite (also when empty) or ProviderPostgres.
	Provider string
	// SQLitePath is the database file for ProviderSQLite. Its directory is
	// created (0700) when missing; the file and its -wal and -shm companions
	// are made readable by their owner only (0600). Required for SQLite.
	SQLitePath string
	// DatabaseURL is the PostgreSQL connection URL for ProviderPostgres
	// (any form pgx accepts). Required for PostgreSQL.
	DatabaseURL string
	// MaxOpenConns bounds the connection pool; zero means 16.
	MaxOpenConns int
	// TracerProvider, when set, receives a span per query, statement and
	// transaction. Nil means none, at no cost.
	TracerProvider trace.TracerProvider
	// WriteWait bounds how long a write waits for SQLite's single writer
	// (a write of this process, or another process's, through
	// busy_timeout) before it fails with ErrBusy; zero means one second.
	// PostgreSQL, whose writers do not exclude each other, ignores it.
	WriteWait time.Duration
}

// DB is an open database with its schema current. It is safe for
// concurrent use.
type DB struct {
	db *tracedDB
	pg bool

	// SQLite only: the write turn, taken by every write for at most
	// writeWait. Waiting here is first come, first served, where SQLite's
	// own busy handler polls with growing sleeps and lets a late writer
	// overtake waiting ones, so a queue of 32 stalled for seconds.
	writeTurn chan struct{}
	writeWait time.Duration
}

// Open connects to the database and applies pending migrations. Concurrent
// Opens against one PostgreSQL database serialise their migrations.
func Open(ctx context.Context, cfg Config) (*DB, error) {
	return OpenAt(ctx, cfg, Version())
}

// Version is the newest schema version this binary knows.
func Version() int { return migrations[len(migrations)-1].version }

// OpenAt is Open that applies the migrations up to version only, leaving
// a database as an older release left it (for upgrade tests).
func OpenAt(ctx context.Context, cfg Config, version int) (*DB, error) {
	var (
		db  *sql.DB
		err error
		pg  bool
	)
	wait := cfg.WriteWait
	if wait <= 0 {
		wait = time.Second
	}
	switch cfg.Provider {
	case "", ProviderSQLite:
		if cfg.SQLitePath == "" {
			return nil, errors.New("controlplane: StoreConfig.SQLitePath is required for sqlite")
		}
		if err := os.MkdirAll(filepath.Dir(cfg.SQLitePath), 0o700); err != nil {
			return nil, fmt.Errorf("controlplane: create data directory: %w", err)
		}
		if err := privateFiles(cfg.SQLitePath); err != nil {
			return nil, err
		}
		// Immediate transactions take the write lock up front, so read-then-write
		// sequences (pending limit, state transitions) are serialised
		// instead of failing with SQLITE_BUSY on upgrade.
		q := url.Values{}
		q.Add("_pragma", "busy_timeout("+strconv.FormatInt(wait.Milliseconds(), 10)+")")
		q.Add("_pragma", "synchronous(NORMAL)")
		q.Add("_pragma", "foreign_keys(1)")
		q.Set("_txlock", "immediate")
		db, err = sql.Open("sqlite", "file:"+cfg.SQLitePath+"?"+q.Encode())
	case ProviderPostgres:
		if cfg.DatabaseURL == "" {
			return nil, errors.New("controlplane: StoreConfig.DatabaseURL is required for postgres")
		}
		pg = true
		db, err = sql.Open("pgx", cfg.DatabaseURL)
	default:
		return nil, fmt.Errorf("controlplane: unknown storage provider %q (want %q or %q)", cfg.Provider, ProviderSQLite, ProviderPostgres)
	}
	if err != nil {
		return nil, fmt.Errorf("controlplane: open database: %w", err)
	}
	n := cfg.MaxOpenConns
	if n <= 0 {
		n = 16
	}
	db.SetMaxOpenConns(n)
	db.SetMaxIdleConns(n)
	db.SetConnMaxIdleTime(5 * time.Minute)
	system := "sqlite"
	if pg {
		system = "postgresql"
	}
	d := &DB{db: &tracedDB{DB: db, tracer: tracing.New(cfg.TracerProvider, "github.com/idnhq/idn/controlplane"), system: system}, pg: pg}
	if !pg {
		d.writeTurn, d.writeWait = make(chan struct{}, 1), wait
		if err := d.enableWAL(ctx); err != nil {
			db.Close()
			return nil, err
		}
	}
	var ms []migration
	for _, m := range migrations {
		if m.version <= version {
			ms = append(ms, m)
		}
	}
	if err := d.migrate(ctx, ms); err != nil {
		db.Close()
		return nil, err
	}
	if pg && version == Version() {
		// Idle connections are kept (up to the pool's size) rather than
		// closed after a quiet spell, so they stay warm.
		db.SetConnMaxIdleTime(0)
		if err := warmPool(ctx, db, n); err != nil {
			db.Close()
			return nil, err
		}
	}
	return d, nil
}

// warmPool opens the pool's n PostgreSQL connections and warms each one's
// backend before any request needs it. A new backend loads the claims
// table's indexes and triggers and plans the statements of claims_submit
// on its first submission, about 6 ms of CPU; 32 submissions arriving at
// a fresh pool of 16 paid that 16 times over, on two cores pushing the
// slowest past 100 ms. Each connection now makes one submission at Open,
// in a scratch namespace, inside a transaction it rolls back, so nothing
// is written and no notification is sent. A server that refuses some of
// the connections (its max_connections reached) leaves them to be opened
// on demand, cold, rather than failing the start; Open fails only when no
// connection could be warmed.
func warmPool(ctx context.Context, db *sql.DB, n int) error {
	conns := make([]*sql.Conn, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range conns {
		wg.Go(func() {
			if conns[i], errs[i] = db.Conn(ctx); errs[i] == nil {
				errs[i] = warmBackend(ctx, conns[i])
			}
		})
	}
	wg.Wait()
	for _, c := range conns {
		if c != nil {
			c.Close()
		}
	}
	if slices.ContainsFunc(errs, func(err error) bool { return err == nil }) {
		return nil
	}
	return fmt.Errorf("controlplane: warm database connections: %w", errors.Join(errs...))
}

func warmBackend(ctx context.Context, c *sql.Conn) error {
	tx, err := c.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	id := NewID("warm_")
	now := Micros(time.Now())
	if _, err := tx.ExecContext(ctx, `INSERT INTO accounts (id, created_at) VALUES ($1, $2)`, id, now); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO namespaces (namespace, owner_id, created_at, updated_at) VALUES ($1, $1, $2, $2)`, id, now); err != nil {
		return err
	}
	var outcome, claim sql.NullString
	return tx.QueryRowContext(ctx, `SELECT outcome, claim FROM claims_submit($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)`,
		id, id, id, id, "192.0.2.1", "192.0.2.1", "", "", "", now, now-1, 1, 1).Scan(&outcome, &claim)
}

// enableWAL switches the SQLite file to write-ahead logging, which lets
// readers run beside the writer; the mode is stored in the file, so later
// connections inherit it. The switch needs a moment of exclusive access and
// SQLite reports a concurrent opener's switch as busy without waiting, so
// it is retried briefly.
func (d *DB) enableWAL(ctx context.Context) error {
	var err error
	for attempt := 0; attempt < 50; attempt++ {
		var mode string
		if err = d.db.QueryRowContext(ctx, `PRAGMA journal_mode=WAL`).Scan(&mode); err == nil {
			if mode != "wal" {
				return fmt.Errorf("controlplane: sqlite refused WAL mode (journal_mode %q)", mode)
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return Err("enable WAL", err)
}

// privateFiles creates the SQLite database file readable by its owner only
// (0600), and takes group and other access away from an existing one and
// from its -wal and -shm files, which hold the same data. SQLite creates
// the -wal and -shm files with the database file's mode, so a private
// database file keeps them private too.
func privateFiles(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("controlplane: create database file: %w", err)
	}
	f.Close()
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		fi, err := os.Stat(p)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("controlplane: database file: %w", err)
		}
		if fi.Mode().Perm()&0o077 != 0 {
			if err := os.Chmod(p, fi.Mode().Perm()&0o700); err != nil {
				return fmt.Errorf("controlplane: make database file private: %w", err)
			}
		}
	}
	return nil
}

// Close closes the database.
func (d *DB) Close() error { return d.db.Close() }

// Ping reports whether the database answers; the error wraps ErrUnavailable.
func (d *DB) Ping(ctx context.Context) error {
	if err := d.db.PingContext(ctx); err != nil {
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	return nil
}

// PG reports whether the database is PostgreSQL.
func (d *DB) PG() bool { return d.pg }

// Collector exports the connection pool's statistics to Prometheus,
// labelled db_name=name.
func (d *DB) Collector(name string) prometheus.Collector {
	return collectors.NewDBStatsCollector(d.db.DB, name)
}

// Prepare prepares a statement; a transaction runs it with tx.StmtContext.
func (d *DB) Prepare(ctx context.Context, q string) (*sql.Stmt, error) {
	return d.db.PrepareContext(ctx, q)
}

// Conn takes one connection of the pool for the caller alone (PostgreSQL's
// LISTEN needs one); the caller closes it.
func (d *DB) Conn(ctx context.Context) (*sql.Conn, error) { return d.db.Conn(ctx) }

// QueryContext runs a reading statement.
func (d *DB) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	return d.db.QueryContext(ctx, q, args...)
}

// QueryRowContext runs a reading statement that returns at most one row.
func (d *DB) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	return d.db.QueryRowContext(ctx, q, args...)
}

// Err classifies a database error: sql.ErrNoRows and context errors pass
// through, SQLite's busy (its writer stayed taken for busy_timeout) wraps
// ErrBusy, anything else is the database failing and wraps ErrUnavailable.
// op names what failed, for the log.
func Err(op string, err error) error {
	if err == nil || errors.Is(err, sql.ErrNoRows) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, ErrBusy) {
		return err
	}
	var coded interface{ Code() int }
	if errors.As(err, &coded) && coded.Code()&0xff == sqliteBusy {
		return fmt.Errorf("%w: %s: %v", ErrBusy, op, err)
	}
	return fmt.Errorf("%w: %s: %v", ErrUnavailable, op, err)
}

// sqliteBusy is SQLITE_BUSY, the primary code of every busy result.
const sqliteBusy = 5

// IsUniqueViolation reports a UNIQUE constraint failure on either engine.
func IsUniqueViolation(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code == "23505"
	}
	var coded interface{ Code() int }
	if errors.As(err, &coded) {
		return coded.Code() == 2067 || coded.Code() == 1555 // SQLITE_CONSTRAINT_UNIQUE, _PRIMARYKEY
	}
	return false
}

// SubmitRefusal reports the refusal that claims_submit raised with
// SubmitRefused (PostgreSQL only): "pending_limit" or "agent_pending_limit".
func SubmitRefusal(err error) (string, bool) {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == SubmitRefused {
		return pgErr.Message, true
	}
	return "", false
}

// ForUpdate is the row-lock suffix for a SELECT inside a transaction.
// SQLite has no row locks; its immediate transactions already hold the
// write lock.
func (d *DB) ForUpdate() string {
	if d.pg {
		return " FOR UPDATE"
	}
	return ""
}

// takeWriteTurn waits at most writeWait for SQLite's write turn (ErrBusy
// then) and returns its release; on PostgreSQL it returns at once.
func (d *DB) takeWriteTurn(ctx context.Context) (release func(), err error) {
	if d.writeTurn == nil {
		return func() {}, nil
	}
	t := time.NewTimer(d.writeWait)
	defer t.Stop()
	select {
	case d.writeTurn <- struct{}{}:
		return func() { <-d.writeTurn }, nil
	case <-t.C:
		return nil, fmt.Errorf("%w: no write turn within %v", ErrBusy, d.writeWait)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Exec runs a single writing statement outside a transaction, in the
// write turn like Tx, so that it queues with the transactions instead of
// polling SQLite's lock beside them.
func (d *DB) Exec(ctx context.Context, q string, args ...any) (sql.Result, error) {
	release, err := d.takeWriteTurn(ctx)
	if err != nil {
		return nil, err
	}
	defer release()
	return d.db.ExecContext(ctx, q, args...)
}

// WriteRow runs a writing statement that returns one row (… RETURNING)
// in the write turn like Exec; the turn is held until the row is scanned.
func (d *DB) WriteRow(ctx context.Context, q string, args ...any) Row {
	release, err := d.takeWriteTurn(ctx)
	if err != nil {
		return Row{err: err}
	}
	return Row{row: d.db.QueryRowContext(ctx, q, args...), release: release}
}

// Row is WriteRow's row: Scan scans it and gives the write turn back.
type Row struct {
	row     *sql.Row
	release func()
	err     error
}

// Scan copies the row's columns into dest like sql.Row.Scan.
func (r Row) Scan(dest ...any) error {
	if r.err != nil {
		return r.err
	}
	defer r.release()
	return r.row.Scan(dest...)
}

// Tx runs fn in a transaction and commits when fn returns nil, in the
// write turn on SQLite.
func (d *DB) Tx(ctx context.Context, fn func(*sql.Tx) error) error {
	span := d.db.startTx(ctx)
	defer span.End()
	release, err := d.takeWriteTurn(ctx)
	if err != nil {
		return err
	}
	defer release()
	tx, err := d.db.BeginTx(ctx, nil)
	if err != nil {
		span.SetStatus(codes.Error, "")
		return Err("begin", err)
	}
	if err := fn(tx); err != nil {
		tx.Rollback()
		span.SetStatus(codes.Error, "")
		return err
	}
	if err := tx.Commit(); err != nil {
		span.SetStatus(codes.Error, "")
		return Err("commit", err)
	}
	return nil
}

// Micros is t as stored: integer Unix microseconds.
func Micros(t time.Time) int64 { return t.UnixMicro() }

// FromMicros is the time stored as v, in UTC.
func FromMicros(v int64) time.Time { return time.UnixMicro(v).UTC() }

// FromNullMicros is FromMicros of a nullable column; NULL is the zero time.
func FromNullMicros(v sql.NullInt64) time.Time {
	if !v.Valid {
		return time.Time{}
	}
	return FromMicros(v.Int64)
}

// NullMicros is t as a nullable column; the zero time is NULL.
func NullMicros(t time.Time) sql.NullInt64 {
	if t.IsZero() {
		return sql.NullInt64{}
	}
	return sql.NullInt64{Int64: Micros(t), Valid: true}
}

// MigrationsCurrent reports whether the newest applied migration is the
// newest this binary knows.
func (d *DB) MigrationsCurrent(ctx context.Context) (bool, error) {
	var applied int
	if err := d.db.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&applied); err != nil {
		return false, Err("read schema version", err)
	}
	return applied == Version(), nil
}

// NewID is a fresh random row id: prefix and 32 hex digits.
func NewID(prefix string) string {
	var b [16]byte
	rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// The states of a namespace that refuse what needs an active one: it does
// not exist (LockNamespace's answer), or its account was deleted.
var (
	ErrNamespaceNotFound    = errors.New("controlplane: namespace not found")
	ErrNamespaceDeactivated = errors.New("controlplane: namespace deactivated")
)

// LockNamespace holds the row of namespace ns until tx ends (PostgreSQL;
// SQLite's immediate transactions already hold the write lock),
// serialising the quota checks of one namespace.
func (d *DB) LockNamespace(ctx context.Context, tx *sql.Tx, ns string) error {
	var name string
	err := tx.QueryRowContext(ctx, `SELECT namespace FROM namespaces WHERE namespace = $1`+d.ForUpdate(), ns).Scan(&name)
	if errors.Is(err, sql.ErrNoRows) {
		return ErrNamespaceNotFound
	}
	return Err("lock namespace", err)
}
