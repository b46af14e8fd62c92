package mcpproxy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/idnhq/idn/mcpevent"
	"github.com/idnhq/idn/mcpproxy"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// oneConnection is the gateway's connection store, reduced to one entry.
type oneConnection struct{ conn mcpproxy.Connection }

func (s oneConnection) MCPConnection(_ context.Context, id string) (*mcpproxy.Connection, error) {
	if id != s.conn.ID {
		return nil, mcpproxy.ErrConnectionNotFound
	}
	c := s.conn
	return &c, nil
}

// callerKey stands in for the gateway's signed pipeline, which verifies the
// request and records who made it.
type callerKey struct{}

func Example() {
	// An upstream MCP server.
	server := mcp.NewServer(&mcp.Implementation{Name: "weather", Version: "2.0.0"}, nil)
	type forecastArgs struct {
		City string `json:"city"`
	}
	mcp.AddTool(server, &mcp.Tool{Name: "weather.forecast"}, func(_ context.Context, _ *mcp.CallToolRequest, a forecastArgs) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "sunny in " + a.City}}}, nil, nil
	})
	mcp.AddTool(server, &mcp.Tool{Name: "weather.admin"}, func(context.Context, *mcp.CallToolRequest, forecastArgs) (*mcp.CallToolResult, any, error) {
		return nil, nil, nil
	})
	upstream := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil))
	defer upstream.Close()

	proxy, err := mcpproxy.New(mcpproxy.Config{
		Connections: oneConnection{mcpproxy.Connection{
			ID:       "weather",
			BaseURL:  upstream.URL,
			Endpoint: "/",
			Policy:   mcpproxy.Policy{Deny: []string{"*.admin"}},
		}},
		Caller: func(r *http.Request) (mcpevent.Caller, error) {
			c, ok := r.Context().Value(callerKey{}).(mcpevent.Caller)
			if !ok {
				return mcpevent.Caller{}, fmt.Errorf("unauthenticated")
			}
			return c, nil
		},
		Options: mcpproxy.Options{
			RateLimitPerMinute: 120,
			BreakerFailures:    3,
		},
	})
	if err != nil {
		panic(err)
	}
	defer proxy.Close()

	// The gateway mounts the handler behind its own authentication.
	signedPipeline := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			caller := mcpevent.Caller{Namespace: "acme", Subject: "agent-7"}
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), callerKey{}, caller)))
		})
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp/", signedPipeline(proxy.Handler()))
	gateway := httptest.NewServer(mux)
	defer gateway.Close()

	show := func(method, path, body string) {
		req, _ := http.NewRequest(method, gateway.URL+path, strings.NewReader(body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			panic(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		var v map[string]any
		_ = json.Unmarshal(raw, &v)
		switch {
		case v["tools"] != nil:
			for _, t := range v["tools"].([]any) {
				fmt.Println(resp.StatusCode, "tool:", t.(map[string]any)["name"])
			}
		case v["content"] != nil:
			fmt.Println(resp.StatusCode, "text:", v["content"].([]any)[0].(map[string]any)["text"], "is_error:", v["is_error"])
		default:
			fmt.Println(resp.StatusCode, v["code"])
		}
	}
	show("GET", "/mcp/weather/tools", "")
	show("POST", "/mcp/weather/tools/weather.forecast/call", `{"city":"Oslo"}`)
	show("POST", "/mcp/weather/tools/weather.forecast/call", `{"city":42}`)
	show("POST", "/mcp/weather/tools/weather.admin/call", `{"city":"Oslo"}`)
	// Output:
	// 200 tool: weather.forecast
	// 200 text: sunny in Oslo is_error: false
	// 400 MCP_TOOL_ARGUMENTS_INVALID
	// 403 MCP_TOOL_FORBIDDEN
}

func ExamplePolicy_Explain() {
	policy := mcpproxy.Policy{
		Allow: []string{"github.*"},
		Deny:  []string{"github.admin.*"},
		Subjects: map[string]mcpproxy.SubjectPolicy{
			"ci-bot": {Allow: []string{"github.repos.?et", "slack.post"}},
		},
	}
	discovered := []string{"github.admin.delete", "github.repos.get", "github.repos.set", "github.issues.list", "slack.post"}
	for _, tool := range discovered {
		d := policy.Explain("ci-bot", tool, discovered)
		fmt.Println(d.Tool, d.Allowed, d.Source)
	}
	// Output:
	// github.admin.delete false connection_denylist
	// github.repos.get true subject_allowlist
	// github.repos.set true subject_allowlist
	// github.issues.list false subject_allowlist
	// slack.post false connection_allowlist
}

func ExampleProxy_Discover() {
	server := mcp.NewServer(&mcp.Implementation{Name: "notes", Version: "0.3.1"}, nil)
	mcp.AddTool(server, &mcp.Tool{Name: "notes.add"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{}, nil, nil
	})
	upstream := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil))
	defer upstream.Close()

	var stored json.RawMessage // the connection's mcp_discovery column
	proxy, err := mcpproxy.New(mcpproxy.Config{
		OnDiscovery: func(_ context.Context, connectionID string, d mcpproxy.Discovery) {
			stored, _ = json.Marshal(d)
		},
	})
	if err != nil {
		panic(err)
	}
	defer proxy.Close()

	conn := &mcpproxy.Connection{ID: "notes", BaseURL: upstream.URL, Discovery: stored}
	d, err := proxy.Discover(context.Background(), conn, mcpproxy.RefreshForce)
	if err != nil {
		panic(err)
	}
	fmt.Println(d.ServerName, d.ServerVersion, len(d.Tools), d.Tools[0].Name, string(d.Tools[0].InputSchema))
	fmt.Println(len(stored) > 0, proxy.SessionState("notes"))
	// Output:
	// notes 0.3.1 1 notes.add {"additionalProperties":false,"type":"object"}
	// true ready
}

