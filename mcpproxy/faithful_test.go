package mcpproxy_test

//lint:file-ignore SA1019 the tests drive sampling and roots, which the SDK deprecates for the newest protocol version only.

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/idnhq/idn/mcpproxy"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// awaitValue returns the next value of ch, failing t after a generous
// bound rather than hanging the suite.
func awaitValue[T any](t testing.TB, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(30 * time.Second):
		t.Fatalf("%s never happened", what)
		panic("unreachable")
	}
}

// An agent's notifications/roots/list_changed reaches the server of its
// upstream session, which then asks for the roots again and gets the
// agent's new ones.
func TestRootsListChangedReachesTheServer(t *testing.T) {
	t.Parallel()
	changed := make(chan struct{}, 4)
	s := mcp.NewServer(&mcp.Implementation{Name: "rooted", Version: "1"}, &mcp.ServerOptions{
		RootsListChangedHandler: func(context.Context, *mcp.RootsListChangedRequest) { changed <- struct{}{} },
	})
	mcp.AddTool(s, &mcp.Tool{Name: "roots"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		res, err := req.Session.ListRoots(ctx, nil)
		if err != nil {
			return nil, nil, err
		}
		var uris []string
		for _, r := range res.Roots {
			uris = append(uris, r.URI)
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Join(uris, " ")}}}, nil, nil
	})
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(srv.Close)
	e := newEnv(t, mcpproxy.Config{}, mcpproxy.Connection{BaseURL: srv.URL})

	// Sampling too, so that calls are event streams that can carry the
	// server's roots/list.
	client := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, &mcp.ClientOptions{
		Capabilities: &mcp.ClientCapabilities{RootsV2: &mcp.RootCapabilities{ListChanged: true}, Sampling: &mcp.SamplingCapabilities{}},
		CreateMessageHandler: func(context.Context, *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			return &mcp.CreateMessageResult{}, nil
		},
	})
	client.AddRoots(&mcp.Root{URI: "file:///old"})
	cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{
		Endpoint: e.srv.URL + "/mcp/mcp1", HTTPClient: &http.Client{Transport: identityTransport{alice}}, MaxRetries: -1,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	roots := func() string {
		t.Helper()
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "roots", Arguments: map[string]any{}})
		if err != nil || res.IsError {
			t.Fatalf("roots call = %+v, %v", res, err)
		}
		return res.Content[0].(*mcp.TextContent).Text
	}
	if got := roots(); got != "file:///old" {
		t.Fatalf("roots before the change = %q", got)
	}

	client.AddRoots(&mcp.Root{URI: "file:///new"})
	awaitValue(t, changed, "the server told of the agent's roots/list_changed")
	if got := roots(); !strings.Contains(got, "file:///new") {
		t.Errorf("roots after the change = %q", got)
	}
}
