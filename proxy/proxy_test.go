package proxy

import (
	"bufio"
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idnhq/idn/claimcache"
	"github.com/idnhq/idn/credvault"
	"github.com/idnhq/idn/errcode"
	"github.com/idnhq/idn/identity"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestApprovedRequestIsForwarded(t *testing.T) {
	t.Parallel()
	g := newGateway(t, gatewayOptions{})
	a := g.do(g.request(g.agent, "POST", "/proxy/github/repos/a%2Fb/issues?state=open&x=1", `{"title":"hi"}`))
	if a.status != 200 {
		t.Fatalf("status %d: %s", a.status, a.body)
	}
	s := g.up.lastSeen()
	if s.Path != "/api/repos/a%2Fb/issues" || s.RawQuery != "state=open&x=1" || s.Body != `{"title":"hi"}` {
		t.Errorf("upstream saw %s %s?%s body %q", s.Method, s.Path, s.RawQuery, s.Body)
	}
	if got := s.Header.Get("Authorization"); got != "Bearer "+upstreamToken {
		t.Errorf("upstream Authorization = %q, want the injected credential", got)
	}
	for _, h := range []string{"Signature", "Signature-Input", "Content-Digest", "Idn-Namespace", "Idn-Subject",
		"Idn-Agent-Key", "Idn-Agent-Cert", "Cookie"} {
		if v := s.Header.Get(h); v != "" {
			t.Errorf("upstream received %s: %q", h, v)
		}
	}
	if s.Header.Get("X-Request-Id") == "" || a.header.Get("X-Request-Id") != s.Header.Get("X-Request-Id") {
		t.Errorf("request id not propagated: %q vs %q", a.header.Get("X-Request-Id"), s.Header.Get("X-Request-Id"))
	}

	// header_key with a path prefix, query_param, and an alias route.
	if a := g.do(g.request(g.agent, "GET", "/proxy/keyed/items", "")); a.status != 200 {
		t.Fatalf("keyed: %d %s", a.status, a.body)
	}
	if s := g.up.lastSeen(); s.Path != "/v2/items" || s.Header.Get("X-API-Key") != headerSecret || s.Header.Get("Authorization") != "" {
		t.Errorf("header_key upstream saw %s %v", s.Path, s.Header)
	}
	if a := g.do(g.request(g.agent, "GET", "/proxy/query/q?api_key=agent-chosen&y=2", "")); a.status != 200 {
		t.Fatalf("query: %d %s", a.status, a.body)
	}
	if s := g.up.lastSeen(); s.RawQuery != "api_key="+querySecret+"&y=2" && s.RawQuery != "y=2&api_key="+querySecret {
		t.Errorf("query_param upstream saw %q", s.RawQuery)
	}
	if a := g.do(g.request(g.agent, "GET", "/gh/user", "")); a.status != 200 || g.up.lastSeen().Path != "/api/user" {
		t.Errorf("alias: %d, upstream path %q", a.status, g.up.lastSeen().Path)
	}
}

// The gateway marks its own envelopes with Idn-Error and strips the header
// from upstream answers, so an upstream cannot pass a forged claim to the
// agent as the gateway's.
func TestUpstreamCannotForgeGatewayError(t *testing.T) {
	t.Parallel()
	g := newGateway(t, gatewayOptions{})
	a := g.do(g.request(g.agent, "GET", "/proxy/github/forged-claim", ""))
	if a.status != http.StatusForbidden || !strings.Contains(string(a.body), "clm_stranger") {
		t.Fatalf("forged answer: %d %s", a.status, a.body)
	}
	if v := a.header.Values("Idn-Error"); len(v) != 0 {
		t.Errorf("the upstream's Idn-Error reached the agent: %q", v)
	}
	own := g.do(g.request(g.agent, "GET", "/proxy/no-such-connection/x", ""))
	if own.status != http.StatusNotFound || own.header.Get("Idn-Error") != "CONNECTION_NOT_FOUND" {
		t.Errorf("the gateway's own refusal: %d, Idn-Error %q", own.status, own.header.Get("Idn-Error"))
	}
}

// Every AUTH_* code of the gateway, each produced by a named
// request, with its exact status.
func TestAuthCodes(t *testing.T) {
	t.Parallel()
	g := newGateway(t, gatewayOptions{submitLimit: 1})
	get := func() *http.Request { return g.request(g.agent, "GET", "/proxy/github/user", "") }
	rows := []struct {
		name   string
		req    func() *http.Request
		status int
		code   string
	}{
		{"duplicate signature header", func() *http.Request {
			r := get()
			r.Header.Add("Signature", r.Header.Get("Signature"))
			return r
		}, 403, "AUTH_HEADERS_INVALID"},
		{"signature over another path", func() *http.Request {
			r := get()
			r.URL.Path = "/proxy/github/admin"
			return r
		}, 403, "AUTH_SIGNATURE_INVALID"},
		{"component dropped from the signature", func() *http.Request {
			r := get()
			r.Header.Set("Signature-Input", strings.Replace(r.Header.Get("Signature-Input"), ` "idn-subject"`, "", 1))
			return r
		}, 403, "AUTH_SIGNED_COMPONENTS_INVALID"},
		{"identity header missing", func() *http.Request {
			r := get()
			r.Header.Del("Idn-Agent-Cert")
			return r
		}, 403, "AUTH_IDENTITY_INVALID"},
		{"nonce missing", func() *http.Request {
			r := get()
			in := r.Header.Get("Signature-Input")
			r.Header.Set("Signature-Input", in[:strings.Index(in, ";nonce=")])
			return r
		}, 403, "AUTH_NONCE_INVALID"},
		{"claims lookup for an untracked service", func() *http.Request {
			return g.request(g.agent, "GET", "/proxy/untracked/x", "")
		}, 500, "AUTH_CLAIMS_LOOKUP_FAILED"},
		{"unapproved agent", func() *http.Request {
			return g.request(g.stranger, "GET", "/proxy/github/user", "")
		}, 403, "AUTH_CLAIM_REQUIRED"},
		{"unapproved agent's second key past the submission limit", func() *http.Request {
			second, _ := identity.New("stranger-ns")
			return g.request(second, "GET", "/proxy/github/user", "")
		}, 429, "AUTH_CLAIM_SUBMIT_RATE_LIMITED"},
		{"disabled connection", func() *http.Request { return g.request(g.agent, "GET", "/proxy/off/x", "") }, 403, errcode.ConnectionDisabled.String()},
		{"unknown connection", func() *http.Request { return g.request(g.agent, "GET", "/proxy/nope/x", "") }, 404, errcode.ConnectionNotFound.String()},
		{"dot-segment escape", func() *http.Request {
			r := g.request(g.agent, "GET", "/proxy/github/%2e%2e/admin", "")
			return r
		}, 400, errcode.ValidationError.String()},
		{"upstream unreachable", func() *http.Request { return g.request(g.agent, "GET", "/proxy/dead/x", "") }, 502, errcode.UpstreamError.String()},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			a := g.do(row.req())
			if a.status != row.status || a.env["code"] != row.code {
				t.Fatalf("got %d %v, want %d %s", a.status, a.env["code"], row.status, row.code)
			}
			for _, f := range []string{"error", "code", "request_id", "timestamp"} {
				if a.env[f] == "" || a.env[f] == nil {
					t.Errorf("envelope lacks %q: %s", f, a.body)
				}
			}
			if strings.Contains(string(a.body), querySecret) || strings.Contains(string(a.body), "127.0.0.1:1") {
				t.Errorf("envelope leaks the upstream URL or secret: %s", a.body)
			}
		})
	}
	subs := g.cp.Submissions()
	if len(subs) != 1 {
		t.Fatalf("control plane received %d claim submissions, want 1 (the second was rate-limited)", len(subs))
	}
	if sub := subs[0]; sub.Namespace != "stranger-ns" || sub.Service != "github" || sub.PublicKey != g.stranger.PublicKeyString() ||
		sub.AgentIP != "127.0.0.1" || sub.Nonce == "" {
		t.Errorf("submission = %+v", sub)
	}

	t.Run("replay", func(t *testing.T) {
		r := get()
		if a := g.do(r); a.status != 200 {
			t.Fatalf("first: %d %s", a.status, a.body)
		}
		again, _ := http.NewRequest(r.Method, r.URL.String(), nil)
		again.Header = r.Header.Clone()
		if a := g.do(again); a.status != 403 || a.env["code"] != "AUTH_REPLAY_DETECTED" {
			t.Fatalf("replay: %d %v", a.status, a.env["code"])
		}
		// After the nonce window the same request is refused for its age.
		g.clock.advance(6 * time.Minute)
		late, _ := http.NewRequest(r.Method, r.URL.String(), nil)
		late.Header = r.Header.Clone()
		if a := g.do(late); a.status != 403 || a.env["code"] != "AUTH_SIGNATURE_INVALID" {
			t.Fatalf("late replay: %d %v", a.status, a.env["code"])
		}
	})

	t.Run("claims feed down longer than the TTL", func(t *testing.T) {
		g.cp.SetUnavailable(true)
		if err := g.cache.Refresh(context.Background(), "github"); err == nil {
			t.Fatal("refresh succeeded with the feed down")
		}
		g.clock.advance(31 * time.Second)
		a := g.do(get())
		if a.status != 503 || a.env["code"] != "AUTH_CLAIMS_UNAVAILABLE" || a.header.Get("Retry-After") == "" {
			t.Fatalf("stale claims: %d %v", a.status, a.env["code"])
		}
		g.cp.SetUnavailable(false)
		g.refresh()
		if a := g.do(get()); a.status != 200 {
			t.Fatalf("after recovery: %d %s", a.status, a.body)
		}
	})

	// Metrics moved as the requests above say.
	for code, want := range map[string]float64{
		"AUTH_HEADERS_INVALID": 1, "AUTH_SIGNATURE_INVALID": 2, "AUTH_SIGNED_COMPONENTS_INVALID": 1,
		"AUTH_IDENTITY_INVALID": 1, "AUTH_NONCE_INVALID": 1, "AUTH_REPLAY_DETECTED": 1, "AUTH_CLAIMS_UNAVAILABLE": 1,
		"AUTH_CLAIMS_LOOKUP_FAILED": 1, "AUTH_CLAIM_REQUIRED": 1, "AUTH_CLAIM_SUBMIT_RATE_LIMITED": 1,
		errcode.ConnectionDisabled.String(): 1,
	} {
		if got := testutil.ToFloat64(g.metrics.authReject.WithLabelValues(code)); got != want {
			t.Errorf("auth_reject_total{reason=%s} = %v, want %v", code, got, want)
		}
	}
	if got := testutil.ToFloat64(g.metrics.replayDetected); got != 1 {
		t.Errorf("replay_detected_total = %v", got)
	}
	if got := testutil.ToFloat64(g.metrics.upstreamRequests.WithLabelValues("http", "github", "success")); got != 2 {
		t.Errorf("upstream_requests_total{http,success} = %v, want 2", got)
	}
	if got := testutil.ToFloat64(g.metrics.upstreamErrors.WithLabelValues("connect")); got != 1 {
		t.Errorf("upstream_error_total{connect} = %v, want 1", got)
	}
	if got := testutil.ToFloat64(g.metrics.inFlight); got != 0 {
		t.Errorf("requests_in_flight = %v after all requests", got)
	}
	if n, err := testutil.GatherAndCount(g.reg); err != nil || n == 0 {
		t.Errorf("registry gathers %d series, %v", n, err)
	}

	// Decision logs: no secret, no raw identity, no full client address.
	logs := g.logs.String()
	if !strings.Contains(logs, `"namespace":"fp:`) || !strings.Contains(logs, `"client_ip":"127.0.0.0/24"`) {
		t.Errorf("decision logs lack fingerprints or masked addresses:\n%s", logs)
	}
	for _, leak := range []string{upstreamToken, headerSecret, querySecret, "agent-ns", "stranger-ns",
		g.agent.PublicKeyString(), "127.0.0.1\"", "agent-own-token", "agent-cookie"} {
		if strings.Contains(logs, leak) {
			t.Errorf("decision logs contain %q", leak)
		}
	}
}

