package mcpproxy_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/idnhq/idn/internal/mcptasks/mcptaskstest"
	"github.com/idnhq/idn/mcpevent"

	"github.com/idnhq/idn/mcpproxy"
)

// sseEvent is one event of an event stream as a client reads it.
type sseEvent struct{ id, name, data string }

// streams serves the endpoint of e for event streams (GET), one
// connection each, and says when the server is done with one.
type streams struct {
	srv    *httptest.Server
	closed chan struct{} // one value per connection the server closed
}

func newStreams(t testing.TB, e *env) *streams {
	s := &streams{closed: make(chan struct{}, 16)}
	s.srv = httptest.NewUnstartedServer(e.proxy.Handler())
	s.srv.Config.ConnState = func(_ net.Conn, state http.ConnState) {
		if state == http.StateClosed {
			s.closed <- struct{}{}
		}
	}
	s.srv.Start()
	t.Cleanup(s.srv.Close)
	return s
}

// open sends the GET of session sid's own stream as w, with lastEventID
// as Last-Event-ID when set; it returns the answer, whose events, when it
// is 200, come on the channel, and the function that closes the stream.
func (s *streams) open(t testing.TB, w who, sid, lastEventID string) (*http.Response, <-chan sseEvent, func()) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, s.srv.URL+"/mcp/mcp1", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	if lastEventID != "" {
		req.Header.Set("Last-Event-ID", lastEventID)
	}
	tr := &http.Transport{DisableKeepAlives: true}
	resp, err := (&http.Client{Transport: identityTransportOn{w, tr}}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	closeIt := func() { resp.Body.Close(); tr.CloseIdleConnections() }
	t.Cleanup(closeIt)
	out := make(chan sseEvent, 16)
	if resp.StatusCode != http.StatusOK {
		return resp, out, closeIt
	}
	go func() {
		var ev sseEvent
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			field, value, _ := strings.Cut(sc.Text(), ": ")
			switch field {
			case "id":
				ev.id = value
			case "event":
				ev.name = value
			case "data":
				ev.data = value
			case "":
				if ev != (sseEvent{}) {
					out <- ev
				}
				ev = sseEvent{}
			}
		}
	}()
	return resp, out, closeIt
}

type identityTransportOn struct {
	who  who
	base http.RoundTripper
}

func (t identityTransportOn) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("X-Test-Namespace", t.who.namespace)
	r.Header.Set("X-Test-Subject", t.who.subject)
	r.Header.Set("X-Test-Key", t.who.key)
	return t.base.RoundTrip(r)
}

// message returns the next event of events that carries a message, and
// the message.
func message(t testing.TB, events <-chan sseEvent, what string) (sseEvent, map[string]any) {
	t.Helper()
	for {
		ev := within(t, events, what)
		if ev.data == "" {
			continue // a priming event
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(ev.data), &m); err != nil {
			t.Fatalf("%s: %q is no message", what, ev.data)
		}
		return ev, m
	}
}

