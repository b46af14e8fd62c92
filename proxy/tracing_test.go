package proxy

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/idnhq/idn/kit/tracing/tracingtest"
)

const (
	agentTraceID     = "4bf92f3577b34da6a3ce929d0e0e4736"
	agentSpanID      = "00f067aa0ba902b7"
	agentTraceparent = "00-" + agentTraceID + "-" + agentSpanID + "-01"
)

// traced sends r with the agent's traceparent and tracestate, which its
// signature does not cover.
func traced(r *http.Request) *http.Request {
	r.Header.Set("Traceparent", agentTraceparent)
	r.Header.Set("Tracestate", "vendor=agent")
	return r
}

// tree indexes received spans by name; each name must occur once.
func tree(t *testing.T, spans []tracingtest.Span) map[string]tracingtest.Span {
	t.Helper()
	byName := map[string]tracingtest.Span{}
	for _, s := range spans {
		if _, dup := byName[s.Name]; dup {
			t.Fatalf("span %s twice in %+v", s.Name, spans)
		}
		byName[s.Name] = s
	}
	return byName
}

// noSecrets fails when any span attribute carries one of the secrets.
func noSecrets(t *testing.T, spans []tracingtest.Span, secrets ...string) {
	t.Helper()
	for _, s := range spans {
		for k, v := range s.Attributes {
			for _, secret := range secrets {
				if strings.Contains(v, secret) {
					t.Errorf("span %s attribute %s carries a secret: %q", s.Name, k, v)
				}
			}
		}
	}
}

// One signed REST request makes a gateway.request span, child of the
// agent's span, with one child per pipeline stage; the upstream receives
// the forward span's traceparent in the agent's trace.
func TestTracingSignedRequest(t *testing.T) {
	t.Parallel()
	rec := tracingtest.NewReceiver(t)
	tp := rec.Provider(t)
	g := newGateway(t, gatewayOptions{tracer: tp})

	r := traced(g.request(g.agent, "GET", "/proxy/github/repos?page=2", ""))
	signature := r.Header.Get("Signature")
	if a := g.do(r); a.status != 200 {
		t.Fatalf("status %d %s", a.status, a.body)
	}
	if err := tp.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	spans := rec.Spans()
	byName := tree(t, spans)
	root, ok := byName["gateway.request"]
	if !ok || root.TraceID != agentTraceID || root.ParentID != agentSpanID {
		t.Fatalf("gateway.request %+v does not continue the agent's span (spans %+v)", root, spans)
	}
	if root.Attributes["idn.connection_id"] != "github" || root.Attributes["http.request.method"] != "GET" {
		t.Errorf("gateway.request attributes %v", root.Attributes)
	}
	for _, stage := range []string{"gateway.verify", "gateway.claim", "gateway.nonce", "gateway.credential", "gateway.forward"} {
		s, ok := byName[stage]
		if !ok || s.TraceID != agentTraceID || s.ParentID != root.SpanID || s.Error {
			t.Errorf("%s = %+v, want an ok child of gateway.request %s", stage, s, root.SpanID)
		}
	}
	if ns := byName["gateway.verify"].Attributes["idn.namespace"]; ns != g.agent.Namespace {
		t.Errorf("gateway.verify idn.namespace = %v, want the verified caller's %q", ns, g.agent.Namespace)
	}
	if len(spans) != 6 {
		t.Errorf("%d spans, want 6: %+v", len(spans), spans)
	}
	got := g.up.lastSeen().Header
	want := "00-" + agentTraceID + "-" + byName["gateway.forward"].SpanID + "-01"
	if got.Get("Traceparent") != want || got.Get("Tracestate") != "vendor=agent" {
		t.Errorf("upstream traceparent %q tracestate %q, want %q and the agent's tracestate", got.Get("Traceparent"), got.Get("Tracestate"), want)
	}
	noSecrets(t, spans, upstreamToken, signature, "agent-own-token", "page=2")
}

