package mcpproxy_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idnhq/idn/mcpproxy"
)

// hostileUpstream is an MCP server (2025-11-25) that writes n requests of
// method on the event stream of every session it opens (or, onCall, of
// every call of its tool "flood"), then a notification the agent sees (so
// a test knows the gateway read them all), and holds every answer the
// gateway posts unanswered for as long as the gateway waits.
type hostileUpstream struct {
	srv    *httptest.Server
	method string
	n      int
	onCall bool
	onList bool // the flood comes on the stream of each tools/list, which starts it
	listed sync.Once

	held    atomic.Int64  // answers being held
	answers atomic.Int64  // answers received
	start   chan struct{} // closed when the flood may start
	gone    chan struct{} // closed as the test ends: nothing is held longer
}

func newHostileUpstream(t testing.TB, method string, n int) *hostileUpstream {
	h := &hostileUpstream{method: method, n: n, start: make(chan struct{}), gone: make(chan struct{})}
	h.srv = httptest.NewServer(http.HandlerFunc(h.serve))
	t.Cleanup(h.srv.Close)
	return h
}

func (h *hostileUpstream) serve(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet:
		if !h.onCall {
			h.flood(w, r, `{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`)
			return
		}
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	case http.MethodDelete:
		w.WriteHeader(http.StatusNoContent)
		return
	}
	var msg wireMessage
	if json.NewDecoder(r.Body).Decode(&msg) != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	if msg.Method == "tools/call" && h.onCall {
		var p struct {
			Meta struct {
				ProgressToken json.RawMessage `json:"progressToken"`
			} `json:"_meta"`
		}
		_ = json.Unmarshal(msg.Params, &p)
		h.flood(w, r, fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":%s,"progress":1}}`, p.Meta.ProgressToken))
		return
	}
	switch {
	case msg.Method == "":
		h.answers.Add(1)
		h.held.Add(1)
		select {
		case <-r.Context().Done():
		case <-h.gone:
		}
		h.held.Add(-1)
		return
	case msg.ID == nil:
		w.WriteHeader(http.StatusAccepted)
		return
	}
	if msg.Method == "tools/list" && h.onList {
		h.listed.Do(func() { close(h.start) })
		h.flood(w, r, fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"tools":[]}}`, msg.ID))
		return
	}
	var result any = map[string]any{}
	switch msg.Method {
	case "initialize":
		w.Header().Set("Mcp-Session-Id", "hostile-1")
		result = map[string]any{"protocolVersion": "2025-11-25", "serverInfo": map[string]any{"name": "hostile", "version": "1"},
			"capabilities": map[string]any{"tools": map[string]any{"listChanged": true}}}
	case "tools/list":
		result = map[string]any{"tools": []any{map[string]any{"name": "flood", "inputSchema": map[string]any{"type": "object"}}}}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": msg.ID, "result": result})
}

// flood writes the requests on an event stream, then the notification
// last, and keeps the stream open.
func (h *hostileUpstream) flood(w http.ResponseWriter, r *http.Request, last string) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	_ = http.NewResponseController(w).Flush()
	select {
	case <-h.start:
	case <-r.Context().Done():
		return
	}
	bw := bufio.NewWriter(w)
	for i := range h.n {
		params := ""
		if h.method != "ping" {
			params = fmt.Sprintf(`,"params":{"taskId":"task-%d"}`, i)
		}
		fmt.Fprintf(bw, "data: {\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":%q%s}\n\n", i+1, h.method, params)
	}
	fmt.Fprintf(bw, "data: %s\n\n", last)
	_ = bw.Flush()
	_ = http.NewResponseController(w).Flush()
	select {
	case <-r.Context().Done():
	case <-h.gone:
	}
}

// usage is what the process holds: goroutines, open descriptors, memory
// in use (heap and goroutine stacks) and resident.
type usage struct {
	goroutines, fds int
	memory, rss     uint64
}

func (u usage) String() string {
	return fmt.Sprintf("%d goroutines, %d descriptors, %.1f MiB heap and stacks, %.1f MiB resident", u.goroutines, u.fds, float64(u.memory)/(1<<20), float64(u.rss)/(1<<20))
}

// measure returns what the process holds once idle connections are
// closed and the heap collected.
func measure(t testing.TB, clients ...*http.Client) usage {
	t.Helper()
	http.DefaultTransport.(*http.Transport).CloseIdleConnections()
	for _, c := range clients {
		c.CloseIdleConnections()
	}
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd to count descriptors: %v", err)
	}
	u := usage{goroutines: runtime.NumGoroutine(), fds: len(fds), memory: m.HeapInuse + m.StackInuse}
	if status, err := os.ReadFile("/proc/self/status"); err == nil {
		for line := range strings.Lines(string(status)) {
			if kb, ok := strings.CutPrefix(line, "VmRSS:"); ok {
				n, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(kb), " kB"), 10, 64)
				u.rss = n << 10
			}
		}
	}
	return u
}

// floodAgent is an agent session with its own event stream open, which
// reports the tools/list_changed notification the hostile server writes
// after its flood.
type floodAgent struct {
	a       *taskAgent
	changed chan struct{}
	stream  io.Closer
}

// openFloodAgent opens the session, then lets up start its flood: on the
// session's own stream, or on a call of "flood" it makes, whose progress
// ends the flood.
func openFloodAgent(t *testing.T, e *env, up *hostileUpstream, initialize string) *floodAgent {
	t.Helper()
	hc := &http.Client{Transport: identityTransport{alice}}
	a := &taskAgent{url: e.srv.URL + "/mcp/mcp1", hc: hc, name: "alice", kinds: map[string]string{}}
	r := a.exchange(t, http.MethodPost, initialize)
	if a.sid = r.header.Get("Mcp-Session-Id"); r.status != http.StatusOK || a.sid == "" {
		t.Fatalf("initialize: %d %s", r.status, r.raw)
	}
	if n := a.exchange(t, http.MethodPost, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); n.status != http.StatusAccepted {
		t.Fatalf("initialized: %d %s", n.status, n.raw)
	}
	resp, err := hc.Do(a.request(http.MethodGet, ""))
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET: %v %v", resp, err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	f := &floodAgent{a: a, changed: make(chan struct{}, 1), stream: resp.Body}
	close(up.start)
	told := func(raw string) {
		if strings.Contains(raw, "notifications/tools/list_changed") || strings.Contains(raw, "notifications/progress") {
			select {
			case f.changed <- struct{}{}:
			default:
			}
		}
	}
	go a.read(resp.Body, told)
	if up.onCall {
		call, err := hc.Do(a.request(http.MethodPost, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"flood","arguments":{},"_meta":{"progressToken":"p"}}}`))
		if err != nil || call.StatusCode != http.StatusOK {
			t.Fatalf("tools/call: %v %v", call, err)
		}
		t.Cleanup(func() { call.Body.Close() })
		go a.read(call.Body, told)
	}
	return f
}

