package mcpproxy_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idnhq/idn/mcpproxy"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type noteArgs struct {
	Text string `json:"text,omitempty"`
}

// sessionUpstream is a go-sdk MCP server that keeps state per session:
// whoami answers its session's id, remember keeps a note in the session and
// recall returns it. closed receives the id of every session a client
// deletes.
type sessionUpstream struct {
	srv    *httptest.Server
	closed chan string

	mu    sync.Mutex
	notes map[string]string
}

func newSessionUpstream(t testing.TB) *sessionUpstream {
	u := &sessionUpstream{closed: make(chan string, 4096), notes: map[string]string{}}
	s := mcp.NewServer(&mcp.Implementation{Name: "stateful", Version: "1"}, nil)
	text := func(s string) *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
	}
	mcp.AddTool(s, &mcp.Tool{Name: "whoami"}, func(_ context.Context, req *mcp.CallToolRequest, _ noteArgs) (*mcp.CallToolResult, any, error) {
		return text(req.Session.ID()), nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "remember"}, func(_ context.Context, req *mcp.CallToolRequest, a noteArgs) (*mcp.CallToolResult, any, error) {
		u.mu.Lock()
		defer u.mu.Unlock()
		u.notes[req.Session.ID()] = a.Text
		return text("ok"), nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "recall"}, func(_ context.Context, req *mcp.CallToolRequest, _ noteArgs) (*mcp.CallToolResult, any, error) {
		u.mu.Lock()
		defer u.mu.Unlock()
		return text("note:" + u.notes[req.Session.ID()]), nil, nil
	})
	sdk := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
	u.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sdk.ServeHTTP(w, r)
		if r.Method == http.MethodDelete {
			u.closed <- r.Header.Get("Mcp-Session-Id")
		}
	}))
	t.Cleanup(u.srv.Close)
	return u
}

// awaitClosed waits until the upstream session id was deleted.
func (u *sessionUpstream) awaitClosed(t testing.TB, id string) {
	t.Helper()
	timeout := time.After(5 * time.Second)
	for {
		select {
		case got := <-u.closed:
			if got == id {
				return
			}
		case <-timeout:
			t.Fatalf("upstream session %s was not closed", id)
		}
	}
}

// callText calls tool on cs and returns the text of its result. A progress
// token sends the call through the SDK's server rather than the direct path.
func callText(t testing.TB, cs *mcp.ClientSession, tool, text string, progressToken any) string {
	t.Helper()
	params := &mcp.CallToolParams{Name: tool, Arguments: noteArgs{Text: text}}
	if progressToken != nil {
		params.SetProgressToken(progressToken)
	}
	res, err := cs.CallTool(context.Background(), params)
	if err != nil || res.IsError || len(res.Content) != 1 {
		t.Fatalf("%s: %+v, %v", tool, res, err)
	}
	return res.Content[0].(*mcp.TextContent).Text
}

// Two sessions of the same agent on the MCP endpoint never share an
// upstream session: what one sets upstream the other does not see, by
// either of the endpoint's call paths, and closing one closes its upstream
// session only.
func TestEndpointSessionsDoNotShareUpstreamState(t *testing.T) {
	t.Parallel()
	up := newSessionUpstream(t)
	e := newEnv(t, mcpproxy.Config{}, mcpproxy.Connection{BaseURL: up.srv.URL})
	first := e.mustConnect(t, alice, nil)
	second := e.mustConnect(t, alice, nil)

	upFirst := callText(t, first, "whoami", "", nil)
	upSecond := callText(t, second, "whoami", "", nil)
	if upFirst == "" || upSecond == "" || upFirst == upSecond {
		t.Fatalf("upstream sessions: first %q, second %q", upFirst, upSecond)
	}
	if got := callText(t, first, "whoami", "", "through-the-sdk"); got != upFirst {
		t.Errorf("the SDK path of the first session used upstream session %q, want %q", got, upFirst)
	}
	callText(t, first, "remember", "first's note", nil)
	if got := callText(t, second, "recall", "", nil); got != "note:" {
		t.Errorf("second session recalls %q, set by the first session", got)
	}
	if got := callText(t, second, "recall", "", "through-the-sdk"); got != "note:" {
		t.Errorf("second session recalls %q through the SDK path", got)
	}
	if got := callText(t, first, "recall", "", nil); got != "note:first's note" {
		t.Errorf("first session recalls %q", got)
	}
	// The REST route uses neither.
	r := e.call("s", "whoami", `{}`)
	wantStatus(t, r, http.StatusOK, "")
	if strings.Contains(r.raw, upFirst) || strings.Contains(r.raw, upSecond) {
		t.Errorf("the REST route used an agent session's upstream session: %s", r.raw)
	}

	if err := first.Close(); err != nil { // DELETE
		t.Fatal(err)
	}
	up.awaitClosed(t, upFirst)
	if got := callText(t, second, "whoami", "", nil); got != upSecond {
		t.Errorf("second session after the first closed: upstream session %q, want %q", got, upSecond)
	}

	// An idle timeout closes the upstream session too. It is long enough
	// for the handshake and one call to fit under the race detector on a
	// loaded machine (50 ms expired the session mid-handshake in CI).
	e = newEnv(t, mcpproxy.Config{Options: mcpproxy.Options{SessionIdleTimeout: time.Second}}, mcpproxy.Connection{BaseURL: up.srv.URL})
	idle := e.mustConnect(t, alice, nil)
	up.awaitClosed(t, callText(t, idle, "whoami", "", nil))
}

// openRaw opens a session as w with a bare initialize and returns its id.
func openRaw(t testing.TB, e *env, w who) response {
	t.Helper()
	return e.raw(t, w, "POST", "mcp1", "", initialize)
}

