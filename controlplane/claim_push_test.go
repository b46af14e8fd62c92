package controlplane

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idnhq/idn/claimcache"
	"github.com/idnhq/idn/controlplane/internal/claims"
	"github.com/idnhq/idn/identity"
)

// pushWorld is the set-up of the tests and the benchmark of a claim change
// reaching a gateway: a gateway's claims cache following instance A, the
// owner acting through instance B. On PostgreSQL A and B are two Servers,
// each with its own connection pool, on one database, so the change
// reaches A only by NOTIFY; on SQLite (one instance per file) B is A.
type pushWorld struct {
	a, b    string // base URLs
	session string // acme's owner session
	key     string // github's API key
	st      *Store
	cache   *claimcache.Cache
	client  *http.Client // signs as the gateway
	changed chan struct{}
}

func newPushWorld(tb testing.TB, engine string) *pushWorld {
	tb.Helper()
	cfg := storeConfig(tb, engine)
	start := func(st *Store) string {
		// Every change costs the gateway a signed request: the benchmark's
		// thousands in a few seconds would pass the per-network limit.
		srv, err := New(Config{Store: st, JWTSecret: testSecret, TestSeedToken: seedToken, SignedRatePerMinute: 1 << 20})
		if err != nil {
			tb.Fatal(err)
		}
		ts := httptest.NewServer(srv)
		tb.Cleanup(func() {
			srv.Close() // answers the feed's waiting requests
			ts.Close()
		})
		return ts.URL
	}
	w := &pushWorld{st: openStore(tb, cfg), changed: make(chan struct{}, 1)}
	w.a = start(w.st)
	w.b = w.a
	if engine == ProviderPostgres {
		w.b = start(openStore(tb, cfg))
	}
	var s seeded
	w.post(tb, w.a+"/v1/test/seed", map[string]any{"namespaces": []string{"acme"},
		"services": []map[string]string{{"slug": "github", "owner": "acme"}}}, &s)
	w.session, w.key = s.Sessions["acme"], s.APIKeys["github"]

	gw, err := identity.New("gateway-local")
	if err != nil {
		tb.Fatal(err)
	}
	w.client = &http.Client{Timeout: 15 * time.Second, Transport: gw.Transport(nil, identity.SignOptions{})}
	// An hour between polls: only a held request brings a change in time.
	w.cache, err = claimcache.New(claimcache.Config{
		Source:   &claimcache.HTTPSource{BaseURL: w.a, Client: w.client, APIKey: func(string) (string, error) { return w.key, nil }},
		Services: []string{"github"},
		Options:  claimcache.Options{TTL: 2 * time.Hour, RefreshInterval: time.Hour, ChangeWait: 10 * time.Second},
		OnRefresh: func(_ string, _ int, err error) {
			if err == nil {
				select {
				case w.changed <- struct{}{}:
				default:
				}
			}
		},
	})
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.cache.Run(ctx)
	}()
	tb.Cleanup(func() {
		cancel()
		<-done
	})
	return w
}

