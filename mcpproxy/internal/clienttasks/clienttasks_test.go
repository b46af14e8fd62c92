package clienttasks_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/idnhq/idn/mcpproxy/internal/clienttasks"
)

func initialize(version, caps string) []byte {
	return []byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"` + version + `","clientInfo":{"name":"x","version":"1"},"capabilities":` + caps + `}}`)
}

// The declared capability is added to the initialize request alone, and
// the rest of it passes as it was.
func TestTransportDeclaresOnInitialize(t *testing.T) {
	var bodies []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		bodies = append(bodies, string(b))
	}))
	defer srv.Close()
	var r clienttasks.Relay
	r.Declare(initialize("2025-11-25", `{"sampling":{},"tasks":{"list":{},"requests":{"sampling":{"createMessage":{}}}}}`))
	hc := &http.Client{Transport: r.Transport(nil, time.Second, nil, nil)}
	post := func(session, body string) {
		req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(body))
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	post("", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"sampling":{}},"clientInfo":{"name":"idn-gateway","version":"1"}}}`)
	post("s1", `{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{"capabilities":{}}}`)
	want := []string{
		`{"id":1,"jsonrpc":"2.0","method":"initialize","params":{"capabilities":{"sampling":{},"tasks":{"list":{},"requests":{"sampling":{"createMessage":{}}}}},"clientInfo":{"name":"idn-gateway","version":"1"},"protocolVersion":"2025-11-25"}}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{"capabilities":{}}}`,
	}
	for i := range want {
		if bodies[i] != want[i] {
			t.Errorf("request %d = %s, want %s", i, bodies[i], want[i])
		}
	}
}

// An answer is taken only for a request the session is waiting on.
func TestAnsweredOnlyForItsOwnRequests(t *testing.T) {
	var r clienttasks.Relay
	r.Declare(initialize("2025-11-25", `{"sampling":{},"tasks":{"requests":{"sampling":{"createMessage":{}}}}}`))
	for _, body := range []string{
		`{"jsonrpc":"2.0","id":"idn-ct-guessed","result":{}}`,
		`{"jsonrpc":"2.0","id":"idn-ct-guessed","method":"tasks/get","params":{}}`,
		`{"jsonrpc":"2.0","id":7,"result":{}}`,
	} {
		if r.Answered([]byte(body)) {
			t.Errorf("Answered(%s) = true", body)
		}
	}
}

// The streams the SDK's client reads lose the server's requests of the
// client side of tasks, and nothing else; each is answered by the relay
// and the answer posted to the server on the stream's session.
func TestTransportTakesTasksRequestsOutOfStreams(t *testing.T) {
	stream := "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{}}\n\n" +
		"data: {\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tasks/get\",\"params\":{\"taskId\":\"t1\"}}\n\n" +
		"data: {\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"sampling/createMessage\",\"params\":{\"messages\":[]}}\r\n\r\n" +
		"data: {\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"sampling/createMessage\",\n" +
		"data: \"params\":{\"task\":{},\"messages\":[]}}\n\n" +
		"data: {\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"elicitation/create\",\"params\":{\"task\":{}}}\n\n"
	want := "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{}}\n\n" +
		"data: {\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"sampling/createMessage\",\"params\":{\"messages\":[]}}\r\n\r\n" +
		// Elicitation as a task was not declared.
		"data: {\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"elicitation/create\",\"params\":{\"task\":{}}}\n\n"
	posted := make(chan string, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, stream)
			return
		}
		b, _ := io.ReadAll(r.Body)
		posted <- r.Header.Get("Mcp-Session-Id") + " " + string(b)
		w.WriteHeader(http.StatusAccepted)
	}))
	defer srv.Close()
	var r clienttasks.Relay
	r.Declare(initialize("2025-11-25", `{"sampling":{},"tasks":{"requests":{"sampling":{"createMessage":{}}}}}`))
	asked := make(chan string, 4)
	hc := &http.Client{Transport: r.Transport(nil, time.Minute, func(_ context.Context, method string, params json.RawMessage) (any, error) {
		asked <- method + " " + string(params)
		return map[string]string{"answered": method}, nil
	}, nil)}
	req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
	req.Header.Set("Mcp-Session-Id", "s1")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(got) != want {
		t.Errorf("the SDK's client read\n%q\nwant\n%q", got, want)
	}
	answers := map[string]bool{}
	for range 2 {
		select {
		case a := <-asked:
			answers[a] = true
		case <-time.After(10 * time.Second):
			t.Fatal("the relay was not asked")
		}
		select {
		case p := <-posted:
			answers[p] = true
		case <-time.After(10 * time.Second):
			t.Fatal("no answer was posted")
		}
	}
	for _, a := range []string{
		`tasks/get {"taskId":"t1"}`,
		`sampling/createMessage {"task":{},"messages":[]}`,
		`s1 {"jsonrpc":"2.0","id":1,"result":{"answered":"tasks/get"}}`,
		`s1 {"jsonrpc":"2.0","id":3,"result":{"answered":"sampling/createMessage"}}`,
	} {
		if !answers[a] {
			t.Errorf("missing %s among %v", a, answers)
		}
	}
}

