package hold_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/idnhq/idn/mcpproxy/internal/hold"
)

// A gate lets in at most its own places and its parent's; a request
// refused by either takes nothing and is told; a place given back twice
// counts once.
func TestGate(t *testing.T) {
	t.Parallel()
	refused := 0
	conn := hold.NewGate(3, nil, nil)
	a, b := hold.NewGate(2, conn, func() { refused++ }), hold.NewGate(2, conn, nil)
	leaveA1, ok1 := a.Enter()
	_, ok2 := a.Enter()
	if _, ok := a.Enter(); !ok1 || !ok2 || ok {
		t.Fatalf("the session's gate let in %v %v %v, want two of three", ok1, ok2, ok)
	}
	if _, ok := b.Enter(); !ok {
		t.Fatal("another session of the connection was refused its first place")
	}
	if _, ok := b.Enter(); ok {
		t.Fatal("the connection's gate let a fourth in")
	}
	leaveA1()
	leaveA1()
	if _, ok := b.Enter(); !ok {
		t.Fatal("a place given back was not taken again")
	}
	if _, ok := b.Enter(); ok {
		t.Fatal("a place given back twice counted twice")
	}
	if refused != 1 {
		t.Errorf("the session's gate told %d refusals, want 1", refused)
	}
}

// flood serves an event stream of n pings and waits; answers (POSTs) are
// accepted, or held until the client gives up when hold is set.
func flood(t *testing.T, n int, holdAnswers bool) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodPost:
			_, _ = io.ReadAll(r.Body) // so that the client's going away is seen
			if holdAnswers {
				<-r.Context().Done()
				return
			}
			w.WriteHeader(http.StatusAccepted)
		case http.MethodDelete:
			w.WriteHeader(http.StatusNoContent)
		default:
			w.Header().Set("Content-Type", "text/event-stream")
			for i := range n {
				fmt.Fprintf(w, "data: {\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"ping\"}\n\n", i+1)
			}
			fmt.Fprint(w, "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\"}\n\n")
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// read reads events until the notification ending the flood, and returns
// the ids of the requests that passed.
func read(t *testing.T, body io.Reader) []string {
	t.Helper()
	var ids []string
	sc := bufio.NewScanner(body)
	for sc.Scan() {
		line := sc.Text()
		if strings.Contains(line, "notifications/message") {
			return ids
		}
		if _, rest, ok := strings.Cut(line, `"id":`); ok {
			ids = append(ids, strings.SplitN(rest, ",", 2)[0])
		}
	}
	t.Fatalf("the stream ended early: %v", sc.Err())
	return nil
}

func post(hc *http.Client, url, body string) (*http.Response, error) {
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Mcp-Session-Id", "up-1")
	return hc.Do(req)
}

// A flood of the server's requests passes a session's transport only as
// far as its places; an answer posted gives its place back; the session's
// end ends its open stream, refuses later exchanges but the DELETE, and
// gives every place back to the connection.
func TestSessionTransportBoundsAFlood(t *testing.T) {
	t.Parallel()
	srv := flood(t, 1000, false)
	conn := hold.NewGate(hold.PerConnection, nil, nil)
	s := hold.NewSession(hold.NewGate(hold.PerSession, conn, nil), 0)
	hc := &http.Client{Transport: s.Transport(http.DefaultTransport)}
	req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
	req.Header.Set("Mcp-Session-Id", "up-1")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	passed := read(t, resp.Body)
	if len(passed) != hold.PerSession {
		t.Fatalf("%d of 1000 requests passed, want %d", len(passed), hold.PerSession)
	}
	if _, ok := s.Enter(); ok {
		t.Fatal("a full session let one more in")
	}
	answer, err := post(hc, srv.URL, `{"jsonrpc":"2.0","id":1,"result":{}}`)
	if err != nil {
		t.Fatal(err)
	}
	answer.Body.Close()
	leave, ok := s.Enter()
	if !ok {
		t.Fatal("an answer posted did not give its place back")
	}
	leave()

	s.End()
	if _, err := io.ReadAll(resp.Body); err == nil {
		t.Error("the session's stream read on after the session ended")
	}
	if _, err := post(hc, srv.URL, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); !errors.Is(err, hold.ErrEnded) {
		t.Errorf("a POST after the end: %v, want ErrEnded", err)
	}
	del, _ := http.NewRequest(http.MethodDelete, srv.URL, nil)
	if resp, err := hc.Do(del); err != nil {
		t.Errorf("the DELETE closing the upstream session after the end: %v", err)
	} else {
		resp.Body.Close()
	}
	for range hold.PerConnection {
		if _, ok := conn.Enter(); !ok {
			t.Fatal("the ended session kept places of its connection")
		}
	}
}

// An answer the server holds is given up after the reply timeout, and
// its place given back.
func TestSessionTransportAnswerDeadline(t *testing.T) {
	t.Parallel()
	srv := flood(t, 1, true)
	s := hold.NewSession(hold.NewGate(1, nil, nil), 50*time.Millisecond)
	hc := &http.Client{Transport: s.Transport(http.DefaultTransport)}
	req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
	req.Header.Set("Mcp-Session-Id", "up-1")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if passed := read(t, resp.Body); len(passed) != 1 {
		t.Fatalf("passed %v", passed)
	}
	if _, err := post(hc, srv.URL, `{"jsonrpc":"2.0","id":1,"result":{}}`); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a held answer: %v, want its deadline", err)
	}
	if _, ok := s.Enter(); !ok {
		t.Error("the answer given up kept its place")
	}
}