// lockedBuffer is a log's output, written and read concurrently.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t testing.TB, within time.Duration, cond func() bool) bool {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
	return true
}

const initializePlain = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","clientInfo":{"name":"x","version":"1"},"capabilities":{}}}`

// A hostile upstream that floods one agent session's event stream with
// requests, and holds every answer the gateway posts, makes the gateway
// hold no more than a few dozen goroutines and descriptors and a few MiB
// for it; when the session ends (deleted, expired) or the answers pass
// their deadline, everything it held is let go.
func TestHostileUpstreamCannotExhaustTheGateway(t *testing.T) {
	if testing.Short() {
		t.Skip("floods the gateway with thousands of requests")
	}
	// What one flooded session may cost at most, whatever the flood's
	// size: the answers being posted, their connections (both ends are in
	// this process) and the session's own streams.
	const (
		maxGoroutines = 120
		maxFDs        = 60
		maxMemory     = 24 << 20
	)
	for _, tt := range []struct {
		name       string
		method     string
		n          int
		initialize string
		timeout    time.Duration
		end        func(t *testing.T, e *env, f *floodAgent, up *hostileUpstream)
	}{
		{"3,000 tasks/get on the stream of a session that declared tasks, then DELETE", "tasks/get", 3000, initializeClientTasks, 0, deleteSession},
		{"1,000 pings on the go-sdk path, then DELETE", "ping", 1000, initializePlain, 0, deleteSession},
		{"11,000 tasks/get, then DELETE", "tasks/get", 11000, initializeClientTasks, 0, deleteSession},
		{"3,000 tasks/get, answers held past the MCP timeout", "tasks/get", 3000, initializeClientTasks, time.Second, heldPastTimeout},
		{"1,000 pings, answers held past the MCP timeout", "ping", 1000, initializePlain, time.Second, heldPastTimeout},
		{"3,000 tasks/get, then the session expires", "tasks/get", 3000, initializeClientTasks, 0, expire},
		{"1,000 pings on a tools/call's stream (the fast path), answers held past the MCP timeout", "ping", 1000, initializePlain, 2 * time.Second, heldPastTimeout},
	} {
		t.Run(tt.name, func(t *testing.T) {
			up := newHostileUpstream(t, tt.method, tt.n)
			up.onCall = strings.Contains(tt.name, "tools/call")
			opts := mcpproxy.Options{Timeout: tt.timeout}
			if strings.Contains(tt.name, "expires") {
				opts.SessionIdleTimeout = 2 * time.Second
			}
			var logged lockedBuffer
			e := newEnv(t, mcpproxy.Config{Options: opts, Logger: slog.New(slog.NewTextHandler(&logged, nil))}, mcpproxy.Connection{BaseURL: up.srv.URL})
			// First of the cleanups: what the upstream holds is let go.
			t.Cleanup(func() { close(up.gone) })
			agentClient := &http.Client{Transport: identityTransport{alice}}
			before := measure(t, e.srv.Client(), agentClient)
			f := openFloodAgent(t, e, up, tt.initialize)
			within(t, f.changed, "notification written after the flood")
			eventually(t, 10*time.Second, func() bool { return up.answers.Load() > 0 })
			during := measure(t, e.srv.Client(), f.a.hc)
			t.Logf("before %v; during %v (%d answers posted, %d held)", before, during, up.answers.Load(), up.held.Load())
			if d := during.goroutines - before.goroutines; d > maxGoroutines {
				t.Errorf("the flooded session holds %d goroutines, want at most %d", d, maxGoroutines)
			}
			if d := during.fds - before.fds; d > maxFDs {
				t.Errorf("the flooded session holds %d descriptors, want at most %d", d, maxFDs)
			}
			if during.memory > before.memory && during.memory-before.memory > maxMemory {
				t.Errorf("the flooded session holds %.1f MiB of heap and stacks, want at most %d", float64(during.memory-before.memory)/(1<<20), maxMemory>>20)
			}
			// Most of the flood was dropped (the answers of a short MCP
			// timeout give their places back while it is read), and said so.
			if n := counter(t, e, "idn_gateway_mcp_server_requests_dropped_total"); n < float64(tt.n/2) {
				t.Errorf("idn_gateway_mcp_server_requests_dropped_total = %v of %d requests", n, tt.n)
			}
			// Logged once a minute, however many: the test's clock stands still.
			if n := strings.Count(logged.String(), "sent more requests than the gateway answers at once"); n != 1 {
				t.Errorf("the dropped requests were logged %d times, want once", n)
			}
			tt.end(t, e, f, up)
			f.stream.Close()
			var after usage
			if !eventually(t, 15*time.Second, func() bool {
				after = measure(t, e.srv.Client(), f.a.hc)
				return after.goroutines <= before.goroutines+10 && after.fds <= before.fds+4
			}) {
				t.Errorf("after the session ended the process holds %v, before it %v (%d answers still held)", after, before, up.held.Load())
			}
			t.Logf("after %v", after)
		})
	}
}

