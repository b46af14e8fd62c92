package controlplane

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"github.com/idnhq/idn/controlplane/internal/claims"
	"github.com/idnhq/idn/controlplane/internal/sqldb"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/idnhq/idn/identity"
)

// populateFeed inserts n approved claims of service "github" in namespace
// "acme" in multi-row batches, and returns a key of the service.
func populateFeed(tb testing.TB, st *Store, n int) string {
	tb.Helper()
	ctx := context.Background()
	now := time.Now()
	key, err := claimsAPI(st).Provision(ctx, "acme", claims.ServiceSpec{Slug: "github", Name: "GitHub", Endpoint: "https://gh.example"})
	if err != nil {
		tb.Fatal(err)
	}
	const batch = 500
	for start := 0; start < n; start += batch {
		var (
			rows []string
			args []any
		)
		for i := start; i < min(start+batch, n); i++ {
			pub, _, _ := ed25519.GenerateKey(rand.Reader)
			at := sqldb.Micros(now) + int64(i)
			p := len(args)
			rows = append(rows, fmt.Sprintf("($%d, 'acme', $%d, 'github', '127.0.0.1', 'alice', '', '', 'approved', $%d, $%d, $%d)", p+1, p+2, p+3, p+3, p+3))
			args = append(args, sqldb.NewID("clm_"), identity.FormatPublicKey(pub), at)
		}
		if _, err := st.db.Exec(ctx, `INSERT INTO claims (id, namespace, public_key, service, agent_ip, subject, agent_id, agent_name, status, created_at, updated_at, approved_at)
			VALUES `+strings.Join(rows, ", "), args...); err != nil {
			tb.Fatal(err)
		}
	}
	if st.db.PG() {
		st.db.Exec(ctx, `ANALYZE claims`)
	}
	return key
}

// BenchmarkFeed reads the whole approved-claims feed of 100,000 claims by
// pagination (50 signed HTTP requests of 2,000 claims, as a gateway does)
// and reports ms per page, end to end (http: client signing and decoding
// included) and server side only (handler: ServeHTTP on a recorder). The offset_only variant measures the store with plain
// offset paging (no remembered cursor), the worst case of a client that
// jumps around or alternates between instances.
func BenchmarkFeed(b *testing.B) {
	const total, pageSize = 100_000, 2000
	for _, engine := range engines {
		b.Run(engine, func(b *testing.B) {
			st := openStore(b, storeConfig(b, engine))
			key := populateFeed(b, st, total)
			srv, err := New(Config{Store: st, JWTSecret: testSecret})
			if err != nil {
				b.Fatal(err)
			}
			ts := httptest.NewServer(srv)
			defer ts.Close()
			agent, _ := identity.New("gateway")
			pages := total / pageSize

			b.Run("http", func(b *testing.B) {
				start := time.Now()
				for b.Loop() {
					seen := 0
					for off := 0; ; off += pageSize {
						req, _ := http.NewRequest("GET", fmt.Sprintf("%s/v1/namespaces/claims?service=github&limit=%d&offset=%d", ts.URL, pageSize, off), nil)
						req.Header.Set("Authorization", "Bearer "+key)
						if err := agent.Sign(req, identity.SignOptions{}); err != nil {
							b.Fatal(err)
						}
						res, err := ts.Client().Do(req)
						if err != nil {
							b.Fatal(err)
						}
						var body struct {
							Claims     []json.RawMessage `json:"claims"`
							Pagination struct {
								HasMore bool `json:"has_more"`
							} `json:"pagination"`
						}
						err = json.NewDecoder(res.Body).Decode(&body)
						res.Body.Close()
						if err != nil || res.StatusCode != 200 {
							b.Fatalf("page at %d: %d %v", off, res.StatusCode, err)
						}
						seen += len(body.Claims)
						if !body.Pagination.HasMore {
							break
						}
					}
					if seen != total {
						b.Fatalf("read %d claims, want %d", seen, total)
					}
				}
				b.ReportMetric(float64(time.Since(start).Microseconds())/1000/float64(b.N*pages), "ms/page")
			})
			b.Run("handler", func(b *testing.B) {
				start := time.Now()
				for b.Loop() {
					for off := 0; off < total; off += pageSize {
						req := httptest.NewRequest("GET", fmt.Sprintf("http://cp.test/v1/namespaces/claims?service=github&limit=%d&offset=%d", pageSize, off), nil)
						req.RequestURI = req.URL.RequestURI() // origin-form, as a client sends it
						req.Header.Set("Authorization", "Bearer "+key)
						if err := agent.Sign(req, identity.SignOptions{}); err != nil {
							b.Fatal(err)
						}
						w := httptest.NewRecorder()
						srv.ServeHTTP(w, req)
						if w.Code != 200 {
							b.Fatalf("page at %d: %d %s", off, w.Code, w.Body)
						}
					}
				}
				b.ReportMetric(float64(time.Since(start).Microseconds())/1000/float64(b.N*pages), "ms/page")
			})

		})
	}
}

// BenchmarkResolveDID serves /1.0/identifiers for a namespace with 20
// approved keys, in process.
func BenchmarkResolveDID(b *testing.B) {
	for _, engine := range engines {
		b.Run(engine, func(b *testing.B) {
			st := openStore(b, storeConfig(b, engine))
			populateFeed(b, st, 20)
			srv, err := New(Config{Store: st, JWTSecret: testSecret})
			if err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				w := httptest.NewRecorder()
				srv.ServeHTTP(w, httptest.NewRequest("GET", "/1.0/identifiers/did:idn:acme", nil))
				if w.Code != 200 {
					b.Fatal(w.Code, w.Body)
				}
			}
		})
	}
}
