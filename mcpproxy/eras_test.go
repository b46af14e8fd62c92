package mcpproxy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/idnhq/idn/internal/mcpconversation"
	"github.com/idnhq/idn/mcpproxy"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// eraServer is askingServer served in one era, its requests seen.
type eraServer struct {
	url string

	mu   sync.Mutex
	seen []string // each request's method, "+session" when it named one
}

// The three eras of server the gateway meets.
const (
	sessionsOnly = "a 2025-11-25 server"
	bothEras     = "a server of both eras"
	statelessOne = "a 2026-07-28 server"
)

func newEraServer(t testing.TB, kind string) *eraServer {
	var versions []string
	if kind == statelessOne {
		versions = []string{"2026-07-28"}
	}
	s := askingServerOf(versions)
	opts := &mcp.StreamableHTTPOptions{Stateless: kind != sessionsOnly}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, opts)
	es := &eraServer{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var msg struct {
			Method string `json:"method"`
		}
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(strings.NewReader(string(body)))
		_ = json.Unmarshal(body, &msg)
		m := r.Method + " " + msg.Method
		if r.Header.Get("Mcp-Session-Id") != "" {
			m += " +session"
		}
		es.mu.Lock()
		es.seen = append(es.seen, m)
		es.mu.Unlock()
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	es.url = srv.URL
	return es
}

// sessions reports whether any request the server saw opened or named a
// session.
func (es *eraServer) sessions() []string {
	es.mu.Lock()
	defer es.mu.Unlock()
	var out []string
	for _, m := range es.seen {
		if strings.HasSuffix(m, "+session") || strings.HasSuffix(m, " initialize") {
			out = append(out, m)
		}
	}
	return out
}

// count is how many requests the server saw as m.
func (es *eraServer) count(m string) int {
	es.mu.Lock()
	defer es.mu.Unlock()
	n := 0
	for _, s := range es.seen {
		if s == m {
			n++
		}
	}
	return n
}

// eraConversation holds the go-sdk client's conversation with endpoint
// as w, asking for version ("" for the SDK's newest), and returns what
// it got: the listing, a call, a call whose server asks the agent, a
// call's progress, prompts and resources, and the server's capabilities.
func eraConversation(t *testing.T, endpoint string, w who, version string) []any {
	t.Helper()
	var asked []string
	var mu sync.Mutex
	var progress []string
	client := mcp.NewClient(&mcp.Implementation{Name: "test-agent", Version: "1"}, &mcp.ClientOptions{
		ElicitationHandler: func(_ context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			asked = append(asked, r.Params.Message)
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"ok": true}}, nil
		},
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
			mu.Lock()
			progress = append(progress, fmt.Sprintf("%v %v/%v %s", r.Params.ProgressToken, r.Params.Progress, r.Params.Total, r.Params.Message))
			mu.Unlock()
		},
	})
	var opts *mcp.ClientSessionOptions
	if version != "" {
		opts = &mcp.ClientSessionOptions{ProtocolVersion: version}
	}
	cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{
		Endpoint: endpoint, HTTPClient: &http.Client{Transport: identityTransport{w}}, MaxRetries: -1,
	}, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	ctx := context.Background()
	got := []any{cs.InitializeResult().ProtocolVersion}
	list, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, list.Tools)
	for _, c := range []struct{ tool, text string }{{"echo", "hi"}, {"confirm", "the report"}} {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: c.tool, Arguments: map[string]any{"text": c.text}})
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, res.Content, res.IsError)
	}
	counted := &mcp.CallToolParams{Name: "count", Arguments: map[string]any{}}
	counted.SetProgressToken("p1")
	res, err := cs.CallTool(ctx, counted)
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, res.Content)
	prompts, err := cs.ListPrompts(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	prompt, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "greet", Arguments: map[string]string{"who": "alice"}})
	if err != nil {
		t.Fatal(err)
	}
	resources, err := cs.ListResources(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	read, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "file:///readme"})
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	return append(got, prompts.Prompts, prompt.Messages, resources.Resources, read.Contents, cs.InitializeResult().Capabilities, asked, progress)
}

