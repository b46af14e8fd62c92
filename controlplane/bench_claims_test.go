package controlplane

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"github.com/idnhq/idn/controlplane/internal/claims"
	"github.com/idnhq/idn/controlplane/internal/dashboard"
	"github.com/idnhq/idn/controlplane/internal/sqldb"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idnhq/idn/identity"
)

// claimsMix is how the 100,000 claims of the claims benchmarks are spread
// over the statuses: mostly approved, a pending pile of 20,000.
var claimsMix = []struct {
	status string
	n      int
}{{StatusApproved, 60_000}, {StatusPending, 20_000}, {StatusRevoked, 10_000}, {StatusRejected, 5_000}, {StatusExpired, 5_000}}

// claimsServices are the services the benchmark claims are spread over.
var claimsServices = []string{"github", "gitlab", "slack"}

// populateClaims inserts the claimsMix into namespace "acme" in multi-row
// batches, newest first one microsecond apart (all younger than the
// pending expiry), spread over claimsServices and 250 agent addresses.
// It returns an API key of service "github".
func populateClaims(tb testing.TB, st *Store) string {
	tb.Helper()
	ctx := context.Background()
	now := time.Now()
	if _, err := claimsAPI(st).Provision(ctx, "acme", claims.ServiceSpec{}); err != nil {
		tb.Fatal(err)
	}
	var key string
	for _, slug := range claimsServices {
		k, err := claimsAPI(st).Provision(ctx, "acme", claims.ServiceSpec{Slug: slug, Name: slug, Endpoint: "https://" + slug + ".example"})
		if err != nil {
			tb.Fatal(err)
		}
		if slug == "github" {
			key = k
		}
	}
	const batch = 100 // SQLite resolves $n names in time quadratic in their count
	i := 0
	for _, m := range claimsMix {
		for start := 0; start < m.n; start += batch {
			var (
				rows []string
				args []any
			)
			for range min(batch, m.n-start) {
				pub, _, _ := ed25519.GenerateKey(rand.Reader)
				at := sqldb.Micros(now) - int64(i)
				ip := fmt.Sprintf("192.0.2.%d", i%250)
				p := len(args)
				rows = append(rows, fmt.Sprintf("($%d, 'acme', $%d, $%d, $%d, $%d, 'alice', '', '', $%d, $%d, $%d)", p+1, p+2, p+3, p+4, p+5, p+6, p+7, p+7))
				args = append(args, sqldb.NewID("clm_"), identity.FormatPublicKey(pub), claimsServices[i%len(claimsServices)], ip, ip, m.status, at)
				i++
			}
			if _, err := st.db.Exec(ctx, `INSERT INTO claims (id, namespace, public_key, service, agent_ip, agent_net, subject, agent_id, agent_name, status, created_at, updated_at)
				VALUES `+strings.Join(rows, ", "), args...); err != nil {
				tb.Fatal(err)
			}
		}
	}
	if st.db.PG() { // settled as autovacuum would, before the clock runs; the store never analyzes SQLite
		st.db.Exec(ctx, `VACUUM ANALYZE`)
	}
	return key
}

// percentile returns the p-th percentile (0–100) of ds in milliseconds.
func percentile(ds []time.Duration, p float64) float64 {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return float64(s[min(len(s)-1, int(float64(len(s))*p/100))].Microseconds()) / 1000
}

// BenchmarkClaimsPage serves the dashboard's claims page of a namespace
// holding 100,000 claims (claimsMix), in process, and reports its p50 in
// ms: the first, a middle and the last page of the approved tab (60,000
// claims, reached as a reader following the pager's links would), and the
// first page of every status tab, with and without a service filter.
func BenchmarkClaimsPage(b *testing.B) {
	for _, engine := range engines {
		b.Run(engine, func(b *testing.B) {
			st := openStore(b, storeConfig(b, engine))
			populateClaims(b, st)
			srv, err := New(Config{Store: st, JWTSecret: testSecret})
			if err != nil {
				b.Fatal(err)
			}
			tok, _, err := srv.IssueSession(b.Context(), "acme")
			if err != nil {
				b.Fatal(err)
			}
			get := func(b *testing.B, path string) {
				req := httptest.NewRequest("GET", path, nil)
				req.AddCookie(&http.Cookie{Name: SessionCookie, Value: tok})
				w := httptest.NewRecorder()
				srv.ServeHTTP(w, req)
				if w.Code != 200 || !bytes.Contains(w.Body.Bytes(), []byte(`<tr data-id=`)) {
					b.Fatalf("GET %s: %d %.300s", path, w.Code, w.Body)
				}
			}
			run := func(name, path string) {
				b.Run(name, func(b *testing.B) {
					var ds []time.Duration
					for b.Loop() {
						start := time.Now()
						get(b, path)
						ds = append(ds, time.Since(start))
					}
					b.ReportMetric(percentile(ds, 50), "p50_ms")
				})
			}
			approved := claimsMix[0].n
			run("approved/first", claimsPageAt(b, st, StatusApproved, 0))
			run("approved/middle", claimsPageAt(b, st, StatusApproved, approved/2))
			run("approved/last", claimsPageAt(b, st, StatusApproved, approved-dashboard.PageSize))
			for _, m := range claimsMix {
				run("tab/"+m.status, "/claims?status="+m.status)
				run("tab/"+m.status+"/service", "/claims?status="+m.status+"&service=gitlab")
			}
		})
	}
}

