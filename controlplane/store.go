package controlplane

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" database/sql driver
	_ "modernc.org/sqlite"             // registers the "sqlite" database/sql driver

	"github.com/idnhq/idn/internal/tracing"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// Storage providers accepted in StoreConfig.Provider (ADAPTER_PROVIDER).
const (
	ProviderSQLite   = "sqlite"
	ProviderPostgres = "postgres"
)

// ErrUnavailable wraps every store error caused by the database itself
// (connection refused, closed pool, I/O error) rather than by the request.
// The HTTP layer answers it with 503 DATABASE_UNAVAILABLE.
var ErrUnavailable = errors.New("controlplane: database unavailable")

// ErrBusy is a write refused because SQLite's single writer stayed taken
// for StoreConfig.WriteWait. The HTTP layer answers it with 503
// DATABASE_BUSY and a Retry-After, rather than holding the request.
var ErrBusy = errors.New("controlplane: database busy")

// StoreConfig selects and locates the database.
type StoreConfig struct {
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
	// transaction (store_trace.go). Nil means none, at no cost.
	TracerProvider trace.TracerProvider
	// WriteWait bounds how long a write waits for SQLite's single writer
	// (a transaction of this Store, or another process's, through
	// busy_timeout) before it fails with ErrBusy; zero means one second.
	// PostgreSQL, whose writers do not exclude each other, ignores it.
	WriteWait time.Duration
}

// Store is the control plane's database: SQLite or PostgreSQL behind one
// schema. Every piece of shared state (nonces, sessions, claims) lives here,
// so several control-plane instances can share one PostgreSQL database.
// A Store is safe for concurrent use.
type Store struct {
	db    *tracedDB
	pg    bool
	relay gatewayRelay // gateway sockets held by this instance (gateways_relay.go)

	// SQLite only: the write turn, taken by every transaction for at most
	// writeWait. Waiting here is first come, first served, where
	// SQLite's own busy handler polls with growing sleeps and lets a
	// late writer overtake waiting ones, so a queue of 32 stalled for
	// seconds.
	writeTurn chan struct{}
	writeWait time.Duration

	submit submitStatements
}

// Open connects to the database and applies pending migrations. Concurrent
// Opens against one PostgreSQL database serialise their migrations.
func Open(ctx context.Context, cfg StoreConfig) (*Store, error) {
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
	s := &Store{db: &tracedDB{DB: db, tracer: tracing.New(cfg.TracerProvider, "github.com/idnhq/idn/controlplane"), system: system}, pg: pg}
	if !pg {
		s.writeTurn, s.writeWait = make(chan struct{}, 1), wait
		if err := s.enableWAL(ctx); err != nil {
			db.Close()
			return nil, err
		}
	}
	if err := s.migrate(ctx, migrations); err != nil {
		db.Close()
		return nil, err
	}
	if err := s.prepareSubmit(ctx); err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}

// enableWAL switches the SQLite file to write-ahead logging, which lets
// readers run beside the writer; the mode is stored in the file, so later
// connections inherit it. The switch needs a moment of exclusive access and
// SQLite reports a concurrent opener's switch as busy without waiting, so
// it is retried briefly.
func (s *Store) enableWAL(ctx context.Context) error {
	var err error
	for attempt := 0; attempt < 50; attempt++ {
		var mode string
		if err = s.db.QueryRowContext(ctx, `PRAGMA journal_mode=WAL`).Scan(&mode); err == nil {
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
	return dbErr("enable WAL", err)
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
func (s *Store) Close() error { return s.db.Close() }

// Ping reports whether the database answers; the error wraps ErrUnavailable.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.db.PingContext(ctx); err != nil {
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	return nil
}

// dbErr classifies a database error: sql.ErrNoRows and context errors pass
// through, SQLite's busy (its writer stayed taken for busy_timeout) wraps
// ErrBusy, anything else is the database failing and wraps ErrUnavailable.
func dbErr(op string, err error) error {
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

// forUpdate is the row-lock suffix for a SELECT inside a transaction. SQLite
// has no row locks; its immediate transactions already hold the write lock.
func (s *Store) forUpdate() string {
	if s.pg {
		return " FOR UPDATE"
	}
	return ""
}

// takeWriteTurn waits at most writeWait for SQLite's write turn (ErrBusy
// then) and returns its release; on PostgreSQL it returns at once.
func (s *Store) takeWriteTurn(ctx context.Context) (release func(), err error) {
	if s.writeTurn == nil {
		return func() {}, nil
	}
	t := time.NewTimer(s.writeWait)
	defer t.Stop()
	select {
	case s.writeTurn <- struct{}{}:
		return func() { <-s.writeTurn }, nil
	case <-t.C:
		return nil, fmt.Errorf("%w: no write turn within %v", ErrBusy, s.writeWait)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// exec runs a single writing statement outside a transaction, in the
// write turn like tx, so that it queues with the transactions instead of
// polling SQLite's lock beside them.
func (s *Store) exec(ctx context.Context, q string, args ...any) (sql.Result, error) {
	release, err := s.takeWriteTurn(ctx)
	if err != nil {
		return nil, err
	}
	defer release()
	return s.db.ExecContext(ctx, q, args...)
}

// writeRow runs a writing statement that returns one row (… RETURNING)
// in the write turn like exec; the turn is held until the row is scanned.
func (s *Store) writeRow(ctx context.Context, q string, args ...any) turnRow {
	release, err := s.takeWriteTurn(ctx)
	if err != nil {
		return turnRow{err: err}
	}
	return turnRow{row: s.db.QueryRowContext(ctx, q, args...), release: release}
}

// turnRow is writeRow's row: Scan scans it and gives the write turn back.
type turnRow struct {
	row     *sql.Row
	release func()
	err     error
}

func (r turnRow) Scan(dest ...any) error {
	if r.err != nil {
		return r.err
	}
	defer r.release()
	return r.row.Scan(dest...)
}

// tx runs fn in a transaction and commits when fn returns nil, in the
// write turn on SQLite (see takeWriteTurn).
func (s *Store) tx(ctx context.Context, fn func(*sql.Tx) error) error {
	span := s.db.startTx(ctx)
	defer span.End()
	release, err := s.takeWriteTurn(ctx)
	if err != nil {
		return err
	}
	defer release()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		span.SetStatus(codes.Error, "")
		return dbErr("begin", err)
	}
	if err := fn(tx); err != nil {
		tx.Rollback()
		span.SetStatus(codes.Error, "")
		return err
	}
	if err := tx.Commit(); err != nil {
		span.SetStatus(codes.Error, "")
		return dbErr("commit", err)
	}
	return nil
}

// Times are stored as integer Unix microseconds in both engines, so ordering
// and comparison are identical everywhere and no driver converts zones.
func micros(t time.Time) int64 { return t.UnixMicro() }

func fromMicros(v int64) time.Time { return time.UnixMicro(v).UTC() }

func fromNullMicros(v sql.NullInt64) time.Time {
	if !v.Valid {
		return time.Time{}
	}
	return fromMicros(v.Int64)
}

func nullMicros(t time.Time) sql.NullInt64 {
	if t.IsZero() {
		return sql.NullInt64{}
	}
	return sql.NullInt64{Int64: micros(t), Valid: true}
}