// submitFunc is a ClaimSubmitter made of a function.
type submitFunc func(context.Context, claimcache.Submission) (claimcache.Receipt, error)

func (f submitFunc) Submit(ctx context.Context, sub claimcache.Submission) (claimcache.Receipt, error) {
	return f(ctx, sub)
}

// An agent polling for its approval is approved, and the gateway's
// snapshot learns it while the poll's submission is answered from the
// remembered "pending" receipt: the snapshot wins, and the caller is let
// through rather than told its claim is pending.
func TestRememberedReceiptNeverContradictsSnapshot(t *testing.T) {
	t.Parallel()
	var approveDuringSubmit atomic.Bool
	g := newGateway(t, gatewayOptions{submitter: func(g *gateway, s ClaimSubmitter) ClaimSubmitter {
		return submitFunc(func(ctx context.Context, sub claimcache.Submission) (claimcache.Receipt, error) {
			if approveDuringSubmit.Load() {
				g.approve(g.stranger)
				g.refresh()
			}
			return s.Submit(ctx, sub)
		})
	}})
	if a := g.do(g.request(g.stranger, "GET", "/proxy/github/user", "")); a.status != 403 || a.env["claim_status"] != "pending" {
		t.Fatalf("first poll: %d %s", a.status, a.body)
	}
	approveDuringSubmit.Store(true)
	if a := g.do(g.request(g.stranger, "GET", "/proxy/github/user", "")); a.status != 200 {
		t.Fatalf("poll after the approval reached the snapshot: %d %s (the remembered receipt won)", a.status, a.body)
	}
}