// BenchmarkSubmitClaims submits claims of new agent keys through service
// "github" of the 100,000-claim namespace (its pending pile of 20,000
// claims within an ample budget), 32 at once, as signed requests served in
// process, and reports the p50 and p99 latency of one submission in ms
// after a first round, and that round's slowest submission (cold_max_ms).
func BenchmarkSubmitClaims(b *testing.B) {
	const concurrent = 32
	for _, engine := range engines {
		b.Run(engine, func(b *testing.B) {
			st := openStore(b, storeConfig(b, engine))
			key := populateClaims(b, st)
			srv, err := New(Config{Store: st, JWTSecret: testSecret, MaxPendingClaims: 1_000_000, MaxPendingPerAgent: 1_000_000, SignedRatePerMinute: 1_000_000})
			if err != nil {
				b.Fatal(err)
			}
			gateway, _ := identity.New("gateway")
			var (
				mu  sync.Mutex
				ds  []time.Duration
				bad []string
			)
			// Requests are signed before each round, so the round times the
			// server alone.
			request := func() *http.Request {
				pub, _, _ := ed25519.GenerateKey(rand.Reader)
				body, _ := json.Marshal(submitBody("acme", identity.FormatPublicKey(pub), "github"))
				req := httptest.NewRequest("POST", "http://cp.test/v1/claims", bytes.NewReader(body))
				req.RequestURI = req.URL.RequestURI()
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Authorization", "Bearer "+key)
				if err := gateway.Sign(req, identity.SignOptions{}); err != nil {
					b.Fatal(err)
				}
				return req
			}
			submit := func(req *http.Request) {
				w := httptest.NewRecorder()
				start := time.Now()
				srv.ServeHTTP(w, req)
				d := time.Since(start)
				mu.Lock()
				defer mu.Unlock()
				ds = append(ds, d)
				if w.Code != http.StatusCreated {
					bad = append(bad, fmt.Sprintf("%d %s", w.Code, w.Body))
				}
			}
			round := func() {
				b.StopTimer()
				reqs := make([]*http.Request, concurrent)
				for i := range reqs {
					reqs[i] = request()
				}
				b.StartTimer()
				var wg sync.WaitGroup
				for _, req := range reqs {
					wg.Go(func() { submit(req) })
				}
				wg.Wait()
			}
			// The first round is the server's first: its slowest
			// submission is reported apart (cold_max_ms) from the
			// latencies of a server in use.
			round()
			cold := slices.Max(ds)
			ds = ds[:0]
			for b.Loop() {
				round()
			}
			if len(bad) > 0 {
				b.Fatalf("%d of %d submissions failed, first: %s", len(bad), len(ds), bad[0])
			}
			b.ReportMetric(percentile(ds, 50), "p50_ms")
			b.ReportMetric(percentile(ds, 99), "p99_ms")
			b.ReportMetric(float64(cold.Microseconds())/1000, "cold_max_ms")
		})
	}
}

// claimsPageAt is the path of the claims page of status whose first row is
// the pos-th newest claim of that status, as the pager links to it: after
// the claim just before.
func claimsPageAt(tb testing.TB, st *Store, status string, pos int) string {
	tb.Helper()
	if pos == 0 {
		return "/claims?status=" + status
	}
	var id string
	if err := st.db.QueryRowContext(context.Background(), `SELECT id FROM claims WHERE namespace = 'acme' AND status = $1
		ORDER BY created_at DESC, id DESC LIMIT 1 OFFSET $2`, status, pos-1).Scan(&id); err != nil {
		tb.Fatal(err)
	}
	return "/claims?status=" + status + "&after=" + id
}
