package mcpproxy_test

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idnhq/idn/mcpproxy"
)

func TestDiscoveryAndSubjectFiltering(t *testing.T) {
	t.Parallel()
	e := newEnv(t, mcpproxy.Config{}, mcpproxy.Connection{Policy: mcpproxy.Policy{
		Deny: []string{"a.fail"},
		Subjects: map[string]mcpproxy.SubjectPolicy{
			"alice": {Allow: []string{"a.*"}},
			"bob":   {Deny: []string{"a.*"}},
		},
	}})
	alice := e.do(http.MethodGet, "/mcp/mcp1/tools", "alice", "")
	wantStatus(t, alice, http.StatusOK, "")
	bob := e.do(http.MethodGet, "/mcp/mcp1/tools", "bob", "")
	wantStatus(t, bob, http.StatusOK, "")

	if got, want := toolNames(alice), []string{"a.echo", "a.other"}; !slices.Equal(got, want) {
		t.Errorf("alice sees %q, want %q", got, want)
	}
	if got, want := toolNames(bob), []string{"b.x", "b.y", "c.z"}; !slices.Equal(got, want) {
		t.Errorf("bob sees %q, want %q", got, want)
	}
	server := alice.body["server"].(map[string]any)
	if server["name"] != "test-upstream" || server["version"] != "1.2.3" || server["protocol_version"] == "" {
		t.Errorf("server = %v", server)
	}
	if at, err := time.Parse(time.RFC3339, alice.body["discovered_at"].(string)); err != nil || !at.Equal(e.clock.now()) {
		t.Errorf("discovered_at = %v (%v), want %v", alice.body["discovered_at"], err, e.clock.now())
	}
	schema := alice.body["tools"].([]any)[0].(map[string]any)["input_schema"].(map[string]any)
	if schema["type"] != "object" {
		t.Errorf("input_schema = %v, want a JSON object schema", schema)
	}
	if n := e.up.count("tools/list"); n != 1 {
		t.Errorf("upstream tools/list calls = %d, want 1 (second request served from cache)", n)
	}
	if got := e.proxy.SessionState("mcp1"); got != mcpproxy.SessionReady {
		t.Errorf("session state = %s, want ready", got)
	}
}

func TestExplainSources(t *testing.T) {
	t.Parallel()
	e := newEnv(t, mcpproxy.Config{}, mcpproxy.Connection{Policy: mcpproxy.Policy{
		Allow:    []string{"a.*", "b.*"},
		Deny:     []string{"a.fail"},
		MaxTools: 3, // of a.echo, a.other, b.x, b.y: b.y is capped
		Subjects: map[string]mcpproxy.SubjectPolicy{
			"narrow": {Allow: []string{"a.echo"}, Deny: []string{"a.other"}},
		},
	}})
	e2 := newEnv(t, mcpproxy.Config{}, mcpproxy.Connection{})
	tests := []struct {
		env     *env
		subject string
		tool    string
		allowed bool
		source  string
	}{
		{e, "anyone", "a.echo", true, "connection_allowlist"},
		{e, "anyone", "c.z", false, "connection_allowlist"},
		{e, "anyone", "a.fail", false, "connection_denylist"},
		{e, "narrow", "a.other", false, "subject_denylist"},
		{e, "narrow", "a.echo", true, "subject_allowlist"},
		{e, "narrow", "b.x", false, "subject_allowlist"},
		{e, "anyone", "b.y", false, "connection_tool_cap"},
		{e2, "anyone", "c.z", true, "default_allow"},
	}
	for _, tt := range tests {
		t.Run(tt.source+"/"+tt.subject+"/"+tt.tool, func(t *testing.T) {
			r := tt.env.do(http.MethodGet, "/mcp/mcp1/tools/"+tt.tool+"/explain", tt.subject, "")
			wantStatus(t, r, http.StatusOK, "")
			if r.body["tool"] != tt.tool || r.body["allowed"] != tt.allowed || r.body["source"] != tt.source {
				t.Errorf("explain = %s, want allowed=%v source=%s", r.raw, tt.allowed, tt.source)
			}
		})
	}
	wantStatus(t, e.do(http.MethodGet, "/mcp/mcp1/tools/no.such/explain", "anyone", ""), http.StatusNotFound, "MCP_TOOL_NOT_FOUND")
}

