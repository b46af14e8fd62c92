package pgstore_test

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"testing"

	"github.com/idnhq/idn/credvault"
	"github.com/idnhq/idn/credvault/sqlitestore"
	"github.com/idnhq/idn/credvault/storetest"
)

// BenchmarkServeLoaded is what a request costs the vault once loaded: a
// lookup and the credential put on the outbound request. The store
// behind the snapshot should not matter; the figures show it does not.
func BenchmarkServeLoaded(b *testing.B) {
	stores := map[string]func(b *testing.B) credvault.Store{
		"sqlite": func(b *testing.B) credvault.Store {
			st, err := sqlitestore.Open(context.Background(), filepath.Join(b.TempDir(), sqlitestore.DefaultFileName))
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { st.Close() })
			return st
		},
		"postgres": func(b *testing.B) credvault.Store { return open(b, testDatabase(b)) },
	}
	for _, name := range []string{"sqlite", "postgres"} {
		b.Run(name, func(b *testing.B) {
			v := storetest.OpenVault(b, stores[name](b), 0)
			for i := range 100 {
				if _, err := v.Create(context.Background(), storetest.Conn(fmt.Sprintf("c-%d", i)), map[string]string{"token": "tok-secret-value"}); err != nil {
					b.Fatal(err)
				}
			}
			req, _ := http.NewRequest(http.MethodGet, "https://api.github.com/user", nil)
			b.ReportAllocs()
			for b.Loop() {
				r, ok := v.Lookup("c-42")
				if !ok {
					b.Fatal("lookup failed")
				}
				secret, err := r.Secret()
				if err != nil {
					b.Fatal(err)
				}
				credvault.Inject(req, r.Connection, secret)
			}
		})
	}
}
