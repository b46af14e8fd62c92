package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/idnhq/idn/credvault"
	"github.com/idnhq/idn/identity"
	"github.com/idnhq/idn/internal/mcpconversation"
	"github.com/idnhq/idn/kit/testnode"
	"github.com/idnhq/idn/mcpproxy"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// conversationUpstream is the server internal/mcpconversation's
// stateless.mjs expects, a go-sdk server of both revisions that wants the
// gateway's credential: echo, confirm (it asks the client, in rounds),
// the prompt greet with completions of its argument, and the resource
// file:///readme. With only set, it speaks 2026-07-28 alone.
func conversationUpstream(t *testing.T, only bool) string {
	var versions []string
	if only {
		versions = []string{statelessRevision}
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "asking-upstream", Version: "1"}, &mcp.ServerOptions{
		SupportedProtocolVersions: versions,
		CompletionHandler: func(_ context.Context, r *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
			var values []string
			for _, name := range []string{"alice", "albert", "bob"} {
				if strings.HasPrefix(name, r.Params.Argument.Value) {
					values = append(values, name)
				}
			}
			return &mcp.CompleteResult{Completion: mcp.CompletionResultDetails{Values: values, Total: len(values)}}, nil
		},
	})
	type text struct {
		Text string `json:"text"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "confirm", Description: "asks before it answers"}, func(_ context.Context, req *mcp.CallToolRequest, a text) (*mcp.CallToolResult, any, error) {
		if answer, ok := req.Params.InputResponses["confirm"].(*mcp.ElicitResult); ok {
			raw, _ := json.Marshal(answer.Content)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: answer.Action + " " + string(raw)}}}, nil, nil
		}
		return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"confirm": &mcp.ElicitParams{
			Message:         "really send " + a.Text + "?",
			RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{"ok": map[string]any{"type": "boolean"}}},
		}}}, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "echoes text"}, func(_ context.Context, _ *mcp.CallToolRequest, a text) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: a.Text}}}, nil, nil
	})
	s.AddPrompt(&mcp.Prompt{Name: "greet", Arguments: []*mcp.PromptArgument{{Name: "who"}}}, func(_ context.Context, r *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "hello " + r.Params.Arguments["who"]}}}}, nil
	})
	s.AddResource(&mcp.Resource{Name: "readme", URI: "file:///readme", MIMEType: "text/plain"}, func(_ context.Context, r *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: r.Params.URI, Text: "read me"}}}, nil
	})
	// The go-sdk serves each revision with a handler of its own: sessions
	// (2025-11-25 and older), and stateless requests (2026-07-28).
	sessions := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
	stateless := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{Stateless: true})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Header.Get("Authorization") != "Bearer "+upstreamToken:
			http.Error(w, "unauthorized", http.StatusUnauthorized)
		case only || r.Header.Get("Mcp-Protocol-Version") >= statelessRevision:
			stateless.ServeHTTP(w, r)
		default:
			sessions.ServeHTTP(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// The TypeScript SDK v2 client's 2026-07-28 conversation (discovery, the
// listing, calls, one answered in rounds, prompts, resources and
// completions), held with the server directly, through the gateway
// (signed by idnsign.mjs), and through idn mcp over stdio, gets the same
// answers message by message, from a server of both eras and from one of
// 2026-07-28 alone.
func TestTypeScriptSDKv2ThroughIdnMCP(t *testing.T) {
	testnode.Modules(t, "the TypeScript SDK v2 client")
	for _, tt := range []struct {
		era  string
		only bool
	}{{"a server of both eras", false}, {"a server of 2026-07-28 alone", true}} {
		t.Run(tt.era, func(t *testing.T) { typeScriptSDKv2ThroughIdnMCP(t, tt.only) })
	}
}

func typeScriptSDKv2ThroughIdnMCP(t *testing.T, only bool) {
	upstream := conversationUpstream(t, only)
	st := newMCPStackFor(t, 0, &credvault.Connection{ID: "docs", Protocol: credvault.ProtocolMCP, BaseURL: upstream,
		AuthMode: credvault.AuthBearer, AuthSecretKey: "token", Extensions: mcpproxy.Settings{ExposeResources: true, ExposePrompts: true}.Members()})
	signer, err := filepath.Abs("testdata/idnsign.mjs")
	if err != nil {
		t.Fatal(err)
	}
	direct := mcpconversation.Stateless(t, upstream, "Authorization=Bearer "+upstreamToken)
	gateway := mcpconversation.StatelessWith(t, []string{"IDN_SIGNER=" + signer, "IDN_IDENTITY_FILE=" + identity.Path(st.home, st.agent.Namespace)},
		st.url+"/mcp/docs")
	bridged := mcpconversation.StatelessWith(t, []string{"IDN_HOME=" + st.home,
		"IDN_TEST_AS_IDN=1"}, // for the idn the stdio transport starts, not for node
		"stdio", os.Args[0], "mcp", "--gateway", st.url, "--connection", "docs")
	if len(direct) != 11 || direct[3]["asked"] != "elicitation/create" || direct[10]["step"] != "completion/complete" {
		t.Fatalf("the direct conversation did not run its rounds and completion: %v", direct)
	}
	mcpconversation.CompareStateless(t, direct, gateway)
	// idn mcp relays the gateway's answers as they are.
	if diff := gocmp.Diff(gateway, bridged); diff != "" {
		t.Errorf("through idn mcp (-gateway +idn mcp):\n%s", diff)
	}
}
