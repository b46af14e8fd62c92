package mcptasks_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/idnhq/idn/internal/mcptasks"
)

// tapped serves body as the answer to req through a Tap, and returns what
// its reader read, the offer and the status and progress notifications it
// was told of.
func tapped(t testing.TB, method, contentType string, body []byte) ([]byte, *mcptasks.Offer, []string, []string) {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", contentType)
		_, _ = w.Write(body)
	}))
	defer srv.Close()
	var offer *mcptasks.Offer
	var statuses, progress []string
	tap := &mcptasks.Tap{Offer: func(o *mcptasks.Offer) { offer = o },
		Status:   func(p json.RawMessage) { statuses = append(statuses, string(p)) },
		Progress: func(p json.RawMessage) { progress = append(progress, string(p)) },
	}
	method, inSession := strings.CutSuffix(method, " in a session")
	req, err := http.NewRequest(method, srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	if inSession {
		req.Header.Set("Mcp-Session-Id", "s1")
	}
	resp, err := tap.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(iotest.OneByteReader(resp.Body))
	if err != nil {
		t.Fatal(err)
	}
	return got, offer, statuses, progress
}

const initialized = `{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{},"tasks":{"list":{},"requests":{"tools":{"call":{}},"sampling":{"createMessage":{}}}}}}}`

// The tap reads the initialize answer, as JSON or as an event stream, and
// the session's stream, and hands the client every byte as it came.
func TestTap(t *testing.T) {
	status := `{"jsonrpc":"2.0","method":"notifications/tasks/status","params":{"taskId":"t1","status":"working"}}`
	progress := `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"p1","progress":1}}`
	for _, tt := range []struct {
		name, method, contentType, body string
		wantCaps                        bool
		wantStatus, wantProgress        int
	}{
		{"initialize answered as JSON", http.MethodPost, "application/json", initialized, true, 0, 0},
		{"initialize answered as an event stream", http.MethodPost, "text/event-stream", "event: message\r\nid: 1\r\ndata: " + initialized + "\r\n\r\n", true, 0, 0},
		{"the answer to a request", http.MethodPost + " in a session", "text/event-stream", "data: " + status + "\n\ndata: " + progress + "\n\ndata: {\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{}}\n\n", false, 1, 1},
		{"the session's stream", http.MethodGet, "text/event-stream", ": hi\n\ndata: " + status + "\n\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"data\":\"notifications/tasks/status\"}}\n\ndata: " + progress + "\n\ndata: " + status + "\n\n", false, 2, 1},
		{"a request named like a notification", http.MethodGet, "text/event-stream", "data: {\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"notifications/progress\",\"params\":{}}\n\n", false, 0, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, offer, statuses, progressed := tapped(t, tt.method, tt.contentType, []byte(tt.body))
			if !bytes.Equal(got, []byte(tt.body)) {
				t.Errorf("the client read %q, want %q", got, tt.body)
			}
			if tt.wantCaps {
				relayed, _ := json.Marshal(offer.Caps.Relayed())
				if offer.Version != "2025-11-25" || !offer.Caps.Callable() || string(relayed) != `{"list":{},"requests":{"tools":{"call":{}}}}` {
					t.Errorf("offer %+v, relayed %s", offer, relayed)
				}
			}
			if len(statuses) != tt.wantStatus || len(progressed) != tt.wantProgress {
				t.Errorf("statuses %q, progress %q", statuses, progressed)
			}
		})
	}
}

// FuzzTap feeds arbitrary event streams through the tap: the client reads
// exactly what came, and the tap never panics.
func FuzzTap(f *testing.F) {
	f.Add([]byte("data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/tasks/status\",\"params\":{}}\n\n"))
	f.Add([]byte("data: a\r\ndata: b\r\n\r\n\n\ndata:"))
	f.Fuzz(func(t *testing.T, body []byte) {
		if got, _, _, _ := tapped(t, http.MethodGet, "text/event-stream", body); !bytes.Equal(got, body) {
			t.Fatalf("the client read %q of %q", got, body)
		}
	})
}