// A refused request ends its trace with the refusal's code, and a query
// credential never reaches an attribute.
func TestTracingRefusalAndQueryCredential(t *testing.T) {
	t.Parallel()
	rec := tracingtest.NewReceiver(t)
	tp := rec.Provider(t)
	g := newGateway(t, gatewayOptions{tracer: tp})

	if a := g.do(traced(g.request(g.stranger, "GET", "/proxy/github/x", ""))); a.status != 403 {
		t.Fatalf("stranger: %d", a.status)
	}
	if a := g.do(traced(g.request(g.agent, "GET", "/proxy/query/x?q=1", ""))); a.status != 200 {
		t.Fatalf("query connection: %d %s", a.status, a.body)
	}
	if err := tp.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	spans := rec.Spans()
	var claim, request bool
	for _, s := range spans {
		switch {
		case s.Name == "gateway.claim" && s.Error && s.Attributes["idn.error.code"] == "AUTH_CLAIM_REQUIRED":
			claim = true
		case s.Name == "gateway.request" && s.Error && s.Attributes["idn.error.code"] == "AUTH_CLAIM_REQUIRED":
			request = true
		}
	}
	if !claim || !request {
		t.Errorf("the refusal's code is not on gateway.claim and gateway.request: %+v", spans)
	}
	noSecrets(t, spans, querySecret)
}

// traceparents records the traceparent of every request to next.
type traceparents struct {
	mu   sync.Mutex
	seen []string
}

func (tp *traceparents) wrap(t *testing.T, next string) *httptest.Server {
	u, _ := url.Parse(next)
	rp := httputil.NewSingleHostReverseProxy(u)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tp.mu.Lock()
		tp.seen = append(tp.seen, r.Header.Get("Traceparent"))
		tp.mu.Unlock()
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// One MCP tool call makes mcp.tool_call under gateway.request, with the
// discovery it needed under it, and every upstream MCP request (initialize,
// tools/list, tools/call) carries a traceparent in the agent's trace.
func TestTracingMCPToolCall(t *testing.T) {
	t.Parallel()
	up, _ := mcpUpstream(t)
	var seen traceparents
	rec := tracingtest.NewReceiver(t)
	tp := rec.Provider(t)
	g := newGateway(t, gatewayOptions{mcpUpstream: seen.wrap(t, up.URL).URL, tracer: tp})

	a := g.do(traced(g.request(g.agent, "POST", "/mcp/tools/tools/docs.search/call", `{"text":"hi"}`)))
	if a.status != 200 || !strings.Contains(string(a.body), "echo:hi") {
		t.Fatalf("call: %d %s", a.status, a.body)
	}
	if err := tp.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	spans := rec.Spans()
	byName := tree(t, spans)
	root := byName["gateway.request"]
	if root.TraceID != agentTraceID || root.ParentID != agentSpanID || root.Attributes["idn.route"] != "mcp" {
		t.Fatalf("gateway.request %+v does not continue the agent's span", root)
	}
	call, ok := byName["mcp.tool_call"]
	if !ok || call.ParentID != root.SpanID || call.Attributes["mcp.tool.name"] != "docs.search" || call.Attributes["mcp.result"] != "success" {
		t.Fatalf("mcp.tool_call %+v, want a successful child of gateway.request", call)
	}
	disc, ok := byName["mcp.discovery"]
	if !ok || disc.TraceID != agentTraceID || disc.ParentID != call.SpanID || disc.Attributes["mcp.tools"] != "2" {
		t.Errorf("mcp.discovery %+v, want a child of mcp.tool_call that found 2 tools", disc)
	}
	for _, stage := range []string{"gateway.verify", "gateway.claim", "gateway.nonce"} {
		if s := byName[stage]; s.ParentID != root.SpanID {
			t.Errorf("%s %+v is not a child of gateway.request", stage, s)
		}
	}
	seen.mu.Lock()
	defer seen.mu.Unlock()
	if len(seen.seen) < 3 {
		t.Fatalf("upstream saw %d requests, want initialize, tools/list and tools/call at least", len(seen.seen))
	}
	ids := []string{call.SpanID, disc.SpanID}
	for i, h := range seen.seen {
		parts := strings.Split(h, "-")
		if len(parts) != 4 || parts[1] != agentTraceID || !slices.Contains(ids, parts[2]) {
			t.Errorf("upstream request %d traceparent %q, want a child of mcp.tool_call or mcp.discovery in the agent's trace", i, h)
		}
	}
	noSecrets(t, spans, upstreamToken)
}

// With no TracerProvider the gateway touches no trace header: the agent's
// own traceparent reaches the upstream as it was sent.
func TestTracingOffPassesHeadersThrough(t *testing.T) {
	t.Parallel()
	g := newGateway(t, gatewayOptions{})
	if a := g.do(traced(g.request(g.agent, "GET", "/proxy/github/x", ""))); a.status != 200 {
		t.Fatalf("status %d", a.status)
	}
	if got := g.up.lastSeen().Header.Get("Traceparent"); got != agentTraceparent {
		t.Errorf("upstream traceparent %q, want the agent's %q", got, agentTraceparent)
	}
}