func TestCalls(t *testing.T) {
	t.Parallel()
	e := newEnv(t, mcpproxy.Config{}, mcpproxy.Connection{Policy: mcpproxy.Policy{Deny: []string{"c.*"}}})

	t.Run("valid arguments", func(t *testing.T) {
		r := e.call("s", "a.echo", `{"text":"hi","count":2}`)
		wantStatus(t, r, http.StatusOK, "")
		content := r.body["content"].([]any)
		block := content[0].(map[string]any)
		if block["type"] != "text" || block["text"] != "hihi" || r.body["is_error"] != false {
			t.Errorf("call = %s", r.raw)
		}
		if r.body["connection_id"] != "mcp1" || r.body["tool"] != "a.echo" {
			t.Errorf("call = %s", r.raw)
		}
	})
	t.Run("invalid arguments never reach upstream", func(t *testing.T) {
		before := e.up.count("tools/call")
		r := e.call("s", "a.echo", `{"count":"two"}`)
		wantStatus(t, r, http.StatusBadRequest, "MCP_TOOL_ARGUMENTS_INVALID")
		var paths []string
		for _, d := range r.body["details"].([]any) {
			paths = append(paths, d.(map[string]any)["path"].(string))
		}
		if !slices.Equal(paths, []string{"/count", "/text"}) {
			t.Errorf("failing paths = %q, want [/count /text]", paths)
		}
		if r := e.call("s", "a.echo", `["not","an","object"]`); r.status != http.StatusBadRequest {
			t.Errorf("array body: status %d", r.status)
		}
		if got := e.up.count("tools/call"); got != before {
			t.Errorf("upstream tools/call went from %d to %d", before, got)
		}
		if e.metric("idn_gateway_mcp_tool_call_total", "invalid_arguments") != 2 {
			t.Error("invalid_arguments metric did not move")
		}
	})
	t.Run("tool error result is a 200", func(t *testing.T) {
		r := e.call("s", "a.fail", `{"text":"x"}`)
		wantStatus(t, r, http.StatusOK, "")
		if r.body["is_error"] != true || !strings.Contains(r.raw, "tool exploded") {
			t.Errorf("call = %s", r.raw)
		}
	})
	t.Run("denied tool never reaches upstream", func(t *testing.T) {
		before := e.up.count("tools/call")
		wantStatus(t, e.call("s", "c.z", `{"text":"x"}`), http.StatusForbidden, "MCP_TOOL_FORBIDDEN")
		if got := e.up.count("tools/call"); got != before {
			t.Errorf("upstream tools/call went from %d to %d", before, got)
		}
		if e.metric("idn_gateway_mcp_tool_call_total", "filtered") != 1 {
			t.Error("filtered metric did not move")
		}
	})
	t.Run("unknown tool and connection", func(t *testing.T) {
		wantStatus(t, e.call("s", "no.such", `{}`), http.StatusNotFound, "MCP_TOOL_NOT_FOUND")
		// A name the caller made up is never a label of its own.
		if got := e.series("idn_gateway_mcp_tool_call_total", "tool", "no.such"); got != 0 {
			t.Errorf("a made-up tool name labels %d series", got)
		}
		if e.series("idn_gateway_mcp_tool_call_total", "tool", "c.z") != 1 {
			t.Error("a refused tool of the connection has no series of its own")
		}
		wantStatus(t, e.do(http.MethodGet, "/mcp/nope/tools", "s", ""), http.StatusNotFound, "CONNECTION_NOT_FOUND")
		wantStatus(t, e.do(http.MethodGet, "/mcp/mcp1/tools?refresh=sometimes", "s", ""), http.StatusBadRequest, "VALIDATION_ERROR")
	})
}

