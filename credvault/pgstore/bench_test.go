package pgstore_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/idnhq/idn/credvault"
	"github.com/idnhq/idn/credvault/sqlitestore"
	"github.com/idnhq/idn/credvault/storetest"
	"github.com/idnhq/idn/gateway"
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

// BenchmarkGatewayRequest is one request through a whole gateway whose
// vault is on each store: an unsigned connection (no control plane) to a
// loopback upstream, which takes most of the time.
func BenchmarkGatewayRequest(b *testing.B) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("ok")) }))
	defer up.Close()
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
			// The control plane is never reached: the connection is served
			// unsigned.
			cfg := gateway.Config{DataDir: b.TempDir(), MasterKey: storetest.Key(b), Store: stores[name](b), ControlPlaneURL: "http://127.0.0.1:1"}
			cfg.Proxy.InsecureUnsignedConnections = []string{"up"}
			gw, err := gateway.New(cfg)
			if err != nil {
				b.Fatal(err)
			}
			defer gw.Close()
			if _, err := gw.Vault().Create(context.Background(), &credvault.Connection{ID: "up", BaseURL: up.URL,
				AuthMode: credvault.AuthBearer, AuthSecretKey: "token"}, map[string]string{"token": "tok-secret-value"}); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				w := httptest.NewRecorder()
				gw.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/proxy/up/x", nil))
				if w.Code != http.StatusOK {
					b.Fatalf("status %d: %s", w.Code, w.Body)
				}
			}
		})
	}
}
