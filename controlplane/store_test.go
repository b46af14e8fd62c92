package controlplane

import (
	"context"
	"github.com/idnhq/idn/controlplane/internal/sqldb"
	"strings"
	"sync"
	"testing"
)

func TestMigrations(t *testing.T) {
	t.Parallel()
	for _, engine := range engines {
		t.Run(engine, func(t *testing.T) {
			cfg := storeConfig(t, engine)
			// Several instances starting at once on one database.
			var wg sync.WaitGroup
			errs := make([]error, 3)
			for i := range errs {
				wg.Go(func() {
					st, err := Open(context.Background(), cfg)
					if err == nil {
						st.Close()
					}
					errs[i] = err
				})
			}
			wg.Wait()
			for _, err := range errs {
				if err != nil {
					t.Fatal(err)
				}
			}
			st := openStore(t, cfg)
			rows, err := st.db.QueryContext(context.Background(), `SELECT version FROM schema_migrations ORDER BY version`)
			if err != nil {
				t.Fatal(err)
			}
			var got []int
			for rows.Next() {
				var v int
				rows.Scan(&v)
				got = append(got, v)
			}
			rows.Close()
			if len(got) != sqldb.Version() || got[len(got)-1] != sqldb.Version() {
				t.Fatalf("applied versions %v, want 1 to %d", got, sqldb.Version())
			}
		})
	}
}

func TestOpenConfigErrors(t *testing.T) {
	t.Parallel()
	for name, cfg := range map[string]StoreConfig{
		"unknown provider":  {Provider: "mysql"},
		"sqlite no path":    {Provider: ProviderSQLite},
		"postgres no url":   {Provider: ProviderPostgres},
		"postgres no route": {Provider: ProviderPostgres, DatabaseURL: "postgres://nobody@127.0.0.1:1/x?sslmode=disable&connect_timeout=1"},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := Open(context.Background(), cfg); err == nil || !strings.HasPrefix(err.Error(), "controlplane: ") {
				t.Fatalf("Open = %v, want a controlplane error", err)
			}
		})
	}
}