// A client of the stateless revision (the go-sdk's and the TypeScript
// SDK v2's) holds the same conversation with a server of each era through
// the gateway as with a server of both eras directly, message by message;
// a server that offers the stateless revision is spoken to statelessly,
// with no session opened upstream.
func TestStatelessClientsReachEveryEra(t *testing.T) {
	t.Parallel()
	direct := newEraServer(t, bothEras)
	wantGo := eraConversation(t, direct.url, alice, "")
	if p := wantGo[len(wantGo)-1].([]string); len(p) != 2 {
		t.Fatalf("the direct conversation saw progress %q, want 2 steps", p)
	}
	wantTS := mcpconversation.Stateless(t, direct.url)
	for _, kind := range []string{sessionsOnly, bothEras, statelessOne} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			up := newEraServer(t, kind)
			e := newEnv(t, mcpproxy.Config{}, mcpproxy.Connection{BaseURL: up.url, ExposeResources: true, ExposePrompts: true})
			if diff := gocmp.Diff(wantGo, eraConversation(t, e.srv.URL+"/mcp/mcp1", alice, "")); diff != "" {
				t.Errorf("the go-sdk client through the gateway (-direct +gateway):\n%s", diff)
			}
			gotTS := mcpconversation.Stateless(t, e.srv.URL+"/mcp/mcp1", "X-Test-Namespace=alice", "X-Test-Subject=agent", "X-Test-Key=key-a")
			if diff := gocmp.Diff(documented(wantTS), documented(gotTS)); diff != "" {
				t.Errorf("the TypeScript SDK v2 client through the gateway (-direct +gateway):\n%s", diff)
			}
			if kind != sessionsOnly {
				if s := up.sessions(); len(s) > 0 {
					t.Errorf("the upstream saw %q, want no session", s)
				}
				// A lane has no one to tell what the server says outside
				// a call: it holds no stream open for it.
				if n := up.count("POST subscriptions/listen"); n > 0 {
					t.Errorf("the upstream saw %d subscriptions/listen, want none", n)
				}
			}
		})
	}
}

// A client of 2025-11-25 reaches a server of the stateless revision alone
// through the gateway, and holds the conversation it holds with the same
// server in sessions directly (a stateless handler knows nothing of a
// 2025-11-25 client's capabilities, so it cannot ask it): the server's questions within a call reach it
// as requests on its session, its answers go back in the next round.
func TestSessionClientReachesAStatelessServer(t *testing.T) {
	t.Parallel()
	direct := newEraServer(t, sessionsOnly)
	want := eraConversation(t, direct.url, alice, "2025-11-25")
	if p := want[len(want)-1].([]string); len(p) != 2 {
		t.Fatalf("the direct conversation saw progress %q, want 2 steps", p)
	}
	up := newEraServer(t, statelessOne)
	e := newEnv(t, mcpproxy.Config{}, mcpproxy.Connection{BaseURL: up.url, ExposeResources: true, ExposePrompts: true})
	for range 2 {
		got := eraConversation(t, e.srv.URL+"/mcp/mcp1", alice, "2025-11-25")
		if diff := gocmp.Diff(want, got); diff != "" {
			t.Errorf("through the gateway (-direct +gateway):\n%s", diff)
		}
	}
	// The server refused the first session's version once; the gateway
	// remembers it, and the second session asked for its own at once.
	if refused := up.count("POST initialize"); refused > 1 {
		t.Errorf("the upstream saw %d initialize requests, want at most 1 (the era is remembered)", refused)
	}
}

// The REST routes reach a server of the stateless revision statelessly:
// discovery, calls (one with an argument in a header), and the admin
// test, with no session upstream.
func TestRESTRoutesReachAStatelessServer(t *testing.T) {
	t.Parallel()
	up := newEraServer(t, statelessOne)
	e := newEnv(t, mcpproxy.Config{}, mcpproxy.Connection{BaseURL: up.url})
	r := e.call("agent", "echo", `{"text":"hi"}`)
	wantStatus(t, r, http.StatusOK, "")
	if !strings.Contains(r.raw, `"text":"hi"`) {
		t.Errorf("call answered %s", r.raw)
	}
	// The server refuses a call without the header its tool asks for.
	r = e.call("agent", "routed", `{"region":"eu-west é"}`)
	wantStatus(t, r, http.StatusOK, "")
	if !strings.Contains(r.raw, `"text":"eu-west é"`) {
		t.Errorf("call answered %s", r.raw)
	}
	hs, err := e.proxy.Probe(context.Background(), e.src.conns["mcp1"])
	if err != nil || hs.ProtocolVersion != "2026-07-28" || hs.Tools != 4 {
		t.Errorf("probe = %+v, %v; want the stateless revision and 4 tools", hs, err)
	}
	if s := up.sessions(); len(s) > 0 {
		t.Errorf("the upstream saw %q, want no session", s)
	}
}