func TestSubjectAllowCannotEscalate(t *testing.T) {
	t.Parallel()
	e := newEnv(t, mcpproxy.Config{}, mcpproxy.Connection{Policy: mcpproxy.Policy{
		Allow:    []string{"a.*"},
		Subjects: map[string]mcpproxy.SubjectPolicy{"mallory": {Allow: []string{"b.x"}}},
	}})
	if names := toolNames(e.do(http.MethodGet, "/mcp/mcp1/tools", "mallory", "")); slices.Contains(names, "b.x") {
		t.Errorf("mallory sees %q, b.x must stay hidden", names)
	}
	r := e.do(http.MethodGet, "/mcp/mcp1/tools/b.x/explain", "mallory", "")
	if r.body["allowed"] != false || r.body["source"] != "connection_allowlist" {
		t.Errorf("explain = %s", r.raw)
	}
	wantStatus(t, e.call("mallory", "b.x", `{"text":"x"}`), http.StatusForbidden, "MCP_TOOL_FORBIDDEN")
	if n := e.up.count("tools/call"); n != 0 {
		t.Errorf("upstream tools/call = %d, want 0", n)
	}
}

func TestCircuitBreaker(t *testing.T) {
	t.Parallel()
	e := newEnv(t, mcpproxy.Config{Options: mcpproxy.Options{BreakerFailures: 2, BreakerCooldown: 10 * time.Second}}, mcpproxy.Connection{})
	wantStatus(t, e.do(http.MethodGet, "/mcp/mcp1/tools", "s", ""), http.StatusOK, "")

	e.up.fail("tools/call", http.StatusInternalServerError, http.StatusInternalServerError)
	for range 2 {
		wantStatus(t, e.call("s", "a.echo", `{"text":"x"}`), http.StatusBadGateway, "UPSTREAM_ERROR")
	}
	calls := e.up.count("tools/call")
	r := e.call("s", "a.echo", `{"text":"x"}`)
	wantStatus(t, r, http.StatusServiceUnavailable, "MCP_CIRCUIT_OPEN")
	if r.header.Get("Retry-After") != "10" {
		t.Errorf("Retry-After = %q, want 10", r.header.Get("Retry-After"))
	}
	if got := e.up.count("tools/call"); got != calls {
		t.Fatalf("open breaker let a call upstream (%d → %d)", calls, got)
	}

	e.clock.advance(10 * time.Second)
	entered, _, release := e.up.hold("tools/call")
	probe := make(chan response)
	go func() { probe <- e.call("s", "a.echo", `{"text":"probe"}`) }()
	<-entered // the probe is at the upstream; the breaker is half-open
	r = e.call("s", "a.echo", `{"text":"x"}`)
	wantStatus(t, r, http.StatusServiceUnavailable, "MCP_CIRCUIT_OPEN")
	if r.header.Get("Retry-After") == "" {
		t.Error("half-open refusal has no Retry-After")
	}
	release()
	wantStatus(t, <-probe, http.StatusOK, "")
	if got := e.up.count("tools/call"); got != calls+1 {
		t.Errorf("upstream tools/call during half-open = %d, want exactly 1 probe", got-calls)
	}
	wantStatus(t, e.call("s", "a.echo", `{"text":"closed again"}`), http.StatusOK, "")
	if e.metric("idn_gateway_mcp_tool_call_total", "circuit_open") != 2 {
		t.Error("circuit_open metric did not count both refusals")
	}
}

