package pgstore_test

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idnhq/idn/approval"
	"github.com/idnhq/idn/approval/holdtest"
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

// BenchmarkReleaseHeldCall is what the store adds to a call the owner
// approved: the hold's read and the use taken. Memory is the single
// process's default; sqlite a restart-proof gateway's; postgres a fleet's.
func BenchmarkReleaseHeldCall(b *testing.B) {
	stores := map[string]func(b *testing.B) approval.Store{
		"memory": func(*testing.B) approval.Store { return &approval.MemoryStore{} },
		"sqlite": func(b *testing.B) approval.Store {
			st, err := sqlitestore.Open(context.Background(), filepath.Join(b.TempDir(), sqlitestore.DefaultFileName))
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { st.Close() })
			return st.Holds()
		},
		"postgres": func(b *testing.B) approval.Store { return open(b, testDatabase(b)).Holds() },
	}
	for _, name := range []string{"memory", "sqlite", "postgres"} {
		b.Run(name, func(b *testing.B) {
			ctx := context.Background()
			st := stores[name](b)
			h := holdtest.NewHold(strings.Repeat("ab", 32))
			if _, err := st.Add(ctx, h, holdtest.Now); err != nil {
				b.Fatal(err)
			}
			a := holdtest.Approved(math.MaxInt32)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := st.Hold(ctx, h.Binding); err != nil {
					b.Fatal(err)
				}
				if ok, err := st.Spend(ctx, h.Binding, h.ID, a); err != nil || !ok {
					b.Fatal(ok, err)
				}
			}
		})
	}
}
