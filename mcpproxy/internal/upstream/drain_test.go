package upstream_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/idnhq/idn/mcpproxy/internal/upstream"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Calls in a row on a server that answers on an event stream reuse one
// connection: the stream's end is read after the result, else closing
// the response would take the connection with it.
func TestCallsReuseTheConnection(t *testing.T) {
	s := mcp.NewServer(&mcp.Implementation{Name: "newest", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "echo"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "hi"}}}, nil, nil
	})
	srv := httptest.NewUnstartedServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{Stateless: true}))
	var dialed atomic.Int64
	srv.Config.ConnState = func(_ net.Conn, state http.ConnState) {
		if state == http.StateNew {
			dialed.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	session := statelessSession(srv.URL)
	session.Client = &http.Client{Transport: &http.Transport{}}
	for i := range 20 {
		res, err := upstream.CallStateless(context.Background(), session, fmt.Sprint("c", i), &mcp.CallToolParams{Name: "echo", Arguments: json.RawMessage(`{}`)}, nil, &asker{}, nil, detachNow)
		if err != nil || decoded(t, res).IsError {
			t.Fatal(err, string(res))
		}
	}
	if n := dialed.Load(); n != 1 {
		t.Errorf("20 calls opened %d connections, want 1", n)
	}
}

// A server that keeps a call's stream open after the result does not
// hold the call: the result is returned at once, and the stream is
// closed in the background within a bound.
func TestStreamKeptOpenAfterTheResult(t *testing.T) {
	closed := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":\"c1\",\"result\":{\"content\":[],\"resultType\":\"complete\"}}\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
		close(closed)
	}))
	t.Cleanup(srv.Close)
	background := func(f func()) { go f() }
	if _, err := upstream.CallStateless(context.Background(), statelessSession(srv.URL), "c1", &mcp.CallToolParams{Name: "echo", Arguments: json.RawMessage(`{}`)}, nil, &asker{}, nil, background); err != nil {
		t.Fatal(err)
	}
	select {
	case <-closed:
		t.Error("the call returned after its stream ended")
	default:
	}
	<-closed
}
