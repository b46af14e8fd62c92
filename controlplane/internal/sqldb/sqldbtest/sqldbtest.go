// Package sqldbtest gives tests a fresh, isolated control-plane database of
// either engine: a SQLite file in a temporary directory, or a schema of its
// own in the PostgreSQL server named by IDN_TEST_POSTGRES_URL.
package sqldbtest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idnhq/idn/controlplane/internal/sqldb"
)

// Engines lists the storage engines every store test runs against.
var Engines = []string{sqldb.ProviderSQLite, sqldb.ProviderPostgres}

// postgresURL returns IDN_TEST_POSTGRES_URL, skipping the test visibly when
// it is unset, and failing instead when CI=true.
func postgresURL(tb testing.TB) string {
	tb.Helper()
	u := os.Getenv("IDN_TEST_POSTGRES_URL")
	if u == "" {
		if os.Getenv("CI") == "true" {
			tb.Fatal("IDN_TEST_POSTGRES_URL is unset but CI=true: PostgreSQL tests must run in CI (see .ci/run)")
		}
		tb.Skip("PostgreSQL tests skipped: IDN_TEST_POSTGRES_URL is unset (bash .ci/run starts a server)")
	}
	return u
}

// Config returns a configuration for a fresh, isolated database of
// the engine: a SQLite file in a temp dir, or a new PostgreSQL schema that
// is dropped at cleanup (with a pool of testPoolSize connections, except
// in benchmarks).
func Config(tb testing.TB, engine string) sqldb.Config {
	tb.Helper()
	if engine == sqldb.ProviderSQLite {
		return sqldb.Config{Provider: sqldb.ProviderSQLite, SQLitePath: filepath.Join(tb.TempDir(), "cp.db")}
	}
	base := postgresURL(tb)
	var b [6]byte
	rand.Read(b[:])
	schema := "t_" + hex.EncodeToString(b[:])
	admin, err := sql.Open("pgx", base)
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := admin.Exec(`CREATE SCHEMA ` + schema); err != nil {
		admin.Close()
		tb.Fatalf("create schema: %v", err)
	}
	tb.Cleanup(func() {
		admin.Exec(`DROP SCHEMA ` + schema + ` CASCADE`)
		admin.Close()
	})
	sep := "?"
	if strings.Contains(base, "?") {
		sep = "&"
	}
	cfg := sqldb.Config{Provider: sqldb.ProviderPostgres, DatabaseURL: base + sep + "search_path=" + schema}
	if _, bench := tb.(*testing.B); !bench {
		// A PostgreSQL store opens and keeps its whole pool; tests run
		// many stores side by side on one server, benchmarks one.
		cfg.MaxOpenConns = testPoolSize
	}
	return cfg
}

// testPoolSize is the connection pool of a test's PostgreSQL store.
const testPoolSize = 4

// Open opens a fresh database of the engine, closed when the test ends.
func Open(tb testing.TB, engine string) *sqldb.DB {
	tb.Helper()
	db, err := sqldb.Open(context.Background(), Config(tb, engine))
	if err != nil {
		tb.Fatalf("open %s database: %v", engine, err)
	}
	tb.Cleanup(func() { db.Close() })
	return db
}
