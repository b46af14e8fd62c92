package sqldb_test

import (
	"context"
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
