// Package pgstore keeps a credvault.Vault's records in PostgreSQL, so that
// every replica of a gateway fleet serves the same connections, sealed
// secrets and credential variables. A commit by any replica NOTIFYs the
// others, whose Vaults reload at once (credvault.Notifier).
//
// Secrets stay sealed under the master key, which every replica must share:
// the database never sees one in clear. When PostgreSQL stops answering,
// each Vault keeps serving what it loaded, and writes fail with
// credvault.ErrStoreUnavailable.
//
// Store.Holds keeps the fleet's calls held for their owner's approval
// (approval.Store): a use taken on one replica is taken for all, durably.
// PostgreSQL counts them, not Redis, whose restart or failover can bring
// back a use already taken.
//
// It is a module of its own, so that a program that keeps its connections
// elsewhere links no PostgreSQL driver.
//
//	st, err := pgstore.Open(ctx, pgstore.Config{URL: os.Getenv("GATEWAY_DATABASE_URL")})
//	if err != nil {
//		return err
//	}
//	defer st.Close()
//	vault, err := credvault.New(ctx, credvault.Config{Store: st, MasterKey: key})
//
// docs/gateway.md, "Running a fleet", tells how to deploy it.
package pgstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/idnhq/idn/credvault"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// channel is the NOTIFY channel of every commit. Its payload is the
// schema written, so stores in other schemas of one database ignore it.
const channel = "idn_credvault"

// DefaultConnectTimeout bounds a connection attempt when the URL sets
// none, so that a database out of reach fails a write well within the
// admin API's timeout instead of holding it.
const DefaultConnectTimeout = 5 * time.Second

// reconnectDelay is the pause before the listener connects again.
const reconnectDelay = time.Second

// Config locates the database.
type Config struct {
	// URL is the PostgreSQL connection URL or DSN, in any form pgx
	// accepts (GATEWAY_DATABASE_URL in cmd/gateway). Its search_path
	// selects the schema of the tables. Required.
	URL string
	// MaxConns bounds the connection pool, the listener's connection
	// apart. Zero means pgx's default (the larger of 4 and the CPUs).
	MaxConns int32
	// Logger receives the listener's reconnections, never a record. Nil
	// discards.
	Logger *slog.Logger
}

// Store is a credvault.Store on PostgreSQL, shared by every replica that
// opens the same database and schema. Writers serialize on one row lock;
// readers never wait for them.
type Store struct {
	pool    *pgxpool.Pool
	listen  *pgx.ConnConfig
	schema  string
	log     *slog.Logger
	changes chan struct{}

	stop      context.CancelFunc
	done      chan struct{}
	closeOnce sync.Once
}

var (
	_ credvault.Store    = (*Store)(nil)
	_ credvault.Notifier = (*Store)(nil)
)

// Open connects to the database, applies pending migrations and starts
// listening for other replicas' commits. A schema written by a newer
// version of this package is refused.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	if cfg.URL == "" {
		return nil, errors.New("pgstore: Config.URL is required")
	}
	pc, err := pgxpool.ParseConfig(cfg.URL)
	if err != nil {
		// pgx's message may quote the URL, password included.
		return nil, errors.New("pgstore: Config.URL is not a PostgreSQL connection URL")
	}
	if pc.ConnConfig.ConnectTimeout == 0 {
		pc.ConnConfig.ConnectTimeout = DefaultConnectTimeout
	}
	if cfg.MaxConns > 0 {
		pc.MaxConns = cfg.MaxConns
	}
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, classify("connecting", err)
	}
	s := &Store{pool: pool, listen: pc.ConnConfig.Copy(), log: cfg.Logger, changes: make(chan struct{}, 1), done: make(chan struct{})}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if err := s.migrate(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	if err := pool.QueryRow(ctx, "SELECT current_schema()").Scan(&s.schema); err != nil {
		pool.Close()
		return nil, classify("connecting", err)
	}
	lctx, stop := context.WithCancel(context.Background())
	s.stop = stop
	go s.listenLoop(lctx)
	return s, nil
}

// Close stops listening and closes the pool. The Vault on top must be
// closed first.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.stop()
		<-s.done
		s.pool.Close()
	})
	return nil
}

// Changes receives after a commit by any replica, and after the listener
// (re)connects, since commits made while it was away sent it nothing.
func (s *Store) Changes() <-chan struct{} { return s.changes }

func (s *Store) signal() {
	select {
	case s.changes <- struct{}{}:
	default: // one pending notice stands for any number
	}
}