func TestBreakerProbeFailureReopens(t *testing.T) {
	t.Parallel()
	e := newEnv(t, mcpproxy.Config{Options: mcpproxy.Options{BreakerFailures: 1, BreakerCooldown: 5 * time.Second}}, mcpproxy.Connection{})
	wantStatus(t, e.do(http.MethodGet, "/mcp/mcp1/tools", "s", ""), http.StatusOK, "")
	e.up.fail("tools/call", http.StatusInternalServerError, http.StatusInternalServerError)
	wantStatus(t, e.call("s", "a.echo", `{"text":"x"}`), http.StatusBadGateway, "UPSTREAM_ERROR")
	e.clock.advance(5 * time.Second)
	wantStatus(t, e.call("s", "a.echo", `{"text":"x"}`), http.StatusBadGateway, "UPSTREAM_ERROR") // failed probe
	r := e.call("s", "a.echo", `{"text":"x"}`)
	wantStatus(t, r, http.StatusServiceUnavailable, "MCP_CIRCUIT_OPEN")
	if r.header.Get("Retry-After") != "5" {
		t.Errorf("Retry-After = %q, want a fresh 5 s cooldown", r.header.Get("Retry-After"))
	}
}

func TestRetries(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		maxRetries   int
		statuses     []int // upstream answers before the real server
		wantStatus   int
		wantAttempts int
	}{
		{"503 then success is one logical success", 0, []int{503}, http.StatusOK, 2},
		{"every retryable status is retried", 3, []int{502, 504, 429}, http.StatusOK, 4},
		{"retries are bounded", 2, []int{502, 504, 429, 503}, http.StatusBadGateway, 3},
		{"400 is not retried", 0, []int{400}, http.StatusBadGateway, 1},
		{"401 is not retried", 0, []int{401}, http.StatusBadGateway, 1},
		{"500 is not retried", 0, []int{500}, http.StatusBadGateway, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, mcpproxy.Config{Options: mcpproxy.Options{MaxRetries: tt.maxRetries}}, mcpproxy.Connection{})
			wantStatus(t, e.do(http.MethodGet, "/mcp/mcp1/tools", "s", ""), http.StatusOK, "")
			e.up.fail("tools/call", tt.statuses...)
			wantStatus(t, e.call("s", "a.echo", `{"text":"x"}`), tt.wantStatus, "")
			if n := e.up.count("tools/call"); n != tt.wantAttempts {
				t.Errorf("upstream attempts = %d, want %d", n, tt.wantAttempts)
			}
			successes := e.metric("idn_gateway_mcp_tool_call_total", "success")
			if want := map[bool]float64{true: 1, false: 0}[tt.wantStatus == http.StatusOK]; successes != want {
				t.Errorf("success metric = %v, want %v logical calls", successes, want)
			}
		})
	}
	t.Run("sent tools/call that times out is not retried", func(t *testing.T) {
		e := newEnv(t, mcpproxy.Config{Options: mcpproxy.Options{AttemptTimeout: 300 * time.Millisecond}}, mcpproxy.Connection{})
		wantStatus(t, e.do(http.MethodGet, "/mcp/mcp1/tools", "s", ""), http.StatusOK, "")
		_, _, release := e.up.hold("tools/call")
		defer release()
		wantStatus(t, e.call("s", "a.echo", `{"text":"x"}`), http.StatusBadGateway, "UPSTREAM_ERROR")
		if n := e.up.count("tools/call"); n != 1 {
			t.Errorf("upstream attempts = %d, want 1: the tool may have run", n)
		}
	})
	t.Run("timed-out tools/list is retried", func(t *testing.T) {
		e := newEnv(t, mcpproxy.Config{Options: mcpproxy.Options{AttemptTimeout: 300 * time.Millisecond}}, mcpproxy.Connection{})
		_, abandoned, release := e.up.hold("tools/list")
		go func() {
			<-abandoned // the first attempt timed out; let the retry through
			release()
		}()
		wantStatus(t, e.do(http.MethodGet, "/mcp/mcp1/tools", "s", ""), http.StatusOK, "")
		if n := e.up.count("tools/list"); n != 2 {
			t.Errorf("upstream attempts = %d, want 2", n)
		}
	})
}