// A connection's MCP settings as a store keeps them (the mcp_* members of
// the connection object), read back, completed and turned into the policy
// a Connection carries.
func ExampleDecodeSettings() {
	stored := map[string]json.RawMessage{
		"mcp_endpoint":       json.RawMessage(`"/mcp"`),
		"mcp_tool_allowlist": json.RawMessage(`["docs.*"]`),
		"mcp_tool_denylist":  json.RawMessage(`["docs.delete"]`),
	}
	s, _, err := mcpproxy.DecodeSettings(stored)
	if err != nil {
		fmt.Println(err)
		return
	}
	s.Normalize()
	policy := s.Policy()
	d := policy.Explain("agent", "docs.delete", []string{"docs.read", "docs.delete"})
	fmt.Println(s.Check(), s.Transport, d.Allowed, d.Source)
	_, _, err = mcpproxy.DecodeSettings(map[string]json.RawMessage{"mcp_max_tools": json.RawMessage(`"many"`)})
	fmt.Println(err)
	// Output:
	// <nil> streamable_http false connection_denylist
	// mcpproxy: mcp_max_tools has the wrong JSON type
}

// Where the proxy reaches a connection's server: mcp_endpoint joined to
// base_url, or mcp_endpoint alone when it is a full URL.
func ExampleResolveEndpoint() {
	for _, ep := range []string{"", "/mcp?b=2", "https://mcp.example.com/x"} {
		u, err := mcpproxy.ResolveEndpoint("https://api.example.com/v1?a=1", ep)
		fmt.Println(u, err)
	}
	_, err := mcpproxy.ResolveEndpoint("https://api.example.com", "ftp://files.example.com")
	fmt.Println(err)
	// Output:
	// https://api.example.com/v1?a=1 <nil>
	// https://api.example.com/v1/mcp?a=1&b=2 <nil>
	// https://mcp.example.com/x <nil>
	// mcpproxy: invalid MCP endpoint: endpoint must be an http or https URL
}
