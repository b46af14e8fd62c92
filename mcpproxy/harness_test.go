package mcpproxy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idnhq/idn/mcpevent"
	"github.com/idnhq/idn/mcpproxy"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// session2025 has the SDK's client open a 2025-11-25 session: the tests
// of sessions hold them to what a session does; stateless_test.go holds
// the stateless revision.
var session2025 = &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"}

type echoArgs struct {
	Text  string `json:"text" jsonschema:"text to echo"`
	Count int    `json:"count,omitempty"`
}

// newMCPServer is a real go-sdk MCP server with a few tools.
func newMCPServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "test-upstream", Version: "1.2.3"}, nil)
	echo := func(_ context.Context, _ *mcp.CallToolRequest, a echoArgs) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Repeat(a.Text, max(a.Count, 1))}}}, nil, nil
	}
	for _, name := range []string{"a.echo", "a.other", "b.x", "b.y", "c.z"} {
		mcp.AddTool(s, &mcp.Tool{Name: name, Description: "echoes text"}, echo)
	}
	mcp.AddTool(s, &mcp.Tool{Name: "a.fail", Description: "always fails"}, func(context.Context, *mcp.CallToolRequest, echoArgs) (*mcp.CallToolResult, any, error) {
		return nil, nil, errors.New("tool exploded")
	})
	return s
}

// upstream serves newMCPServer through httptest with a middleware that
// counts JSON-RPC methods and can inject failures, holds and restarts.
type upstream struct {
	t       testing.TB
	srv     *httptest.Server
	handler atomic.Pointer[http.Handler]

	mu        sync.Mutex
	counts    map[string]int
	script    map[string][]int         // method → statuses to answer first
	holds     map[string]chan struct{} // method → released when closed
	entered   map[string]chan struct{} // method → signalled when a held request arrives
	abandoned map[string]chan struct{} // method → signalled when the client gives up on a held request
	down      bool                     // answer everything 500
	lostBody  string                   // when set, a forgotten session is 400 with this body, not 404
	seen      []http.Header            // request headers, for credential checks
}

func newUpstream(t testing.TB) *upstream {
	u := &upstream{t: t, counts: map[string]int{}, script: map[string][]int{}, holds: map[string]chan struct{}{}, entered: map[string]chan struct{}{}, abandoned: map[string]chan struct{}{}}
	u.restart()
	u.srv = httptest.NewServer(http.HandlerFunc(u.serve))
	t.Cleanup(u.srv.Close)
	return u
}

// restart replaces the MCP handler: the server forgets every session.
func (u *upstream) restart() {
	s := newMCPServer()
	var h http.Handler = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
	u.handler.Store(&h)
}

func (u *upstream) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	var msg struct {
		Method string `json:"method"`
	}
	_ = json.Unmarshal(body, &msg)
	method := msg.Method
	if method == "" {
		method = r.Method
	}
	u.mu.Lock()
	u.counts[method]++
	u.seen = append(u.seen, r.Header.Clone())
	down := u.down
	status := 0
	if q := u.script[method]; len(q) > 0 {
		status, u.script[method] = q[0], q[1:]
	}
	hold, entered, abandoned := u.holds[method], u.entered[method], u.abandoned[method]
	lostBody := u.lostBody
	u.mu.Unlock()
	if lostBody != "" && r.Header.Get("Mcp-Session-Id") != "" {
		w = &lostSessionWriter{ResponseWriter: w, body: lostBody}
	}
	if down {
		http.Error(w, "upstream down", http.StatusInternalServerError)
		return
	}
	if status != 0 {
		http.Error(w, http.StatusText(status), status)
		return
	}
	if hold != nil {
		if entered != nil {
			entered <- struct{}{}
		}
		select {
		case <-hold:
		case <-r.Context().Done():
			abandoned <- struct{}{}
			return
		}
	}
	(*u.handler.Load()).ServeHTTP(w, r)
}

// answerLostSessionWith400 makes the server answer a session id it does not
// know with 400 and body, as servers built on the TypeScript and Python SDK
// examples do, instead of the specified 404.
func (u *upstream) answerLostSessionWith400(body string) {
	u.mu.Lock()
	u.lostBody = body
	u.mu.Unlock()
}

// lostSessionWriter rewrites the go-sdk handler's 404 for an unknown
// session into a 400 with its own body.
type lostSessionWriter struct {
	http.ResponseWriter
	body     string
	replaced bool
}

func (w *lostSessionWriter) WriteHeader(code int) {
	if code != http.StatusNotFound {
		w.ResponseWriter.WriteHeader(code)
		return
	}
	w.replaced = true
	if strings.HasPrefix(w.body, "{") {
		w.Header().Set("Content-Type", "application/json")
	}
	w.ResponseWriter.WriteHeader(http.StatusBadRequest)
	_, _ = io.WriteString(w.ResponseWriter, w.body)
}

func (w *lostSessionWriter) Write(b []byte) (int, error) {
	if w.replaced {
		return len(b), nil
	}
	return w.ResponseWriter.Write(b)
}