func TestDiscoveryCache(t *testing.T) {
	t.Parallel()
	const ttl, sie = time.Minute, 10 * time.Minute
	cfg := mcpproxy.Config{Options: mcpproxy.Options{DiscoveryTTL: ttl, StaleIfError: sie}}
	list := func(e *env, query string) response {
		return e.do(http.MethodGet, "/mcp/mcp1/tools"+query, "s", "")
	}

	t.Run("fresh makes no upstream call", func(t *testing.T) {
		e := newEnv(t, cfg, mcpproxy.Connection{})
		wantStatus(t, list(e, ""), http.StatusOK, "")
		e.clock.advance(ttl)
		wantStatus(t, list(e, "?refresh=auto"), http.StatusOK, "")
		if n := e.up.count("tools/list"); n != 1 {
			t.Errorf("tools/list = %d, want 1", n)
		}
		if e.metric("idn_gateway_mcp_discovery_total", "cache_hit") != 1 {
			t.Error("cache_hit metric did not move")
		}
	})
	t.Run("stale with upstream down serves stale", func(t *testing.T) {
		e := newEnv(t, cfg, mcpproxy.Connection{})
		first := list(e, "")
		e.clock.advance(ttl + time.Second)
		e.up.setDown(true)
		r := list(e, "")
		wantStatus(t, r, http.StatusOK, "")
		if r.body["discovered_at"] != first.body["discovered_at"] || len(toolNames(r)) != 6 {
			t.Errorf("stale answer = %s", r.raw)
		}
		if e.metric("idn_gateway_mcp_discovery_total", "stale_if_error") != 1 {
			t.Error("stale_if_error metric did not move")
		}
	})
	t.Run("expired with upstream down fails", func(t *testing.T) {
		e := newEnv(t, cfg, mcpproxy.Connection{})
		list(e, "")
		e.clock.advance(ttl + sie + time.Second)
		e.up.setDown(true)
		wantStatus(t, list(e, ""), http.StatusBadGateway, "UPSTREAM_ERROR")
	})
	t.Run("force always goes upstream", func(t *testing.T) {
		e := newEnv(t, cfg, mcpproxy.Connection{})
		for range 3 {
			wantStatus(t, list(e, "?refresh=force"), http.StatusOK, "")
		}
		if n := e.up.count("tools/list"); n != 3 {
			t.Errorf("tools/list = %d, want 3", n)
		}
		e.up.setDown(true)
		wantStatus(t, list(e, "?refresh=force"), http.StatusBadGateway, "UPSTREAM_ERROR")
	})
	t.Run("50 concurrent misses make one discovery", func(t *testing.T) {
		e := newEnv(t, cfg, mcpproxy.Connection{})
		entered, _, release := e.up.hold("tools/list")
		var wg sync.WaitGroup
		results := make(chan int, 50)
		for range 50 {
			wg.Go(func() { results <- list(e, "").status })
		}
		<-entered
		release()
		wg.Wait()
		close(results)
		for s := range results {
			if s != http.StatusOK {
				t.Errorf("status %d", s)
			}
		}
		if n := e.up.count("tools/list"); n != 1 {
			t.Errorf("tools/list = %d, want 1", n)
		}
		if n := e.up.count("initialize"); n != 1 {
			t.Errorf("initialize = %d, want 1", n)
		}
	})
}