// deleteSession ends the agent's session with DELETE.
func deleteSession(t *testing.T, _ *env, f *floodAgent, _ *hostileUpstream) {
	t.Helper()
	if r := f.a.exchange(t, http.MethodDelete, ""); r.status != http.StatusNoContent && r.status != http.StatusOK {
		t.Fatalf("DELETE: %d %s", r.status, r.raw)
	}
}

// expire closes the agent's stream and awaits the session's idle end.
func expire(t *testing.T, e *env, f *floodAgent, _ *hostileUpstream) {
	t.Helper()
	f.stream.Close()
	if !eventually(t, 15*time.Second, func() bool { return gauge(t, e, "idn_gateway_mcp_sessions") == 0 }) {
		t.Fatal("the idle session did not end")
	}
}

// heldPastTimeout awaits the end of every answer the upstream holds, past
// the MCP timeout, while the session lives on; then deletes it.
func heldPastTimeout(t *testing.T, e *env, f *floodAgent, up *hostileUpstream) {
	t.Helper()
	if !eventually(t, 10*time.Second, func() bool { return up.held.Load() == 0 }) {
		t.Errorf("%d answers are still held past the MCP timeout", up.held.Load())
	}
	deleteSession(t, e, f, up)
}

// counter is the value of e's counter name, which has no labels.
func counter(t testing.TB, e *env, name string) float64 {
	t.Helper()
	mfs, err := e.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// gauge is the value of e's gauge name, which has no labels.
func gauge(t testing.TB, e *env, name string) float64 {
	t.Helper()
	mfs, err := e.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				return m.GetGauge().GetValue()
			}
		}
	}
	return 0
}