func mustOpenRaw(t testing.TB, e *env, w who) string {
	t.Helper()
	r := openRaw(t, e, w)
	if r.status != http.StatusOK || r.header.Get("Mcp-Session-Id") == "" {
		t.Fatalf("initialize as %v: %d %s", w, r.status, r.raw)
	}
	return r.header.Get("Mcp-Session-Id")
}

const listTools = `{"jsonrpc":"2.0","id":7,"method":"tools/list"}`

// alive reports whether session sid of w still answers.
func alive(t testing.TB, e *env, w who, sid string) bool {
	t.Helper()
	r := e.raw(t, w, "POST", "mcp1", sid, listTools)
	switch {
	case r.status == http.StatusOK:
		return true
	case r.status == http.StatusNotFound && r.body["code"] == "MCP_SESSION_NOT_FOUND":
		return false
	}
	t.Fatalf("session %s: %d %s", sid, r.status, r.raw)
	return false
}

// One key opening sessions past its share evicts its own least recently
// used one, closing its upstream session; other callers' sessions keep
// working and theirs still open.
func TestEndpointSessionFloodEvictsOnlyTheFloodersSessions(t *testing.T) {
	t.Parallel()
	up := newSessionUpstream(t)
	e := newEnv(t, mcpproxy.Config{Options: mcpproxy.Options{MaxSessions: 6, MaxSessionsPerKey: 2, MaxSessionsPerNamespace: 4}}, mcpproxy.Connection{BaseURL: up.srv.URL})
	mallory := who{"mallory", "agent", "key-m"}
	victim := e.mustConnect(t, bob, nil)
	victimUp := callText(t, victim, "whoami", "", nil)

	m1 := e.mustConnect(t, mallory, nil)
	m2 := e.mustConnect(t, mallory, nil)
	callText(t, m2, "whoami", "", nil)
	m1Up := callText(t, m1, "whoami", "", nil) // m2 is now the least recently used
	m2Up := callText(t, m2, "whoami", "", nil)
	callText(t, m1, "whoami", "", nil)
	m3 := e.mustConnect(t, mallory, nil)

	if alive(t, e, mallory, m2.ID()) {
		t.Error("the least recently used session of the key survived a session past its share")
	}
	up.awaitClosed(t, m2Up)
	if got := callText(t, m1, "whoami", "", nil); got != m1Up {
		t.Errorf("mallory's recently used session lost its upstream session: %q, want %q", got, m1Up)
	}
	callText(t, m3, "whoami", "", nil)

	// A flood from the key, in parallel, while the victim keeps working.
	var wg sync.WaitGroup
	failures := make(chan string, 100)
	for range 50 {
		wg.Go(func() {
			if r := openRaw(t, e, mallory); r.status != http.StatusOK {
				failures <- fmt.Sprintf("flood initialize: %d %s", r.status, r.raw)
			}
		})
	}
	for range 20 {
		if got := callText(t, victim, "whoami", "", nil); got != victimUp {
			t.Errorf("victim's upstream session changed to %q during the flood", got)
		}
	}
	wg.Wait()
	close(failures)
	for f := range failures {
		t.Error(f)
	}
	awaitSessions(t, e, 3)
	if got := counterValue(t, e, "idn_gateway_mcp_sessions_evicted_total"); got != 51 {
		t.Errorf("evictions = %v, want 51", got)
	}
	if got := callText(t, victim, "whoami", "", nil); got != victimUp {
		t.Errorf("victim after the flood: upstream session %q, want %q", got, victimUp)
	}
	e.mustConnect(t, who{"carol", "agent", "key-c"}, nil)
}

// The namespace share and the pool follow the same rule: the caller's own
// namespace pays for a session past them, and only a caller whose
// namespace holds no session meets a full pool.
func TestEndpointSessionSharesOfNamespaceAndPool(t *testing.T) {
	t.Parallel()
	e := newEnv(t, mcpproxy.Config{Options: mcpproxy.Options{MaxSessions: 5, MaxSessionsPerKey: 2, MaxSessionsPerNamespace: 3}}, mcpproxy.Connection{})
	k1, k2 := who{"mallory", "agent", "key-1"}, who{"mallory", "agent", "key-2"}
	s1 := mustOpenRaw(t, e, k1)
	mustOpenRaw(t, e, k1)
	mustOpenRaw(t, e, k2)
	mustOpenRaw(t, e, k2) // the namespace's fourth: its least recently used goes
	if alive(t, e, k1, s1) {
		t.Error("namespace share: the namespace's least recently used session survived")
	}
	awaitSessions(t, e, 3)

	b1 := mustOpenRaw(t, e, who{"bob", "agent", "key-1"})
	mustOpenRaw(t, e, who{"bob", "agent", "key-2"}) // the pool is full
	carol := who{"carol", "agent", "key-c"}
	r := openRaw(t, e, carol)
	if r.status != http.StatusServiceUnavailable || r.body["code"] != "MCP_SESSIONS_EXHAUSTED" || r.header.Get("Retry-After") == "" {
		t.Fatalf("full pool, caller without a session: %d %s", r.status, r.raw)
	}
	mustOpenRaw(t, e, who{"bob", "agent", "key-3"}) // within its shares: bob's own least recently used goes
	if alive(t, e, who{"bob", "agent", "key-1"}, b1) {
		t.Error("full pool: the namespace's least recently used session survived")
	}
	awaitSessions(t, e, 5)
}

func counterValue(t testing.TB, e *env, name string) float64 {
	t.Helper()
	mfs, err := e.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	return -1
}
