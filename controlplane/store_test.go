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

func FuzzSubmitRequest(f *testing.F) {
	f.Add("acme", "ed25519:11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo=", "github", "203.0.113.1", "alice")
	f.Add("a", "z6MkhaXgBZDvotDkL5257faiztiGiC2QtKLGpbnnEGta2doK", "", "::1", "")
	f.Add("acme", "ed25519:", "x", "not-ip", "\x00")
	f.Fuzz(func(t *testing.T, ns, pub, svc, ip, subject string) {
		c, e := submitRequest{Namespace: ns, PublicKey: pub, Service: svc, AgentIP: ip, Subject: subject}.validate()
		if e != nil {
			if e.Code().Status() != 400 {
				t.Fatalf("status %d", e.Code().Status())
			}
			return
		}
		if c.Namespace != ns || !strings.HasPrefix(c.PublicKey, "ed25519:") || len(c.PublicKey) != 52 || c.Service != svc {
			t.Fatalf("accepted %+v", c)
		}
	})
}
