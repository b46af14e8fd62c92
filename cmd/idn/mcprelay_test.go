package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/idnhq/idn/credvault"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// An elicitation's answer reaches the server through idn mcp as the stdio
// client wrote it: no default of the requested schema filled in (the
// go-sdk's client and server in the relay each would), keys in order.
func TestMCPBridgeElicitationAnswerAsWritten(t *testing.T) {
	s := mcp.NewServer(&mcp.Implementation{Name: "asking", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "ask"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: "which?", RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{
			"color": map[string]any{"type": "string"},
			"size":  map[string]any{"type": "integer", "default": 3},
		}}})
		if err != nil {
			return nil, nil, err
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: res.Action}}}, nil, nil
	})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
	answers := make(chan string, 1)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if strings.Contains(string(body), `"action"`) {
			answers <- string(body) // the answer to the server's elicitation, as it came
		}
		r.Body = io.NopCloser(strings.NewReader(string(body)))
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(up.Close)
	st := newMCPStackFor(t, 0, &credvault.Connection{ID: "docs", Protocol: credvault.ProtocolMCP, BaseURL: up.URL})
	inW, outR, stderr := st.start(t)
	lines := json.NewDecoder(outR)
	next := func() map[string]json.RawMessage {
		var m map[string]json.RawMessage
		if err := lines.Decode(&m); err != nil {
			t.Fatalf("reading idn mcp's stdout: %v (stderr %s)", err, stderr.String())
		}
		return m
	}
	send := func(msg string) {
		if _, err := io.WriteString(inW, msg+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"elicitation":{}},"clientInfo":{"name":"raw","version":"1"}}}`)
	if m := next(); string(m["id"]) != "1" {
		t.Fatalf("initialize answered %s", m)
	}
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"ask","arguments":{}}}`)
	asked := next()
	if string(asked["method"]) != `"elicitation/create"` {
		t.Fatalf("idn mcp wrote %s, want the elicitation", asked)
	}
	send(`{"jsonrpc":"2.0","id":` + string(asked["id"]) + `,"result":{"action":"accept","content":{"color":"green"}}}`)
	if m := next(); string(m["id"]) != "2" || !strings.Contains(string(m["result"]), "accept") {
		t.Fatalf("the call answered %s", m)
	}
	if got := <-answers; !strings.Contains(got, `"content":{"color":"green"}`) {
		t.Errorf("the server got the answer %s, want the content as the client wrote it", got)
	}
}