// listenLoop keeps the listener up, logging when it fails after having
// listened, not at each of its reconnections while the database is away.
func (s *Store) listenLoop(ctx context.Context) {
	defer close(s.done)
	for {
		listened, err := s.listenOnce(ctx)
		if ctx.Err() != nil {
			return
		}
		if listened {
			s.log.Warn("pgstore: LISTEN connection failed; reconnecting every second", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(reconnectDelay):
		}
	}
}

// listenOnce holds one connection, outside the pool, in LISTEN until ctx
// ends or the connection fails. listened reports whether LISTEN ran.
func (s *Store) listenOnce(ctx context.Context) (listened bool, err error) {
	conn, err := pgx.ConnectConfig(ctx, s.listen.Copy())
	if err != nil {
		return false, err
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "LISTEN "+channel); err != nil {
		return false, err
	}
	s.signal()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return true, err
		}
		if n.Payload == s.schema {
			s.signal()
		}
	}
}

// Generation reads the commit counter every Update increments.
func (s *Store) Generation(ctx context.Context) (uint64, error) {
	var g int64
	if err := s.pool.QueryRow(ctx, "SELECT value FROM credvault_generation").Scan(&g); err != nil {
		return 0, classify("polling store", err)
	}
	return uint64(g), nil
}

// Load reads every record in one repeatable-read transaction.
func (s *Store) Load(ctx context.Context) (*credvault.Records, error) {
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, classify("loading store", err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	return loadRecords(ctx, tx)
}

// Update locks the commit counter's row, which serializes writers across
// replicas, runs fn on the records it then reads, writes what fn changed,
// increments the counter and NOTIFYs, all in one transaction.
func (s *Store) Update(ctx context.Context, fn func(*credvault.Records) error) error {
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	if err != nil {
		return classify("starting write", err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	if _, err := tx.Exec(ctx, "SELECT value FROM credvault_generation FOR UPDATE"); err != nil {
		return classify("starting write", err)
	}
	before, err := loadRecords(ctx, tx)
	if err != nil {
		return err
	}
	after := before.Clone()
	if err := fn(after); err != nil {
		return err
	}
	b, err := writeDiff(before, after)
	if err != nil {
		return err
	}
	b.Queue("UPDATE credvault_generation SET value = value + 1")
	b.Queue("SELECT pg_notify($1, current_schema())", channel)
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return classify("writing", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return classify("committing write", err)
	}
	return nil
}

// classify wraps err with credvault.ErrStoreUnavailable unless the
// database answered it (a constraint, a syntax error) or the caller's
// context ended.
func classify(op string, err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("pgstore: %s: %w", op, err)
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && !unavailableClass(pgErr.Code) {
		return fmt.Errorf("pgstore: %s: %w", op, err)
	}
	return fmt.Errorf("pgstore: %s: %w: %w", op, credvault.ErrStoreUnavailable, err)
}

// unavailableClass reports SQLSTATEs of a server that cannot serve:
// connection exceptions (08), insufficient resources (53) and operator
// intervention such as a shutdown (57P).
func unavailableClass(code string) bool {
	return strings.HasPrefix(code, "08") || strings.HasPrefix(code, "53") || strings.HasPrefix(code, "57P")
}

// TryLock takes, without waiting, the advisory lock name for the whole
// fleet, on a connection of its own: ok is false while any replica holds
// it. The lock lasts until unlock, or until its connection ends (the
// process dies, the database restarts), so another replica takes over.
func (s *Store) TryLock(ctx context.Context, name string) (unlock func(), ok bool, err error) {
	conn, err := pgx.ConnectConfig(ctx, s.listen.Copy())
	if err != nil {
		return nil, false, classify("locking", err)
	}
	if err := conn.QueryRow(ctx, "SELECT pg_try_advisory_lock(hashtextextended($1, 0))", name).Scan(&ok); err != nil {
		conn.Close(context.Background())
		return nil, false, classify("locking", err)
	}
	if !ok {
		conn.Close(context.Background())
		return nil, false, nil
	}
	// Unlocking before closing frees the lock when unlock returns; a
	// closed connection's backend lets it go a moment later.
	return func() {
		uctx, cancel := context.WithTimeout(context.Background(), DefaultConnectTimeout)
		defer cancel()
		_, _ = conn.Exec(uctx, "SELECT pg_advisory_unlock(hashtextextended($1, 0))", name)
		conn.Close(uctx)
	}, true, nil
}