// A client that lost its session's own stream and opens it again with
// the id of the last event it read is sent the task status and progress
// it missed, once each, in order, with ids of the stream's one sequence,
// and then what comes next; no other session and no other caller can
// read them.
func TestTaskStreamResumes(t *testing.T) {
	t.Parallel()
	up := mcptaskstest.NewServer(t)
	notes := make(chan string, 16)
	e := newEnv(t, mcpproxy.Config{OnDecision: func(_ context.Context, ev mcpevent.Decision) {
		// Those of the owner's session (the other sees them not_owned).
		if strings.HasPrefix(ev.Method, "notifications/") && ev.Outcome != "not_owned" {
			notes <- ev.Method + " " + ev.Outcome
		}
	}}, mcpproxy.Connection{BaseURL: up.URL})
	s := newStreams(t, e)
	owner, _ := openTasks(t, e, alice)
	sibling, _ := openTasks(t, e, alice)
	for range 2 {
		within(t, up.Opened, "the upstream sessions' streams")
	}

	resp, events, disconnect := s.open(t, alice, owner, "")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET: %d", resp.StatusCode)
	}
	res, rpcErr := rpc(t, e, alice, owner, "tools/call", map[string]any{"name": "work", "arguments": map[string]any{"n": 1}, "task": map[string]any{"ttl": 1000}, "_meta": map[string]any{"progressToken": 7}})
	task, _ := res["task"].(map[string]any)
	id, _ := task["taskId"].(string)
	if id == "" {
		t.Fatalf("a task-augmented call answered %v, %v", res, rpcErr)
	}
	early, _ := message(t, events, "the progress sent before the task")
	up.Status(id, "working")
	read, msg := message(t, events, "the task's status")
	if msg["method"] != "notifications/tasks/status" || read.id == "" || read.id == early.id {
		t.Fatalf("the status came as %+v", read)
	}
	for range 2 {
		within(t, notes, "the notifications relayed live")
	}

	disconnect()
	within(t, s.closed, "the end of the stream")
	up.Progress(0, 2)
	up.Status(id, "working")
	for range 2 {
		if got := within(t, notes, "the notifications sent without a stream"); !strings.HasSuffix(got, " no_stream") {
			t.Fatalf("a notification sent without a stream: %s", got)
		}
	}

	tag, _, _ := strings.Cut(read.id, "-")
	for _, tt := range []struct {
		name        string
		who         who
		sid         string
		lastEventID string
		want        int
	}{
		{"another caller resumes the owner's stream", bob, owner, read.id, http.StatusNotFound},
		{"another session of the owner's caller resumes with the owner's event id", alice, sibling, read.id, http.StatusBadRequest},
		{"a resume names an event the stream has not sent", alice, owner, tag + "-99", http.StatusBadRequest},
		{"a resume names a malformed event id", alice, owner, "_1", http.StatusBadRequest},
	} {
		resp, _, _ := s.open(t, tt.who, tt.sid, tt.lastEventID)
		if resp.StatusCode != tt.want || resp.Header.Get("Content-Type") == "text/event-stream" {
			t.Errorf("%s: %d %s", tt.name, resp.StatusCode, resp.Header.Get("Content-Type"))
		}
	}
	for range 4 {
		within(t, s.closed, "the refused resumes' connections")
	}
	// The other session's own stream, resumed from its start, replays
	// nothing: its first event is the one that primes it.
	_, siblingEvents, leave := s.open(t, alice, sibling, "")
	start := within(t, siblingEvents, "the other session's priming event")
	leave()
	within(t, s.closed, "the end of the other session's stream")
	_, siblingEvents, _ = s.open(t, alice, sibling, start.id)
	if ev := within(t, siblingEvents, "the other session's resumed stream"); ev.data != "" || ev.id != start.id {
		t.Errorf("another session of the owner's caller resumes its own stream and is sent %+v", ev)
	}

	resp, events, _ = s.open(t, alice, owner, read.id)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("resume: %d", resp.StatusCode)
	}
	progress, pm := message(t, events, "the missed progress")
	status, sm := message(t, events, "the missed status")
	if got := jsonOf(t, pm); got != `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":2,"progressToken":7,"total":3}}` {
		t.Errorf("the missed progress: %s", got)
	}
	if params, _ := sm["params"].(map[string]any); sm["method"] != "notifications/tasks/status" || params["taskId"] != id {
		t.Errorf("the missed status: %v", sm)
	}
	prime := within(t, events, "the priming event")
	if prime.data != "" || prime.id != status.id {
		t.Errorf("the priming event after the replay: %+v, want id %s", prime, status.id)
	}
	up.Status(id, "working")
	next, nm := message(t, events, "the status sent after the resume")
	if nm["method"] != "notifications/tasks/status" {
		t.Errorf("after the resume: %v", nm)
	}
	if ids := []string{early.id, read.id, progress.id, status.id, next.id}; !increasing(t, ids) {
		t.Errorf("the stream's ids, in the order sent: %v", ids)
	}
	select {
	case ev := <-events:
		t.Errorf("an event sent twice or more: %+v", ev)
	default:
	}
}

// increasing reports whether ids, of one stream, are consecutive.
func increasing(t testing.TB, ids []string) bool {
	t.Helper()
	var prev int
	for i, id := range ids {
		_, num, ok := strings.Cut(id, "-")
		var n int
		if !ok || json.Unmarshal([]byte(num), &n) != nil || i > 0 && n != prev+1 {
			return false
		}
		prev = n
	}
	return true
}