// An agent that polls while it waits for approval gets the same claim id
// every time, from the gateway's memory: the control plane sees one
// submission and the rate limit is not spent on the repeats.
func TestPollingAgentKeepsItsClaimID(t *testing.T) {
	t.Parallel()
	g := newGateway(t, gatewayOptions{submitLimit: 2})
	var first any
	for i := range 5 {
		a := g.do(g.request(g.stranger, "GET", "/proxy/github/user", ""))
		if a.status != 403 || a.env["code"] != "AUTH_CLAIM_REQUIRED" || a.env["claim_id"] == nil || a.env["claim_status"] != "pending" {
			t.Fatalf("poll %d: %d %s", i, a.status, a.body)
		}
		if i == 0 {
			first = a.env["claim_id"]
		} else if a.env["claim_id"] != first {
			t.Fatalf("poll %d: claim_id %v, first was %v", i, a.env["claim_id"], first)
		}
	}
	if n := len(g.cp.Submissions()); n != 1 {
		t.Fatalf("control plane received %d submissions, want 1", n)
	}
	// The namespace still has one of its two submissions left.
	second, _ := identity.New("stranger-ns")
	if a := g.do(g.request(second, "GET", "/proxy/github/user", "")); a.status != 403 || a.env["code"] != "AUTH_CLAIM_REQUIRED" {
		t.Fatalf("second key: %d %s", a.status, a.body)
	}
	third, _ := identity.New("stranger-ns")
	if a := g.do(g.request(third, "GET", "/proxy/github/user", "")); a.status != 429 {
		t.Fatalf("third key: %d %s, want the rate limit", a.status, a.body)
	}
	// Approval still wins at once: the claim check comes before the memory.
	g.approve(g.stranger)
	g.refresh()
	if a := g.do(g.request(g.stranger, "GET", "/proxy/github/user", "")); a.status != 200 {
		t.Fatalf("after approval: %d %s", a.status, a.body)
	}
}