// post sends a JSON body with the seed token and acme's session, and
// decodes the answer into out when it is not nil.
func (w *pushWorld) post(tb testing.TB, url string, body, out any) int {
	tb.Helper()
	raw, _ := json.Marshal(body)
	req, _ := http.NewRequest("POST", url, strings.NewReader(string(raw)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-IDN-Test-Seed-Token", seedToken)
	if w.session != "" {
		req.AddCookie(&http.Cookie{Name: SessionCookie, Value: w.session})
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode >= 300 {
		tb.Fatalf("%s: %d %s", url, res.StatusCode, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			tb.Fatal(err)
		}
	}
	return res.StatusCode
}

// owner moves a claim through instance B, as the owner's click does.
func (w *pushWorld) owner(tb testing.TB, id, action string) claims.Record {
	tb.Helper()
	var r claims.Record
	w.post(tb, w.b+"/v1/claims/"+id+"/"+action, nil, &r)
	return r
}

// pendingClaim files a pending claim of a fresh agent of acme.
func (w *pushWorld) pendingClaim(tb testing.TB) (id string, pub ed25519.PublicKey) {
	tb.Helper()
	pub, _, _ = ed25519.GenerateKey(rand.Reader)
	c, err := claimsAPI(w.st).Seed(context.Background(), Claim{Namespace: "acme", PublicKey: identity.FormatPublicKey(pub),
		Service: "github", Status: StatusPending})
	if err != nil {
		tb.Fatal(err)
	}
	return c.ID, pub
}

// await returns once the cache answers the lookup of pub as want says:
// the claim id approved, or not approved ("").
func (w *pushWorld) await(tb testing.TB, pub ed25519.PublicKey, want string) {
	tb.Helper()
	timeout := time.After(30 * time.Second)
	for {
		a, err := w.cache.Lookup("github", "acme", pub)
		switch {
		case want != "" && err == nil && a.ClaimID == want,
			want == "" && errors.Is(err, claimcache.ErrNotApproved):
			return
		}
		select {
		case <-w.changed:
		case <-timeout:
			tb.Fatalf("the cache still answers %+v, %v; want %q", a, err, want)
		}
	}
}

// TestGatewayFollowsClaimChanges: a gateway's claims cache that polls once
// an hour learns an approval and a revocation made through another
// control-plane instance as they commit. The revoked agent's next
// submission files nothing and answers the revocation, until the owner
// approves the agent again.
func TestGatewayFollowsClaimChanges(t *testing.T) {
	t.Parallel()
	for _, engine := range engines {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			w := newPushWorld(t, engine)
			id, pub := w.pendingClaim(t)
			w.await(t, pub, "")
			w.owner(t, id, "approve")
			w.await(t, pub, id)
			w.owner(t, id, "revoke")
			w.await(t, pub, "")

			sub, err := claimcache.NewSubmitter(claimcache.SubmitterConfig{BaseURL: w.a, Client: w.client,
				APIKey: func(string) (string, error) { return w.key, nil }, SubmitterOptions: claimcache.SubmitterOptions{ReceiptTTL: -1}})
			if err != nil {
				t.Fatal(err)
			}
			submit := func() claimcache.Receipt {
				t.Helper()
				r, err := sub.Submit(t.Context(), claimcache.Submission{ConnectionID: "github", Namespace: "acme",
					PublicKey: identity.FormatPublicKey(pub), Service: "github"})
				if err != nil {
					t.Fatal(err)
				}
				return r
			}
			for range 2 {
				if r := submit(); r.Created || r.ClaimID != id || r.Status != StatusRevoked {
					t.Fatalf("submission after the revocation: %+v", r)
				}
			}
			if n := latestStatus(t, w.st, "acme", identity.FormatPublicKey(pub), "github"); n != StatusRevoked {
				t.Fatalf("the tuple's latest claim is %s: a claim was filed", n)
			}

			again := w.owner(t, id, "approve") // the owner decides
			if again.ClaimID == id || again.Status != StatusApproved {
				t.Fatalf("approved again: %+v", again)
			}
			w.await(t, pub, again.ClaimID)
			if r := submit(); r.Created || r.ClaimID != again.ClaimID || r.Status != StatusApproved {
				t.Fatalf("submission after approving again: %+v", r)
			}
		})
	}
}

// TestGatewayFollowsRejections: a rejection made through another instance
// reaches a gateway's claims cache as it commits, though no approved claim
// changes, and is final: the agent's submissions file nothing and answer
// the rejected claim, until the owner approves that claim.
func TestGatewayFollowsRejections(t *testing.T) {
	t.Parallel()
	for _, engine := range engines {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			w := newPushWorld(t, engine)
			id, pub := w.pendingClaim(t)
			w.await(t, pub, "")
			w.owner(t, id, "reject")
			for timeout := time.After(30 * time.Second); ; {
				_, err := w.cache.Lookup("github", "acme", pub)
				if re, ok := errors.AsType[*claimcache.RejectedError](err); ok && re.ClaimID == id {
					break
				}
				select {
				case <-w.changed:
				case <-timeout:
					t.Fatalf("the cache still answers %v, want the rejection of %s", err, id)
				}
			}

			sub, err := claimcache.NewSubmitter(claimcache.SubmitterConfig{BaseURL: w.a, Client: w.client,
				APIKey: func(string) (string, error) { return w.key, nil }, SubmitterOptions: claimcache.SubmitterOptions{ReceiptTTL: -1}})
			if err != nil {
				t.Fatal(err)
			}
			for range 2 {
				r, err := sub.Submit(t.Context(), claimcache.Submission{ConnectionID: "github", Namespace: "acme",
					PublicKey: identity.FormatPublicKey(pub), Service: "github"})
				if err != nil || r.Created || r.ClaimID != id || r.Status != StatusRejected {
					t.Fatalf("submission after the rejection: %+v, %v", r, err)
				}
			}
			again := w.owner(t, id, "approve")
			if again.ClaimID == id || again.Status != StatusApproved {
				t.Fatalf("approved: %+v", again)
			}
			w.await(t, pub, again.ClaimID)
		})
	}
}

// BenchmarkClaimChangeReachesGateway measures, on PostgreSQL, the time from
// the owner's click (an approval or a revocation sent to instance B) to
// the moment a gateway's claims cache following instance A answers
// accordingly, and reports the median and the 99th percentile over b.N
// changes, alternately approvals and revocations. The gateway polls once
// an hour, so every change arrives through a held request woken by
// NOTIFY. Run it with -benchtime=400x or more for a meaningful p99.
func BenchmarkClaimChangeReachesGateway(b *testing.B) {
	w := newPushWorld(b, ProviderPostgres)
	type agent struct {
		id  string
		pub ed25519.PublicKey
	}
	agents := make([]agent, (b.N+1)/2)
	for i := range agents {
		agents[i].id, agents[i].pub = w.pendingClaim(b)
	}
	w.await(b, agents[0].pub, "") // loaded, and following
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		a := agents[i/2]
		action, want := "approve", a.id
		if i%2 == 1 {
			action, want = "revoke", ""
		}
		start := time.Now()
		w.owner(b, a.id, action)
		w.await(b, a.pub, want)
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(lat[len(lat)-1].Microseconds())/1000, "max-ms")
}
