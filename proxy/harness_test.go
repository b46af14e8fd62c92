package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idnhq/idn/approval"
	"github.com/idnhq/idn/claimcache"
	"github.com/idnhq/idn/claimcache/claimcachetest"
	"github.com/idnhq/idn/credvault"
	"github.com/idnhq/idn/identity"
	"github.com/idnhq/idn/kit/testlog"
	"github.com/idnhq/idn/mcpevent"
	"github.com/idnhq/idn/mcpproxy"
	"github.com/idnhq/idn/replay"
	"github.com/idnhq/idn/upstreamauth"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"
)

// clock is a settable test clock shared by every part of the gateway.
type clock struct{ ns atomic.Int64 }

func (c *clock) now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *clock) set(t time.Time)         { c.ns.Store(t.UnixNano()) }
func (c *clock) advance(d time.Duration) { c.ns.Add(int64(d)) }

// seen is what the upstream observed of one request.
type seen struct {
	Method, Path, RawQuery string
	Header                 http.Header
	Body                   string
}

type upstream struct {
	mu   sync.Mutex
	last seen
	srv  *httptest.Server
	// release lets the SSE handler send its second event.
	release chan struct{}
}

func newUpstream(t testing.TB) *upstream {
	u := &upstream{release: make(chan struct{})}
	u.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		u.mu.Lock()
		u.last = seen{r.Method, r.URL.EscapedPath(), r.URL.RawQuery, r.Header.Clone(), string(body)}
		u.mu.Unlock()
		if r.URL.Path == "/api/events" {
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, "data: first\n\n")
			w.(http.Flusher).Flush()
			select {
			case <-u.release:
			case <-r.Context().Done():
				return
			}
			fmt.Fprint(w, "data: second\n\n")
			return
		}
		if r.URL.Path == "/api/forged-claim" {
			// An upstream posing as the gateway: its own claim id, marked.
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Idn-Error", "AUTH_CLAIM_REQUIRED")
			w.WriteHeader(http.StatusForbidden)
			fmt.Fprint(w, `{"error":"approve me","code":"AUTH_CLAIM_REQUIRED","claim_id":"clm_stranger","claim_status":"pending"}`)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"ok":true,"path":%q}`, r.URL.EscapedPath())
	}))
	t.Cleanup(u.srv.Close)
	return u
}

func (u *upstream) lastSeen() seen {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.last
}

const (
	upstreamToken = "ghp_upstream_secret_token_123"
	headerSecret  = "hk_header_secret_456"
	querySecret   = "qp_query_secret_789"
)

type gateway struct {
	t        testing.TB
	clock    *clock
	cp       *claimcachetest.Server
	up       *upstream
	vault    *credvault.Vault
	cache    *claimcache.Cache
	handler  *Handler
	srv      *httptest.Server
	reg      *prometheus.Registry
	metrics  *Metrics
	logs     *testlog.Buffer
	agent    *identity.Identity
	stranger *identity.Identity
	tokens   *upstreamauth.Tokens
}

type gatewayOptions struct {
	rotation    credvault.RotationEnforcement
	submitLimit int
	mcpUpstream string // base URL of an MCP server for connection "tools"
	tracer      trace.TracerProvider
	nonces      interface {
		CheckNonce(context.Context, string, string, time.Time) error
	}
	// submitter, when set, wraps the gateway's claim submitter.
	submitter func(g *gateway, s ClaimSubmitter) ClaimSubmitter
	// activity, when set, is told of the handler's decisions.
	activity ActivityRecorder
	// transport, when set, carries the upstream requests.
	transport http.RoundTripper
	// approvals, when set, holds the calls of approval_routes.
	approvals Approvals
}

func newGateway(t testing.TB, o gatewayOptions) *gateway {
	t.Helper()
	ctx := context.Background()
	g := &gateway{t: t, clock: &clock{}, logs: &testlog.Buffer{}}
	g.clock.set(time.Now().Truncate(time.Second))
	g.cp = claimcachetest.NewServer()
	t.Cleanup(g.cp.Close)
	g.up = newUpstream(t)

	key, _ := credvault.GenerateMasterKey()
	var err error
	g.vault, err = credvault.New(ctx, credvault.Config{Store: &credvault.MemoryStore{}, MasterKey: key, PollInterval: -1, Clock: g.clock.now,
		Extensions: credvault.Extensions{Check: func(c *credvault.Connection) error { // the MCP settings, as the gateway keeps them
			_, _, err := mcpproxy.DecodeSettings(c.Extensions)
			return err
		}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.vault.Close() })
	create := func(c *credvault.Connection, secrets map[string]string) {
		if _, err := g.vault.Create(ctx, c, secrets); err != nil {
			t.Fatalf("create %s: %v", c.ID, err)
		}
	}
	create(&credvault.Connection{ID: "github", Protocol: "http", BaseURL: g.up.srv.URL + "/api", AuthMode: "bearer",
		AuthSecretKey: "token"}, map[string]string{"token": upstreamToken})
	create(&credvault.Connection{ID: "keyed", Protocol: "http", BaseURL: g.up.srv.URL, PathPrefix: "/v2", AuthMode: "header_key",
		AuthSecretKey: "key", Service: "github"}, map[string]string{"key": headerSecret})
	create(&credvault.Connection{ID: "query", Protocol: "http", BaseURL: g.up.srv.URL, AuthMode: "query_param",
		AuthSecretKey: "k", Service: "github"}, map[string]string{"k": querySecret})
	create(&credvault.Connection{ID: "off", Protocol: "http", BaseURL: g.up.srv.URL, AuthMode: "bearer", AuthSecretKey: "t",
		Status: "disabled", Service: "github"}, map[string]string{"t": upstreamToken})
	create(&credvault.Connection{ID: "untracked", Protocol: "http", BaseURL: g.up.srv.URL, AuthMode: "bearer",
		AuthSecretKey: "t"}, map[string]string{"t": upstreamToken})
	create(&credvault.Connection{ID: "dead", Protocol: "http", BaseURL: "http://127.0.0.1:1", AuthMode: "query_param",
		AuthSecretKey: "k", Service: "github"}, map[string]string{"k": querySecret})
	// Connections with approval rules: "ruled" never matches what the
	// tests send it (its subjects' rules are for others), "pay" holds its payments, and alice's transfers.
	create(&credvault.Connection{ID: "ruled", Protocol: "http", BaseURL: g.up.srv.URL + "/api", AuthMode: "bearer", AuthSecretKey: "t",
		Service: "github", ApprovalRoutes: []string{"POST /payments", "DELETE /repos/*"},
		ApprovalSubjects: map[string]approval.Rules{"alice": {Routes: []string{"GET /user"}}, "Bob": {Routes: []string{"* /user*"}}}}, map[string]string{"t": upstreamToken})
	create(&credvault.Connection{ID: "pay", Protocol: "http", BaseURL: g.up.srv.URL + "/api", AuthMode: "bearer", AuthSecretKey: "t",
		Service: "github", ApprovalRoutes: []string{"POST /v1/payments*"},
		ApprovalSubjects: map[string]approval.Rules{"alice": {Routes: []string{"POST /v1/transfers"}}}}, map[string]string{"t": upstreamToken})
	// A connection whose rotation fell due a day ago.
	g.clock.advance(-3 * 24 * time.Hour)
	create(&credvault.Connection{ID: "stale", Protocol: "http", BaseURL: g.up.srv.URL, AuthMode: "bearer", AuthSecretKey: "t",
		RotationIntervalDays: 2, Service: "github"}, map[string]string{"t": upstreamToken})
	g.clock.advance(3 * 24 * time.Hour)

	g.reg = prometheus.NewRegistry()
	g.metrics, err = NewMetrics(g.reg)
	if err != nil {
		t.Fatal(err)
	}
	decisionLog := slog.New(slog.NewJSONHandler(g.logs, nil))
	var mcpHandler http.Handler
	if o.mcpUpstream != "" {
		create(&credvault.Connection{ID: "tools", Protocol: "mcp", BaseURL: o.mcpUpstream, AuthMode: "bearer",
			AuthSecretKey: "t", Service: "github", Extensions: mcpproxy.Settings{ToolDenylist: []string{"admin.*"}}.Members()}, map[string]string{"t": upstreamToken})
		observer := NewMCPObserver(g.metrics, decisionLog, []byte("test-salt"))
		mp, err := mcpproxy.New(mcpproxy.Config{Connections: testMCPConnections{g.vault}, Caller: testMCPCaller,
			OnUpstream: observer.Upstream, OnDecision: observer.Decision,
			TracerProvider: o.tracer})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { mp.Close() })
		mcpHandler = mp.Handler()
	}

	client := &http.Client{Timeout: 5 * time.Second}
	g.cache, err = claimcache.New(claimcache.Config{
		Source: &claimcache.HTTPSource{BaseURL: g.cp.URL, Client: client,
			APIKey: func(s string) (string, error) { return g.cp.APIKey(s), nil }},
		Services: []string{"github"},
		Options: claimcache.Options{
			TTL:                  30 * time.Second,
			RefreshInterval:      10 * time.Second,
			EarlyRefreshInterval: -1,
		},
		Clock: g.clock.now,
	})
	if err != nil {
		t.Fatal(err)
	}
	submitter, err := claimcache.NewSubmitter(claimcache.SubmitterConfig{
		BaseURL: g.cp.URL, Client: client, Clock: g.clock.now,
		APIKey:           func(string) (string, error) { return g.cp.APIKey("github"), nil },
		SubmitterOptions: claimcache.SubmitterOptions{RatePerMinute: o.submitLimit},
	})
	if err != nil {
		t.Fatal(err)
	}
	nonces := o.nonces
	if nonces == nil {
		nonces, err = replay.New(replay.Config{Clock: g.clock.now})
		if err != nil {
			t.Fatal(err)
		}
	}
	var sub ClaimSubmitter = submitter
	if o.submitter != nil {
		sub = o.submitter(g, submitter)
	}
	g.tokens, err = upstreamauth.New(upstreamauth.Config{Vault: g.vault, Logger: decisionLog})
	if err != nil {
		t.Fatal(err)
	}
	g.handler, err = New(Config{
		Connections: g.vault,
		Claims:      g.cache,
		Nonces:      nonces,
		Submitter:   sub,
		Clock:       g.clock.now,
		Options: Options{
			Aliases:             map[string]string{"gh": "github"},
			RotationEnforcement: o.rotation,
			Timeout:             3 * time.Second,
		},
		Metrics:        g.metrics,
		DecisionLog:    decisionLog,
		Logger:         decisionLog,
		LogSalt:        []byte("test-salt"),
		MCP:            mcpHandler,
		TracerProvider: o.tracer,
		Activity:       o.activity,
		Transport:      o.transport,
		UpstreamTokens: g.tokens,
		Approvals:      o.approvals,
	})
	if err != nil {
		t.Fatal(err)
	}
	g.srv = httptest.NewServer(g.handler)
	t.Cleanup(g.srv.Close)

	g.agent, _ = identity.New("agent-ns")
	g.stranger, _ = identity.New("stranger-ns")
	g.approve(g.agent)
	g.refresh()
	return g
}

// approve approves id's key in its namespace for the service "github", in
// the control plane; the gateway sees it at its next refresh.
func (g *gateway) approve(id *identity.Identity) {
	g.cp.Approve(claimcache.Claim{Namespace: id.Namespace, PublicKey: id.PublicKeyString(), Service: "github",
		ApprovedAt: time.Unix(1700000000, 0).UTC()})
}

func (g *gateway) refresh() {
	g.t.Helper()
	if err := g.cache.Refresh(context.Background(), "github"); err != nil {
		g.t.Fatalf("refresh: %v", err)
	}
}

// request builds a request to the gateway signed by id at the gateway clock.
func (g *gateway) request(id *identity.Identity, method, path, body string) *http.Request {
	g.t.Helper()
	return g.requestFor(id, "", method, path, body)
}

// requestFor is request signed for subject ("": the namespace).
func (g *gateway) requestFor(id *identity.Identity, subject, method, path, body string) *http.Request {
	g.t.Helper()
	var rb io.Reader
	if body != "" {
		rb = bytes.NewReader([]byte(body))
	}
	r, err := http.NewRequest(method, g.srv.URL+path, rb)
	if err != nil {
		g.t.Fatal(err)
	}
	r.Header.Set("Authorization", "Bearer agent-own-token")
	r.Header.Set("Cookie", "session=agent-cookie")
	if err := id.Sign(r, identity.SignOptions{Created: g.clock.now(), Subject: subject}); err != nil {
		g.t.Fatal(err)
	}
	return r
}

type answer struct {
	status int
	header http.Header
	body   []byte
	env    map[string]any
}

func (g *gateway) do(r *http.Request) answer {
	g.t.Helper()
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		g.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	a := answer{status: resp.StatusCode, header: resp.Header, body: b}
	_ = json.Unmarshal(b, &a.env)
	return a
}

// testMCPConnections serves the vault's MCP connections to mcpproxy with
// their credential injected and deny list applied, as the gateway's
// adapter does for what these tests use.
type testMCPConnections struct{ vault *credvault.Vault }

func (s testMCPConnections) MCPConnection(_ context.Context, id string) (*mcpproxy.Connection, error) {
	res, ok := s.vault.Lookup(id)
	if !ok || res.Connection.Protocol != credvault.ProtocolMCP {
		return nil, mcpproxy.ErrConnectionNotFound
	}
	settings, _, err := mcpproxy.DecodeSettings(res.Connection.Extensions)
	if err != nil {
		return nil, err
	}
	return &mcpproxy.Connection{ID: id, BaseURL: res.Connection.BaseURL, Transport: s.vault.Transport(id, nil),
		Policy: settings.Policy(), Redact: res.Redactions()}, nil
}

// testMCPCaller is the caller the Handler's pipeline verified.
func testMCPCaller(r *http.Request) (mcpevent.Caller, error) {
	caller, ok := CallerFrom(r.Context())
	if !ok || caller == nil {
		return mcpevent.Caller{}, errors.New("no verified caller")
	}
	return mcpevent.Caller{Namespace: caller.Namespace, Subject: caller.Subject, Key: caller.PublicKey}, nil
}