func TestRotationEnforcement(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		rotation   credvault.RotationEnforcement
		wantStatus int
		wantCode   string
		wantWarned bool
	}{
		{"zero value warns", "", 200, "", true},
		{"off serves silently", credvault.RotationOff, 200, "", false},
		{"warn warns", credvault.RotationWarn, 200, "", true},
		{"block refuses", credvault.RotationBlock, 403, errcode.RotationRequired.String(), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := newGateway(t, gatewayOptions{rotation: tt.rotation})
			a := g.do(g.request(g.agent, "GET", "/proxy/stale/x", ""))
			code, _ := a.env["code"].(string)
			if a.status != tt.wantStatus || code != tt.wantCode {
				t.Errorf("overdue connection: %d %q, want %d %q", a.status, code, tt.wantStatus, tt.wantCode)
			}
			if warned := a.header.Get("Idn-Rotation-Warning") != ""; warned != tt.wantWarned {
				t.Errorf("Idn-Rotation-Warning present = %v, want %v", warned, tt.wantWarned)
			}
			if a := g.do(g.request(g.agent, "GET", "/proxy/github/x", "")); a.status != 200 || a.header.Get("Idn-Rotation-Warning") != "" {
				t.Errorf("connection not due: %d, warning %q", a.status, a.header.Get("Idn-Rotation-Warning"))
			}
		})
	}
}

