package clienttasks_test

import (
	"context"
	"encoding/json"
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
	hc := &http.Client{Transport: r.Transport(nil, time.Second, nil)}
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
	})}
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
