package mcpproxy

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"

	"github.com/idnhq/idn/internal/mcptasks"
	"github.com/idnhq/idn/mcpproxy/internal/scrub"
	"github.com/idnhq/idn/mcpproxy/internal/wire"
)

// Task status notifications (notifications/tasks/status): a server sends
// them where it likes, mostly on the session's own event stream, whose
// reader, the SDK's client, drops a method it does not know. They are read
// on their way there (mcptasks.Tap) and from the streams the relay reads
// itself, and reach the agent session whose task they are about, alone, on
// its own event stream (GET): the SDK's server cannot send a method it
// does not know either, so they are written between its events
// (streamWriter). One about a task the session does not own is held until
// the session owns it (a server may report a task before the answer that
// created it has been read), at most maxEarlyStatus of them; the oldest
// is dropped past that. Each is a decision (Method
// "notifications/tasks/status", Outcome "relayed", "no_stream" when the
// session has no stream open, or "not_owned" when dropped unclaimed),
// counted in idn_gateway_mcp_task_total.

// taskStatus hands the agent of s the status notification with params raw,
// when the task is s's, scrubbed of secrets.
func (e *endpoint) taskStatus(ctx context.Context, s *agentSession, raw json.RawMessage) {
	conn := s.conn.Load()
	var p struct {
		TaskID string `json:"taskId"`
	}
	if json.Unmarshal(raw, &p) != nil {
		return
	}
	if !s.tasks.owns(p.TaskID) {
		dropped, held := s.tasks.hold(p.TaskID, raw)
		if dropped != nil {
			e.p.metrics.tasks.WithLabelValues(mcptasks.StatusMethod, "not_owned").Inc()
			e.p.decide(ctx, conn, s.caller, mcptasks.StatusMethod, "", "not_owned", nil)
		}
		if held {
			return
		}
	}
	st, err := e.p.state(conn)
	if err != nil {
		return
	}
	clean, err := scrub.Launder(st.scrubber.Load(), &raw)
	if err != nil {
		return
	}
	msg, err := json.Marshal(wire.Request{JSONRPC: "2.0", Method: mcptasks.StatusMethod, Params: *clean})
	if err != nil {
		return
	}
	outcome := "relayed"
	if w := s.stream.Load(); w == nil || !w.send(msg) {
		outcome = "no_stream"
	}
	e.p.metrics.tasks.WithLabelValues(mcptasks.StatusMethod, outcome).Inc()
	e.p.decide(ctx, conn, s.caller, mcptasks.StatusMethod, "", outcome, nil)
}

// streamWriter is the ResponseWriter of a session's own event stream
// (GET), served by the SDK's server: it writes whole events, each in one
// Write, and the relay writes its own between them.
type streamWriter struct {
	http.ResponseWriter
	mu     sync.Mutex
	open   bool // the SDK accepted the stream
	closed bool // the SDK's handler returned
}

func (w *streamWriter) WriteHeader(code int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.open = code == http.StatusOK
	w.ResponseWriter.WriteHeader(code)
}

func (w *streamWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.ResponseWriter.Write(b)
}

func (w *streamWriter) Flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}

func (w *streamWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// send writes msg as one event; false when the stream is not open.
func (w *streamWriter) send(msg []byte) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.open || w.closed {
		return false
	}
	if _, err := w.ResponseWriter.Write(append(append([]byte("event: message\ndata: "), msg...), "\n\n"...)); err != nil {
		return false
	}
	_ = http.NewResponseController(w.ResponseWriter).Flush()
	return true
}

func (w *streamWriter) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closed = true
}