// A server that withdraws a request it sent on a stream the SDK's client
// reads (notifications/cancelled) ends its asking at once, and gets no
// answer to it; a cancellation naming another request, or sent on
// another session's stream, changes nothing.
func TestTransportEndsARequestTheServerWithdraws(t *testing.T) {
	request := func(id int) string {
		return fmt.Sprintf("data: {\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"sampling/createMessage\",\"params\":{\"task\":{},\"messages\":[],\"n\":%d}}\n\n", id, id)
	}
	cancelled := func(id int) string {
		return fmt.Sprintf("data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":%d}}\n\n", id)
	}
	withdraw := make(chan struct{})
	posted := make(chan string, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			b, _ := io.ReadAll(r.Body)
			posted <- string(b)
			w.WriteHeader(http.StatusAccepted)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		flush := func(s string) {
			_, _ = io.WriteString(w, s)
			_ = http.NewResponseController(w).Flush()
		}
		flush("") // the headers
		if r.Header.Get("Mcp-Session-Id") == "other" {
			<-withdraw
			flush(cancelled(4)) // another session's stream
			<-r.Context().Done()
			return
		}
		flush(request(3) + request(4))
		<-withdraw
		flush(cancelled(9) + cancelled(3))
		<-r.Context().Done()
	}))
	defer srv.Close()
	var r clienttasks.Relay
	r.Declare(initialize("2025-11-25", `{"sampling":{},"tasks":{"requests":{"sampling":{"createMessage":{}}}}}`))
	asked, ended, release := make(chan string, 4), make(chan string, 4), make(chan struct{})
	hc := &http.Client{Transport: r.Transport(nil, time.Minute, func(ctx context.Context, _ string, params json.RawMessage) (any, error) {
		asked <- string(params)
		select {
		case <-ctx.Done():
			ended <- string(params)
			return nil, ctx.Err()
		case <-release:
			return map[string]string{"answered": string(params)}, nil
		}
	}, nil)}
	for _, session := range []string{"s1", "other"} {
		req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
		req.Header.Set("Mcp-Session-Id", session)
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		go func() { _, _ = io.Copy(io.Discard, resp.Body) }()
		defer resp.Body.Close()
	}
	for range 2 {
		within(t, asked, "the agent to be asked")
	}
	close(withdraw)
	if got := within(t, ended, "the withdrawn request to end"); !strings.Contains(got, `"n":3`) {
		t.Fatalf("ended %s, want the request 3", got)
	}
	close(release)
	if got := within(t, posted, "the answer to the request 4"); !strings.Contains(got, `"id":4`) {
		t.Errorf("posted %s, want the answer to 4", got)
	}
	select {
	case got := <-ended:
		t.Errorf("%s ended too", got)
	case got := <-posted:
		t.Errorf("posted %s too", got)
	case <-time.After(100 * time.Millisecond):
	}
}

func within[T any](t *testing.T, c <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-c:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("waited 10 s for %s", what)
		var zero T
		return zero
	}
}
