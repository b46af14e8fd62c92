package upstreamauth_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idnhq/idn/credvault"
	"github.com/idnhq/idn/upstreamauth"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

const clientSecret = "client-secret-never-shown"

func testVault(t testing.TB, tokenURL string) *credvault.Vault {
	t.Helper()
	key, err := credvault.ParseMasterKey("AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=")
	if err != nil {
		t.Fatal(err)
	}
	v, err := credvault.New(context.Background(), credvault.Config{Store: &credvault.MemoryStore{}, MasterKey: key, PollInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Close() })
	_, err = v.Create(context.Background(), &credvault.Connection{
		ID: "api", BaseURL: "https://api.example.com", AuthMode: credvault.AuthOAuth2ClientCredentials,
		OAuthTokenURL: tokenURL, OAuthClientID: "client-1", OAuthScopes: []string{"read"}, AuthSecretKey: "client_secret",
	}, map[string]string{"client_secret": clientSecret})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// clock is a settable time source.
type clock struct{ off atomic.Int64 }

func (c *clock) now() time.Time          { return time.Now().Add(time.Duration(c.off.Load())) }
func (c *clock) advance(d time.Duration) { c.off.Add(int64(d)) }

func tokenJSON(w http.ResponseWriter, token string, expiresIn int) {
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"access_token":%q,"token_type":"Bearer","expires_in":%d}`, token, expiresIn)
}

func lookup(t testing.TB, v *credvault.Vault) *credvault.Resolved {
	t.Helper()
	r, ok := v.Lookup("api")
	if !ok {
		t.Fatal("no connection")
	}
	return r
}

// Fifty concurrent calls with no token cost one token request: the
// endpoint answers only once all fifty are under way.
func TestFiftyConcurrentCallsCostOneTokenRequest(t *testing.T) {
	t.Parallel()
	const callers = 50
	var started sync.WaitGroup
	started.Add(callers)
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		if id, secret, _ := r.BasicAuth(); id != "client-1" || secret != clientSecret || r.FormValue("grant_type") != "client_credentials" {
			http.Error(w, `{"error":"invalid_client"}`, http.StatusUnauthorized)
			return
		}
		started.Wait()
		tokenJSON(w, "access-1", 3600)
	}))
	t.Cleanup(srv.Close)
	v := testVault(t, srv.URL)
	reg := prometheus.NewRegistry()
	m, err := upstreamauth.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	tokens, _ := upstreamauth.New(upstreamauth.Config{Vault: v, Metrics: m})
	res := lookup(t, v)
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			started.Done()
			tok, err := tokens.Token(context.Background(), res, "")
			if err != nil || tok.Value != "access-1" {
				t.Errorf("Token = %q, %v", tok, err)
			}
		})
	}
	wg.Wait()
	if n := requests.Load(); n != 1 {
		t.Fatalf("%d token requests, want 1", n)
	}
	if got := testutil.ToFloat64(metricsCounter(t, reg, "success")); got != 1 {
		t.Fatalf("success counter = %v", got)
	}
}

func metricsCounter(t *testing.T, reg *prometheus.Registry, result string) prometheus.Collector {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "idn_gateway_oauth_token_requests_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			if m.GetLabel()[0].GetValue() == result {
				return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "x"}, func() float64 { return m.GetCounter().GetValue() })
			}
		}
	}
	t.Fatalf("no series for result %q", result)
	return nil
}

// A token close to expiry is still handed out while its successor is
// fetched: the request path never waits for a refresh.
func TestRefreshAheadIsOffTheRequestPath(t *testing.T) {
	t.Parallel()
	var requests atomic.Int32
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch requests.Add(1) {
		case 1:
			tokenJSON(w, "access-1", 100)
		default:
			<-release
			tokenJSON(w, "access-2", 1000)
		}
	}))
	t.Cleanup(srv.Close)
	v := testVault(t, srv.URL)
	clk := &clock{}
	tokens, _ := upstreamauth.New(upstreamauth.Config{Vault: v, Clock: clk.now})
	res := lookup(t, v)
	ctx := context.Background()
	if tok, err := tokens.Token(ctx, res, ""); err != nil || tok.Value != "access-1" {
		t.Fatalf("first Token = %q, %v", tok, err)
	}
	clk.advance(90 * time.Second) // inside the last quarter of its life
	if tok, err := tokens.Token(ctx, res, ""); err != nil || tok.Value != "access-1" {
		t.Fatalf("Token near expiry = %q, %v (the refresh blocks, so waiting for it would hang)", tok, err)
	}
	close(release)
	clk.advance(20 * time.Second) // access-1 expired
	if tok, err := tokens.Token(ctx, res, ""); err != nil || tok.Value != "access-2" {
		t.Fatalf("Token after expiry = %q, %v", tok, err)
	}
	if n := requests.Load(); n != 2 {
		t.Fatalf("%d token requests, want 2", n)
	}
}

func TestInvalidateFetchesAFreshToken(t *testing.T) {
	t.Parallel()
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tokenJSON(w, fmt.Sprintf("access-%d", requests.Add(1)), 3600)
	}))
	t.Cleanup(srv.Close)
	v := testVault(t, srv.URL)
	tokens, _ := upstreamauth.New(upstreamauth.Config{Vault: v})
	res := lookup(t, v)
	ctx := context.Background()
	first, _ := tokens.Token(ctx, res, "")
	tokens.Invalidate(res, "", res.AccessToken("some-older-token")) // already replaced: no effect
	if again, _ := tokens.Token(ctx, res, ""); again != first {
		t.Fatalf("a stale Invalidate dropped the token: %q then %q", first, again)
	}
	tokens.Invalidate(res, "", first)
	if fresh, _ := tokens.Token(ctx, res, ""); fresh.Value == first.Value {
		t.Fatalf("after Invalidate Token = %q, want a new one", fresh.Value)
	}
}

// The token endpoint failing or attacking: each failure is an
// UnavailableError whose text holds neither the client secret nor the
// endpoint's answer, and a second call inside Retry-After sends nothing.
func TestTokenEndpointFailures(t *testing.T) {
	t.Parallel()
	const leak = "ENDPOINT-ANSWER-SHOULD-STAY-HIDDEN"
	for _, tc := range []struct {
		name, reason string
		retry        time.Duration
		handler      http.HandlerFunc
	}{
		{"down with retry-after", "status 503", 7 * time.Second, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Retry-After", "7")
			http.Error(w, leak, http.StatusServiceUnavailable)
		}},
		{"refusing the client", "refused: invalid_client", 5 * time.Second, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprintf(w, `{"error":"invalid_client","error_description":%q}`, leak+clientSecret)
		}},
		{"huge body declared", "response too large", 5 * time.Second, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Content-Length", "100000000")
			fmt.Fprint(w, `{"access_token":"`+leak)
		}},
		{"huge body streamed", "response too large", 5 * time.Second, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"access_token":"`+leak)
			chunk := strings.Repeat("A", 32<<10)
			for range 64 {
				if _, err := fmt.Fprint(w, chunk); err != nil {
					return
				}
			}
		}},
		{"slow body", "timeout", 5 * time.Second, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"access_token":"`+leak)
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		}},
		{"access token missing", "unreachable", 5 * time.Second, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"token_type":"Bearer"}`)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var requests atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				requests.Add(1)
				tc.handler(w, r)
			}))
			t.Cleanup(srv.Close)
			v := testVault(t, srv.URL)
			tokens, _ := upstreamauth.New(upstreamauth.Config{Vault: v, Timeout: 300 * time.Millisecond})
			res := lookup(t, v)
			_, err := tokens.Token(context.Background(), res, "")
			var ue *upstreamauth.UnavailableError
			if !errors.As(err, &ue) || !errors.Is(err, upstreamauth.ErrUnavailable) {
				t.Fatalf("Token error = %v, want an UnavailableError", err)
			}
			if ue.Reason != tc.reason || ue.RetryAfter != tc.retry {
				t.Fatalf("reason %q retry %v, want %q %v", ue.Reason, ue.RetryAfter, tc.reason, tc.retry)
			}
			if strings.Contains(err.Error(), leak) || strings.Contains(err.Error(), clientSecret) {
				t.Fatalf("error shows the answer or the secret: %v", err)
			}
			before := requests.Load()
			if _, err := tokens.Token(context.Background(), res, ""); !errors.Is(err, upstreamauth.ErrUnavailable) || requests.Load() != before {
				t.Fatalf("second Token: %v after %d more requests, want the same failure without one", err, requests.Load()-before)
			}
		})
	}
}

// Transport puts the token on a copy: the caller's request keeps its own
// headers.
func TestTransportSendsACopy(t *testing.T) {
	t.Parallel()
	endpoint := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { tokenJSON(w, "access-token-1", 3600) }))
	t.Cleanup(endpoint.Close)
	var got string
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got = r.Header.Get("Authorization") }))
	t.Cleanup(api.Close)
	v := testVault(t, endpoint.URL)
	tokens, _ := upstreamauth.New(upstreamauth.Config{Vault: v})
	client := &http.Client{Transport: tokens.Transport(lookup(t, v), "", nil)}
	req, _ := http.NewRequest("GET", api.URL, nil)
	req.Header.Set("Authorization", "Bearer the-callers-own")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got != "Bearer access-token-1" || req.Header.Get("Authorization") != "Bearer the-callers-own" {
		t.Fatalf("upstream got %q; caller's header now %q", got, req.Header.Get("Authorization"))
	}
}

// Callers asking for, and refusing, tokens at once for a while: every
// call ends with a token, and a token request is made only for a token
// refused (no lock is held across another).
func TestTokensUnderSustainedLoad(t *testing.T) {
	t.Parallel()
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tokenJSON(w, fmt.Sprintf("access-token-%d", requests.Add(1)), 3600)
	}))
	t.Cleanup(srv.Close)
	v := testVault(t, srv.URL)
	tokens, _ := upstreamauth.New(upstreamauth.Config{Vault: v})
	res := lookup(t, v)
	var invalidated atomic.Int32
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 500 {
				tok, err := tokens.Token(context.Background(), res, "")
				if err != nil {
					t.Error(err)
					return
				}
				if (i+g)%50 == 0 {
					tokens.Invalidate(res, "", tok)
					invalidated.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if n := requests.Load(); n < 1 || n > invalidated.Load()+1 {
		t.Fatalf("%d token requests for %d refusals", n, invalidated.Load())
	}
}

// BenchmarkTokenCached is the cost of a call that finds its token
// cached, with every core asking at once.
func BenchmarkTokenCached(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { tokenJSON(w, "access-token-1", 86400) }))
	defer srv.Close()
	v := testVault(b, srv.URL)
	tokens, _ := upstreamauth.New(upstreamauth.Config{Vault: v})
	res := lookup(b, v)
	ctx := context.Background()
	if _, err := tokens.Token(ctx, res, ""); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := tokens.Token(ctx, res, ""); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// Issued lists the tokens handed out, a replaced one too (an answer to a
// request sent with it may still come), until it has not been handed out
// for IssuedRetention.
func TestIssuedListsTheTokensHandedOut(t *testing.T) {
	t.Parallel()
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tokenJSON(w, fmt.Sprintf("access-%d", requests.Add(1)), 0)
	}))
	t.Cleanup(srv.Close)
	v := testVault(t, srv.URL)
	clk := &clock{}
	tokens, _ := upstreamauth.New(upstreamauth.Config{Vault: v, Clock: clk.now})
	res := lookup(t, v)
	if got := tokens.Issued("api"); len(got) != 0 {
		t.Fatalf("Issued before any Token = %v", got)
	}
	first, _ := tokens.Token(t.Context(), res, "")
	tokens.Invalidate(res, "", first)
	second, _ := tokens.Token(t.Context(), res, "")
	got := tokens.Issued("api")
	slices.Sort(got)
	if !slices.Equal(got, []string{first.Value, second.Value}) {
		t.Fatalf("Issued = %v, want %s and %s", got, first.Value, second.Value)
	}
	// second stays in use; first is forgotten once retention passes.
	for range 9 {
		clk.advance(upstreamauth.IssuedRetention/8 + time.Second)
		if tok, _ := tokens.Token(t.Context(), res, ""); tok != second {
			t.Fatalf("Token = %v", tok)
		}
	}
	if got := tokens.Issued("api"); !slices.Equal(got, []string{second.Value}) {
		t.Fatalf("Issued after the retention = %v, want only %s", got, second.Value)
	}
}