func TestDiscoveryPersistenceAndSeed(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var stored []mcpproxy.Discovery
	cfg := mcpproxy.Config{OnDiscovery: func(_ context.Context, id string, d mcpproxy.Discovery) {
		mu.Lock()
		defer mu.Unlock()
		if id == "mcp1" {
			stored = append(stored, d)
		}
	}}
	e := newEnv(t, cfg, mcpproxy.Connection{})
	d, err := e.proxy.Discover(context.Background(), mustConn(t, e), mcpproxy.RefreshForce)
	if err != nil {
		t.Fatal(err)
	}
	if d.ServerName != "test-upstream" || len(d.Tools) != 6 || d.DiscoveredAt.IsZero() || d.LastError != "" {
		t.Fatalf("discovery = %+v", d)
	}
	e.up.setDown(true)
	if _, err := e.proxy.Discover(context.Background(), mustConn(t, e), mcpproxy.RefreshForce); err == nil {
		t.Fatal("forced discovery against a down upstream succeeded")
	}
	mu.Lock()
	if len(stored) != 2 || stored[1].LastError == "" || len(stored[1].Tools) != 6 || !stored[1].DiscoveredAt.Equal(d.DiscoveredAt) {
		t.Fatalf("stored = %+v", stored)
	}
	raw, _ := json.Marshal(stored[0])
	mu.Unlock()

	// A new proxy (a gateway restart) seeded from the stored object serves
	// it while fresh without asking upstream.
	e2 := newEnv(t, mcpproxy.Config{Clock: e.clock.now}, mcpproxy.Connection{Discovery: raw})
	r := e2.do(http.MethodGet, "/mcp/mcp1/tools", "s", "")
	wantStatus(t, r, http.StatusOK, "")
	if len(toolNames(r)) != 6 || e2.up.count("tools/list") != 0 {
		t.Errorf("seeded list = %s, upstream tools/list = %d", r.raw, e2.up.count("tools/list"))
	}
}

func mustConn(t *testing.T, e *env) *mcpproxy.Connection {
	c, err := e.src.MCPConnection(context.Background(), "mcp1")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestSessionLossReinitializes(t *testing.T) {
	t.Parallel()
	e := newEnv(t, mcpproxy.Config{}, mcpproxy.Connection{})
	if got := e.proxy.SessionState("mcp1"); got != mcpproxy.SessionInitializeRequired {
		t.Errorf("initial state = %s", got)
	}
	wantStatus(t, e.call("s", "a.echo", `{"text":"one"}`), http.StatusOK, "")
	e.up.restart() // the server forgets the session: it answers 404 for its id
	r := e.call("s", "a.echo", `{"text":"two"}`)
	wantStatus(t, r, http.StatusOK, "")
	if n := e.up.count("initialize"); n != 2 {
		t.Errorf("initialize = %d, want 2", n)
	}
	if got := e.proxy.SessionState("mcp1"); got != mcpproxy.SessionReady {
		t.Errorf("state after recovery = %s", got)
	}

	e.up.setDown(true)
	wantStatus(t, e.call("s", "a.echo", `{"text":"three"}`), http.StatusBadGateway, "UPSTREAM_ERROR")
	if got := e.proxy.SessionState("mcp1"); got != mcpproxy.SessionReinitializePending {
		t.Errorf("state after failure = %s, want reinitialize_pending", got)
	}
	e.up.setDown(false)
	wantStatus(t, e.call("s", "a.echo", `{"text":"four"}`), http.StatusOK, "")
	if got := e.proxy.SessionState("mcp1"); got != mcpproxy.SessionReady {
		t.Errorf("state after re-initialize = %s", got)
	}
}

// An upstream restarted on the same address that answers the old session
// id with 400 "no valid session" (instead of 404) is re-initialized and the
// call retried once, so the first call after the restart succeeds.
func TestSessionLostAs400Reinitializes(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, body string }{
		{"plain text", "Bad Request: No valid session ID provided"},
		{"JSON-RPC error", `{"jsonrpc":"2.0","error":{"code":-32000,"message":"Bad Request: No valid session ID provided"},"id":null}`},
		{"invalid session id", "Invalid or expired session ID"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, mcpproxy.Config{Options: mcpproxy.Options{BreakerFailures: 1}}, mcpproxy.Connection{})
			e.up.answerLostSessionWith400(tt.body)
			wantStatus(t, e.call("s", "a.echo", `{"text":"one"}`), http.StatusOK, "")
			e.up.restart()
			r := e.call("s", "a.echo", `{"text":"two"}`)
			wantStatus(t, r, http.StatusOK, "")
			if n := e.up.count("initialize"); n != 2 {
				t.Errorf("initialize = %d, want 2", n)
			}
			if n := e.up.count("tools/call"); n != 3 {
				t.Errorf("tools/call = %d, want 3 (one refused for the lost session, retried once)", n)
			}
		})
	}
	// A 400 that is about something else is not taken for a lost session.
	e := newEnv(t, mcpproxy.Config{}, mcpproxy.Connection{})
	wantStatus(t, e.call("s", "a.echo", `{"text":"one"}`), http.StatusOK, "")
	e.up.fail("tools/call", http.StatusBadRequest)
	wantStatus(t, e.call("s", "a.echo", `{"text":"two"}`), http.StatusBadGateway, "UPSTREAM_ERROR")
	if n := e.up.count("initialize"); n != 1 {
		t.Errorf("initialize = %d after an unrelated 400, want 1", n)
	}
}