// A stateless agent's call to a stateless server holds nothing on the
// gateway: the server's round reaches the agent with its state sealed to
// the caller and tool, and the retry finds the call even after the lane
// that started it was evicted. A sealed state opens for its caller and
// tool alone: rows named for the attack.
func TestStatelessServerRoundsPassThrough(t *testing.T) {
	t.Parallel()
	up := newEraServer(t, statelessOne)
	e := newEnv(t, mcpproxy.Config{Options: mcpproxy.Options{MaxSessionsPerKey: 1}}, mcpproxy.Connection{BaseURL: up.url})
	meta := func(caps string) string {
		return `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":` + caps + `}`
	}
	elicit := meta(`{"elicitation":{}}`)
	if res := e.rawStateless(t, alice, `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{`+elicit+`}}`); res["supportedVersions"] == nil {
		t.Fatalf("server/discover: %v", res)
	}
	first := e.rawStateless(t, alice, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"confirm","arguments":{"text":"x"},`+elicit+`}}`)
	state, _ := first["requestState"].(string)
	if first["resultType"] != "input_required" || state == "" {
		t.Fatalf("first round: %v, want input_required with a requestState", first)
	}
	// Another declaration opens another lane, which evicts the first.
	if res := e.rawStateless(t, alice, `{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{`+meta(`{}`)+`}}`); res["tools"] == nil {
		t.Fatalf("tools/list: %v", res)
	}
	retry := func(w who, tool, state string) map[string]any {
		return e.rawStateless(t, w, `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"`+tool+`","arguments":{"text":"x"},"requestState":"`+state+`","inputResponses":{"confirm":{"action":"accept","content":{"ok":true}}},`+elicit+`}}`)
	}
	for _, tt := range []struct {
		name, tool, state string
		w                 who
	}{
		{"another caller's state", "confirm", state, bob},
		{"the state for another tool", "echo", state, alice},
		{"an altered state", "confirm", state + "x", alice},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if res := retry(tt.w, tt.tool, tt.state); res["error"] == nil {
				t.Errorf("retry answered %v, want an error", res)
			}
		})
	}
	done := retry(alice, "confirm", state)
	content, _ := done["content"].([]any)
	if done["resultType"] != "complete" || len(content) != 1 || !strings.Contains(jsonOf(t, content), `accept {\"ok\":true}`) {
		t.Fatalf("the caller's own retry: %v, want the complete result", done)
	}
}

// A connection whose endpoint moves forgets its server's era: a session
// of 2025-06-18 asks the new server for its own version, though the old
// server refused every version but 2026-07-28.
func TestMovedEndpointForgetsTheEra(t *testing.T) {
	t.Parallel()
	old, moved := newEraServer(t, statelessOne), newEraServer(t, sessionsOnly)
	conn := mcpproxy.Connection{ID: "mcp1", BaseURL: old.url}
	e := newEnv(t, mcpproxy.Config{}, conn)
	call := func() {
		t.Helper()
		cs := e.mustConnect(t, alice, &mcp.ClientOptions{})
		if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "x"}}); err != nil {
			t.Fatal(err)
		}
		_ = cs.Close()
	}
	call()
	conn.BaseURL = moved.url
	e.src.set(&conn)
	call()
	if n := moved.count("POST server/discover"); n > 0 || moved.count("POST initialize") == 0 {
		t.Errorf("the new server saw %q, want the session's own initialize and no server/discover", moved.seen)
	}
}

// Replicas given one StateKey continue each other's calls: a round that
// one gateway passed to the agent is finished by another, as a retry
// behind a load balancer is. A gateway of another key refuses the state.
func TestStatelessRoundContinuesOnAnotherReplica(t *testing.T) {
	t.Parallel()
	up := newEraServer(t, statelessOne)
	key := []byte("a fleet's shared key, 32 bytes!!")
	conn := mcpproxy.Connection{BaseURL: up.url}
	a := newEnv(t, mcpproxy.Config{StateKey: key}, conn)
	b := newEnv(t, mcpproxy.Config{StateKey: key}, conn)
	other := newEnv(t, mcpproxy.Config{StateKey: []byte("another fleet's key, 32 bytes!!!")}, conn)
	elicit := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}}`
	first := a.rawStateless(t, alice, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"confirm","arguments":{"text":"x"},`+elicit+`}}`)
	state, _ := first["requestState"].(string)
	if first["resultType"] != "input_required" || state == "" {
		t.Fatalf("first round on a: %v, want input_required with a requestState", first)
	}
	retry := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"confirm","arguments":{"text":"x"},"requestState":"` + state +
		`","inputResponses":{"confirm":{"action":"accept","content":{"ok":true}}},` + elicit + `}}`
	if res := other.rawStateless(t, alice, retry); res["error"] == nil {
		t.Errorf("a gateway of another key answered %v, want an error", res)
	}
	if done := b.rawStateless(t, alice, retry); done["resultType"] != "complete" {
		t.Fatalf("the retry on b: %v, want the complete result", done)
	}
}