func (w *lostSessionWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (u *upstream) count(method string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.counts[method]
}

func (u *upstream) fail(method string, statuses ...int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.script[method] = append(u.script[method], statuses...)
}

// hold makes requests for method wait until the returned release is called;
// entered receives one value per held request, abandoned one per held
// request whose client gave up.
func (u *upstream) hold(method string) (entered, abandoned <-chan struct{}, release func()) {
	ch, ent, ab := make(chan struct{}), make(chan struct{}, 64), make(chan struct{}, 64)
	u.mu.Lock()
	u.holds[method], u.entered[method], u.abandoned[method] = ch, ent, ab
	u.mu.Unlock()
	var once sync.Once
	return ent, ab, func() {
		once.Do(func() {
			u.mu.Lock()
			delete(u.holds, method)
			u.mu.Unlock()
			close(ch)
		})
	}
}

func (u *upstream) setDown(down bool) {
	u.mu.Lock()
	u.down = down
	u.mu.Unlock()
}

// clock is a settable time source.
type clock struct{ ns atomic.Int64 }

func newClock() *clock {
	c := &clock{}
	c.ns.Store(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC).UnixNano())
	return c
}
func (c *clock) now() time.Time          { return time.Unix(0, c.ns.Load()).UTC() }
func (c *clock) advance(d time.Duration) { c.ns.Add(int64(d)) }

// sources is a ConnectionSource over a map.
type sources struct {
	mu    sync.Mutex
	conns map[string]*mcpproxy.Connection
}

func (s *sources) MCPConnection(_ context.Context, id string) (*mcpproxy.Connection, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.conns[id]
	if !ok {
		return nil, mcpproxy.ErrConnectionNotFound
	}
	cp := *c
	return &cp, nil
}

func (s *sources) set(c *mcpproxy.Connection) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.conns[c.ID] = c
}

// env is a Proxy mounted on an httptest server, in front of an upstream.
type env struct {
	t     testing.TB
	up    *upstream
	clock *clock
	reg   *prometheus.Registry
	src   *sources
	proxy *mcpproxy.Proxy
	srv   *httptest.Server
}

// newEnv builds an env; conn gets ID "mcp1" and the upstream's URL when
// unset. The caller hook reads X-Test-Namespace, X-Test-Subject and
// X-Test-Key, as the gateway's pipeline would read its verified identity.
func newEnv(t testing.TB, cfg mcpproxy.Config, conn mcpproxy.Connection) *env {
	e := &env{t: t, up: newUpstream(t), clock: newClock(), reg: prometheus.NewRegistry(), src: &sources{conns: map[string]*mcpproxy.Connection{}}}
	if conn.ID == "" {
		conn.ID = "mcp1"
	}
	if conn.BaseURL == "" {
		conn.BaseURL = e.up.srv.URL
	}
	e.src.set(&conn)
	cfg.Connections = e.src
	cfg.Caller = func(r *http.Request) (mcpevent.Caller, error) {
		return mcpevent.Caller{Namespace: r.Header.Get("X-Test-Namespace"), Subject: r.Header.Get("X-Test-Subject"), Key: r.Header.Get("X-Test-Key")}, nil
	}
	cfg.Registerer = e.reg
	if cfg.Clock == nil {
		cfg.Clock = e.clock.now
	}
	if cfg.RetryBaseDelay == 0 {
		cfg.RetryBaseDelay = time.Millisecond
	}
	p, err := mcpproxy.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.proxy = p
	e.srv = httptest.NewServer(p.Handler())
	t.Cleanup(func() {
		e.srv.Close()
		_ = p.Close()
	})
	return e
}

type response struct {
	status int
	header http.Header
	body   map[string]any
	raw    string
}

func (e *env) do(method, path, subject, body string) response {
	e.t.Helper()
	req, err := http.NewRequest(method, e.srv.URL+path, strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("X-Test-Namespace", "ns1")
	req.Header.Set("X-Test-Subject", subject)
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	out := response{status: resp.StatusCode, header: resp.Header, raw: string(raw)}
	_ = json.Unmarshal(raw, &out.body)
	return out
}

func (e *env) call(subject, tool, args string) response {
	e.t.Helper()
	return e.do(http.MethodPost, "/mcp/mcp1/tools/"+tool+"/call", subject, args)
}

func (e *env) metric(name, result string) float64 {
	e.t.Helper()
	mfs, err := e.reg.Gather()
	if err != nil {
		e.t.Fatal(err)
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if labelIs(m, "result", result) {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

// series counts the series of metric name whose label is value.
func (e *env) series(name, label, value string) int {
	e.t.Helper()
	mfs, err := e.reg.Gather()
	if err != nil {
		e.t.Fatal(err)
	}
	n := 0
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				if labelIs(m, label, value) {
					n++
				}
			}
		}
	}
	return n
}

func labelIs(m *dto.Metric, name, value string) bool {
	for _, l := range m.GetLabel() {
		if l.GetName() == name && l.GetValue() == value {
			return true
		}
	}
	return false
}

func wantStatus(t testing.TB, r response, status int, code string) {
	t.Helper()
	if r.status != status {
		t.Fatalf("status = %d, want %d; body %s", r.status, status, r.raw)
	}
	if code != "" && r.body["code"] != code {
		t.Fatalf("code = %v, want %s; body %s", r.body["code"], code, r.raw)
	}
}

func toolNames(r response) []string {
	var names []string
	tools, _ := r.body["tools"].([]any)
	for _, t := range tools {
		names = append(names, t.(map[string]any)["name"].(string))
	}
	return names
}
