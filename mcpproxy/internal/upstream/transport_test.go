package upstream_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idnhq/idn/mcpproxy/internal/upstream"
)

func newTransport(retries int) *upstream.Transport {
	return &upstream.Transport{
		Base:   func() http.RoundTripper { return http.DefaultTransport },
		Policy: upstream.RetryPolicy{MaxRetries: retries, BaseDelay: time.Millisecond, MaxDelay: time.Millisecond},
	}
}

func TestTransportRetriesOverload(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		statuses []int
		want     int // status returned
		attempts int
	}{
		{"503 then success", []int{503, 200}, 200, 2},
		{"429, 502, 504 are retried", []int{429, 502, 504, 200}, 200, 4},
		{"retries are bounded", []int{503, 503, 503, 503, 503}, 503, 4},
		{"500 is the server's verdict", []int{500, 200}, 500, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var n atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(tt.statuses[min(int(n.Add(1))-1, len(tt.statuses)-1)])
			}))
			defer srv.Close()
			ctx, tr := upstream.WithTrace(t.Context())
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, strings.NewReader(`{"method":"tools/list"}`))
			resp, err := newTransport(3).RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			attempts, status := tr.Snapshot()
			if resp.StatusCode != tt.want || attempts != tt.attempts || status != tt.want {
				t.Errorf("status %d after %d attempts (trace %d), want %d after %d", resp.StatusCode, attempts, status, tt.want, tt.attempts)
			}
		})
	}
}

// A server that forgot a session and says so with 400 (as the TypeScript
// and Python SDK examples do) is answered as the transport specifies, 404,
// so the client re-initializes; a 400 about anything else is kept.
func TestTransportLostSessionIs404(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, body, session string
		want                int
	}{
		{"forgotten session", "Bad Request: No valid session ID provided", "s1", http.StatusNotFound},
		{"json-rpc error about the session", `{"jsonrpc":"2.0","error":{"code":-32000,"message":"Session not found"}}`, "s1", http.StatusNotFound},
		{"another bad request", "Bad Request: arguments", "s1", http.StatusBadRequest},
		{"no session sent", "No valid session ID provided", "", http.StatusBadRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				http.Error(w, tt.body, http.StatusBadRequest)
			}))
			defer srv.Close()
			req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(`{}`))
			if tt.session != "" {
				req.Header.Set("Mcp-Session-Id", tt.session)
			}
			resp, err := newTransport(0).RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tt.want {
				t.Errorf("status = %d, want %d", resp.StatusCode, tt.want)
			}
		})
	}
}

// A request that timed out after its body was sent may have run: a
// tools/call is then never sent again, while a listing is.
func TestTransportNeverRepeatsASentCall(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, body string
		attempts   int32
	}{
		{"tools/call that may have run", `{"jsonrpc":"2.0","id":1,"method":"tools/call"}`, 1},
		{"tools/list", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var n atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				n.Add(1)
				_, _ = io.Copy(io.Discard, r.Body) // the whole call arrived
				<-r.Context().Done()               // answers nothing: every attempt times out
			}))
			defer srv.Close()
			tr := newTransport(2)
			tr.Policy.AttemptTimeout = 20 * time.Millisecond
			req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(tt.body))
			if _, err := tr.RoundTrip(req); err == nil {
				t.Fatal("a request that never got an answer succeeded")
			}
			if got := n.Load(); got != tt.attempts {
				t.Errorf("attempts = %d, want %d", got, tt.attempts)
			}
		})
	}
}