func TestRateLimit(t *testing.T) {
	t.Parallel()
	e := newEnv(t, mcpproxy.Config{Options: mcpproxy.Options{RateLimitPerMinute: 2}}, mcpproxy.Connection{})
	for range 2 {
		wantStatus(t, e.call("s", "a.echo", `{"text":"x"}`), http.StatusOK, "")
	}
	r := e.call("s", "a.echo", `{"text":"x"}`)
	wantStatus(t, r, http.StatusTooManyRequests, "MCP_TOOL_RATE_LIMITED")
	if r.header.Get("Retry-After") != "30" {
		t.Errorf("Retry-After = %q, want 30", r.header.Get("Retry-After"))
	}
	if n := e.up.count("tools/call"); n != 2 {
		t.Errorf("upstream tools/call = %d, want 2", n)
	}
	e.clock.advance(30 * time.Second)
	wantStatus(t, e.call("s", "a.echo", `{"text":"x"}`), http.StatusOK, "")
}

// Attack: calls of tools the connection does not have, under names the
// caller chose, each logged and traced. They count against the rate
// limit as calls do, so a flood of them stops at the limit.
func TestRateLimitCountsUnknownTools(t *testing.T) {
	t.Parallel()
	e := newEnv(t, mcpproxy.Config{Options: mcpproxy.Options{RateLimitPerMinute: 2}}, mcpproxy.Connection{})
	name := strings.Repeat("n", 100_000)
	for range 2 {
		wantStatus(t, e.call("s", name, `{}`), http.StatusNotFound, "MCP_TOOL_NOT_FOUND")
	}
	wantStatus(t, e.call("s", name, `{}`), http.StatusTooManyRequests, "MCP_TOOL_RATE_LIMITED")
	wantStatus(t, e.call("s", "a.echo", `{"text":"x"}`), http.StatusTooManyRequests, "MCP_TOOL_RATE_LIMITED")
	if n := e.up.count("tools/call"); n != 0 {
		t.Errorf("upstream tools/call = %d, want 0", n)
	}
}

func TestEndpointChangeStartsOver(t *testing.T) {
	t.Parallel()
	e := newEnv(t, mcpproxy.Config{}, mcpproxy.Connection{})
	wantStatus(t, e.call("s", "a.echo", `{"text":"x"}`), http.StatusOK, "")
	other := newUpstream(t)
	e.src.set(&mcpproxy.Connection{ID: "mcp1", BaseURL: other.srv.URL, Endpoint: "/v2"})
	wantStatus(t, e.call("s", "a.echo", `{"text":"x"}`), http.StatusOK, "")
	if other.count("initialize") != 1 || other.count("tools/list") != 1 || other.count("tools/call") != 1 {
		t.Errorf("new endpoint saw initialize=%d tools/list=%d tools/call=%d, want 1 each",
			other.count("initialize"), other.count("tools/list"), other.count("tools/call"))
	}
	if e.up.count("tools/call") != 1 {
		t.Errorf("old endpoint got %d calls, want 1", e.up.count("tools/call"))
	}
}
