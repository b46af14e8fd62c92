package upstream_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/idnhq/idn/mcpproxy/internal/upstream"
	"github.com/idnhq/idn/mcpproxy/internal/wire"
)

// deaf is a call's handler that drops what the server sends.
type deaf struct{}

func (deaf) Enter() (func(), bool)                               { return nil, false }
func (deaf) Notify(string, wire.Incoming)                        {}
func (deaf) Answer(context.Context, wire.Incoming) wire.Response { return wire.Response{} }

// A call's event stream the server ends before the result is resumed
// only when it can be, and not forever: rows named for what the server
// does.
func TestCallStreamResumption(t *testing.T) {
	t.Parallel()
	const result = "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":\"c1\",\"result\":{\"content\":[]}}\n\n"
	tests := []struct {
		name string
		post string // the POST's event stream, ended by the server
		get  func(n int32, lastEventID string) (status int, stream string)
		gets int32  // GETs the relay sends
		want string // in the error; empty: the result
	}{
		{"ends without event ids", "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{}}\n\n",
			nil, 0, "ended before the result"},
		{"ends after an id and a retry, resumed once", "id: s-1\nretry: 1\ndata:\n\n",
			func(_ int32, last string) (int, string) {
				if last != "s-1" {
					return http.StatusBadRequest, ""
				}
				return http.StatusOK, "id: s-2\n" + result
			}, 1, ""},
		{"keeps ending with no new event", "id: s-1\nretry: 1\ndata:\n\n",
			func(int32, string) (int, string) { return http.StatusOK, "retry: 1\n\n" }, 5, "5 times without a new event"},
		{"ends with news each time, then answers", "id: s-1\nretry: 1\ndata:\n\n",
			func(n int32, _ string) (int, string) {
				if n < 8 {
					return http.StatusOK, "id: s-" + string(rune('1'+n)) + "\n\n"
				}
				return http.StatusOK, result
			}, 8, ""},
		{"refuses the resumption", "id: s-1\nretry: 1\ndata:\n\n",
			func(int32, string) (int, string) { return http.StatusMethodNotAllowed, "" }, 1, "405"},
		{"forgot the session", "id: s-1\nretry: 1\ndata:\n\n",
			func(int32, string) (int, string) { return http.StatusNotFound, "" }, 1, "session not found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var gets atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				if r.Method == http.MethodPost {
					_, _ = io.Copy(io.Discard, r.Body)
					_, _ = io.WriteString(w, tt.post)
					return
				}
				if r.Header.Get("Mcp-Session-Id") != "sid" || r.Header.Get("Accept") != "text/event-stream" {
					t.Errorf("resumed without the session's headers: %v", r.Header)
				}
				status, stream := tt.get(gets.Add(1), r.Header.Get("Last-Event-ID"))
				w.WriteHeader(status)
				_, _ = io.WriteString(w, stream)
			}))
			t.Cleanup(srv.Close)
			s := upstream.Session{Client: srv.Client(), Endpoint: func() string { return srv.URL }, ID: "sid", Protocol: "2025-11-25"}
			_, err := upstream.Request(context.Background(), s, "c1", "tools/call", map[string]any{"name": "t"}, deaf{}, func(f func()) { f() })
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("error %v, want the result", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("error %v, want one saying %q", err, tt.want)
			}
			if got := gets.Load(); got != tt.gets {
				t.Errorf("%d resumptions, want %d", got, tt.gets)
			}
		})
	}
}