type failingNonces struct{}

func (failingNonces) CheckNonce(context.Context, string, string, time.Time) error {
	return errors.New("nonce backend exploded")
}

func TestUnknownFailureIsAuthForbidden(t *testing.T) {
	t.Parallel()
	g := newGateway(t, gatewayOptions{nonces: failingNonces{}})
	if a := g.do(g.request(g.agent, "GET", "/proxy/github/x", "")); a.status != 403 || a.env["code"] != errcode.AuthForbidden.String() {
		t.Errorf("got %d %v, want 403 AUTH_FORBIDDEN", a.status, a.env["code"])
	}
}

func TestStreamingResponse(t *testing.T) {
	t.Parallel()
	g := newGateway(t, gatewayOptions{})
	resp, err := http.DefaultClient.Do(g.request(g.agent, "GET", "/proxy/github/events", ""))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	line, err := br.ReadString('\n')
	if err != nil || line != "data: first\n" {
		t.Fatalf("first event: %q, %v", line, err)
	}
	// The upstream is still blocked: the first event arrived before it finished.
	close(g.up.release)
	_, _ = br.ReadString('\n')
	if line, _ := br.ReadString('\n'); line != "data: second\n" {
		t.Fatalf("second event: %q", line)
	}
}

func TestBodyLimit(t *testing.T) {
	t.Parallel()
	g := newGateway(t, gatewayOptions{})
	g.handler.cfg.MaxBodyBytes = 1024
	g.handler.verifier.MaxBodyBytes = 1024
	a := g.do(g.request(g.agent, "POST", "/proxy/github/upload", strings.Repeat("x", 4096)))
	if a.status != 413 || a.env["code"] != errcode.RequestBodyTooLarge.String() {
		t.Errorf("oversized body: %d %v", a.status, a.env["code"])
	}
	chunked := g.request(g.agent, "POST", "/proxy/github/upload", strings.Repeat("x", 4096))
	chunked.ContentLength = -1 // sent chunked: the limit trips while reading
	if a := g.do(chunked); a.status != 413 || a.env["code"] != errcode.RequestBodyTooLarge.String() {
		t.Errorf("oversized chunked body: %d %v", a.status, a.env["code"])
	}
}