// A flood on the stream of the tools/list a connection test sends (a
// session of its own, read by the SDK's client) is let go when the test
// ends, long before the MCP timeout.
func TestHostileUpstreamCannotExhaustTheGatewayThroughAConnectionTest(t *testing.T) {
	if testing.Short() {
		t.Skip("floods the gateway with thousands of requests")
	}
	up := newHostileUpstream(t, "ping", 3000)
	up.onList = true
	conn := mcpproxy.Connection{BaseURL: up.srv.URL}
	e := newEnv(t, mcpproxy.Config{}, conn)
	t.Cleanup(func() { close(up.gone) })
	before := measure(t, e.srv.Client())
	conn.ID = "mcp1"
	if _, err := e.proxy.Probe(context.Background(), &conn); err != nil {
		t.Fatal(err)
	}
	var after usage
	if !eventually(t, 10*time.Second, func() bool {
		after = measure(t, e.srv.Client())
		return after.goroutines <= before.goroutines+10 && after.fds <= before.fds+4
	}) {
		t.Errorf("after the connection test the process holds %v, before it %v (%d answers held)", after, before, up.held.Load())
	}
}

// A flood on the stream of a tools/list the REST routes' discovery sends
// (the connection's shared upstream session, read by the SDK's client) is
// held to the same bounds, and let go past the MCP timeout.
func TestHostileUpstreamCannotExhaustTheGatewayThroughDiscovery(t *testing.T) {
	if testing.Short() {
		t.Skip("floods the gateway with thousands of requests")
	}
	up := newHostileUpstream(t, "ping", 3000)
	up.onList = true
	e := newEnv(t, mcpproxy.Config{Options: mcpproxy.Options{Timeout: 3 * time.Second}}, mcpproxy.Connection{BaseURL: up.srv.URL})
	t.Cleanup(func() { close(up.gone) })
	before := measure(t, e.srv.Client())
	if r := e.do(http.MethodGet, "/mcp/mcp1/tools", "agent", ""); r.status != http.StatusOK {
		t.Fatalf("tools: %d %s", r.status, r.raw)
	}
	eventually(t, 10*time.Second, func() bool { return up.answers.Load() > 0 })
	during := measure(t, e.srv.Client())
	t.Logf("before %v; during %v (%d answers posted, %d held)", before, during, up.answers.Load(), up.held.Load())
	if d := during.goroutines - before.goroutines; d > 120 {
		t.Errorf("the flooded discovery holds %d goroutines, want at most 120", d)
	}
	if d := during.fds - before.fds; d > 60 {
		t.Errorf("the flooded discovery holds %d descriptors, want at most 60", d)
	}
	if !eventually(t, 10*time.Second, func() bool { return up.held.Load() == 0 }) {
		t.Errorf("%d answers are still held past the MCP timeout", up.held.Load())
	}
	var after usage
	if !eventually(t, 10*time.Second, func() bool {
		after = measure(t, e.srv.Client())
		return after.goroutines <= before.goroutines+10 && after.fds <= before.fds+4
	}) {
		t.Errorf("past the MCP timeout the process holds %v, before the flood %v", after, before)
	}
}

// A post no operation bounds, the agent's task status notification the
// gateway relays upstream, gets the MCP timeout as its attempt timeout
// when AttemptTimeout is zero: an upstream that never answers it cannot
// hold the agent's request, and what the gateway holds for it, for ever.
func TestZeroAttemptTimeoutBoundsAnUnboundedPost(t *testing.T) {
	t.Parallel()
	ts := newClientTaskServer(t)
	var holding atomic.Bool
	var held atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if holding.Load() && strings.Contains(string(body), "notifications/tasks/status") {
			held.Add(1)
			<-r.Context().Done()
			return
		}
		r.Body = io.NopCloser(strings.NewReader(string(body)))
		ts.serve(w, r)
	}))
	t.Cleanup(srv.Close)
	e := newEnv(t, mcpproxy.Config{Options: mcpproxy.Options{Timeout: 2 * time.Second}}, mcpproxy.Connection{BaseURL: srv.URL})
	a := openTaskAgent(t, e, alice)
	within(t, ts.opened, "the upstream session's stream")
	a.call(t, "ask", map[string]any{})
	within(t, ts.statuses, "the agent's status notification")

	holding.Store(true)
	status := fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/tasks/status","params":%s}`, mustJSON(t, a.task("alice-task-1", "completed")))
	hc := &http.Client{Transport: identityTransport{alice}, Timeout: 20 * time.Second}
	resp, err := hc.Do(a.request(http.MethodPost, status))
	if err == nil {
		_, err = io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	if err != nil {
		t.Fatalf("the agent's notification was held: %v", err)
	}
	if held.Load() == 0 {
		t.Fatal("the notification never reached the upstream")
	}
	if n := e.metric("idn_gateway_mcp_task_total", "error"); n != 1 {
		t.Errorf("idn_gateway_mcp_task_total{result=error} = %v, want 1", n)
	}
}
