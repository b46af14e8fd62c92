package sqldb_test

import (
	"context"
	"database/sql"
	"net/url"
	"testing"

	"github.com/idnhq/idn/controlplane/internal/sqldb"
	"github.com/idnhq/idn/controlplane/internal/sqldb/sqldbtest"
)

// TestWarmingWritesNothing: Open warms every PostgreSQL connection with a
// claim submission that it rolls back, so a fresh database is still empty
// (but for the schema's own record of its migrations) and a first real
// submission finds nothing of the warm-up.
func TestWarmingWritesNothing(t *testing.T) {
	db := sqldbtest.Open(t, sqldb.ProviderPostgres)
	ctx := context.Background()
	rows, err := db.QueryContext(ctx, `SELECT table_name FROM information_schema.tables
		WHERE table_schema = current_schema() AND table_type = 'BASE TABLE' AND table_name <> 'schema_migrations'`)
	if err != nil {
		t.Fatal(err)
	}
	var tables []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			t.Fatal(err)
		}
		tables = append(tables, name)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(tables) < 10 {
		t.Fatalf("only %d tables found: %v", len(tables), tables)
	}
	for _, table := range tables {
		var n int
		if err := db.QueryRowContext(ctx, `SELECT count(*) FROM `+table).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			t.Errorf("table %s has %d rows after Open", table, n)
		}
	}
}

// TestWarmingLeavesRefusedConnectionsCold: a server that allows fewer
// connections than the pool holds still opens the store; the connections
// it refused are left to be opened on demand.
func TestWarmingLeavesRefusedConnectionsCold(t *testing.T) {
	base := sqldbtest.Config(t, sqldb.ProviderPostgres).DatabaseURL // a fresh schema, dropped at cleanup
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	schema := u.Query().Get("search_path")
	admin, err := sql.Open("pgx", base)
	if err != nil {
		t.Fatal(err)
	}
	role := "r_" + schema
	for _, q := range []string{
		`CREATE ROLE ` + role + ` LOGIN CONNECTION LIMIT 3`,
		`GRANT ALL ON SCHEMA ` + schema + ` TO ` + role,
	} {
		if _, err := admin.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, q := range []string{`DROP OWNED BY ` + role + ` CASCADE`, `DROP ROLE ` + role} {
			if _, err := admin.Exec(q); err != nil {
				t.Errorf("%s: %v", q, err)
			}
		}
		admin.Close()
	})
	u.User = url.User(role)
	db, err := sqldb.Open(context.Background(), sqldb.Config{Provider: sqldb.ProviderPostgres, DatabaseURL: u.String(), MaxOpenConns: 8})
	if err != nil {
		t.Fatalf("open with 3 connections allowed for a pool of 8: %v", err)
	}
	defer db.Close()
	if err := db.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
}