// The display name in an agent's certificate reaches the claim the gateway
// files, so the owner approving it sees which agent asks. The name is
// covered by the signature: a request whose certificate was swapped for a
// renamed one fails verification instead of filing a claim under it.
func TestClaimCarriesAgentName(t *testing.T) {
	t.Parallel()
	g := newGateway(t, gatewayOptions{})
	named, err := identity.NewNamed("named-ns", "Invoice bot & co")
	if err != nil {
		t.Fatal(err)
	}
	a := g.do(g.request(named, "GET", "/proxy/github/user", ""))
	if a.status != 403 || a.env["code"] != "AUTH_CLAIM_REQUIRED" {
		t.Fatalf("%d %s", a.status, a.body)
	}
	subs := g.cp.Submissions()
	if len(subs) != 1 || subs[0].AgentName != "Invoice bot & co" || subs[0].Namespace != "named-ns" {
		t.Fatalf("submissions = %+v", subs)
	}

	renamed := *named
	if err := renamed.Rename("Trusted payroll agent", time.Now()); err != nil {
		t.Fatal(err)
	}
	r := g.request(named, "GET", "/proxy/github/user", "")
	r.Header.Set(identity.HeaderAgentCert, renamed.CertificateHeader())
	if a := g.do(r); a.env["code"] != "AUTH_SIGNATURE_INVALID" {
		t.Fatalf("swapped certificate: %d %s", a.status, a.body)
	}
	if n := len(g.cp.Submissions()); n != 1 {
		t.Fatalf("control plane received %d submissions, want 1", n)
	}
}

// A revoked agent that comes back is told so, with its claim, and files
// nothing: the owner decides whether to approve it again. The gateway
// knows from the revocation it applied; after a full read of the feed,
// which no longer names the claim, the control plane's answer to the
// submission says it.
func TestRevokedAgentIsToldAndFilesNothing(t *testing.T) {
	t.Parallel()
	g := newGateway(t, gatewayOptions{})
	first := g.do(g.request(g.stranger, "GET", "/proxy/github/user", ""))
	id, _ := first.env["claim_id"].(string)
	if first.status != 403 || id == "" {
		t.Fatalf("first request: %d %s", first.status, first.body)
	}
	g.approve(g.stranger)
	g.refresh()
	if a := g.do(g.request(g.stranger, "GET", "/proxy/github/user", "")); a.status != 200 {
		t.Fatalf("approved: %d %s", a.status, a.body)
	}
	revoked := func(step string) {
		t.Helper()
		a := g.do(g.request(g.stranger, "GET", "/proxy/github/user", ""))
		if a.status != 403 || a.env["code"] != "AUTH_CLAIM_REVOKED" || a.env["claim_id"] != id || a.env["claim_status"] != "revoked" {
			t.Fatalf("%s: %d %s", step, a.status, a.body)
		}
	}
	if !g.cp.Revoke(id) {
		t.Fatal("revoke")
	}
	g.refresh()
	revoked("after the gateway applied the revocation")
	if n := len(g.cp.Submissions()); n != 1 {
		t.Fatalf("%d submissions, want the first one only", n)
	}

	// The next refresh reads the whole feed: no trace of the revocation.
	other, _ := identity.New("other-ns")
	g.approve(other)
	g.cp.ExpireChanges()
	g.clock.advance(2 * time.Minute)
	g.refresh()
	revoked("after a full read")
	subs := g.cp.Submissions()
	if len(subs) != 2 || subs[1].Created || subs[1].ClaimID != id {
		t.Fatalf("submissions %+v: a claim was filed", subs)
	}

	g.approve(g.stranger) // the owner approves the agent again
	g.refresh()
	if a := g.do(g.request(g.stranger, "GET", "/proxy/github/user", "")); a.status != 200 {
		t.Fatalf("approved again: %d %s", a.status, a.body)
	}
}
