package proxy

import (
	"context"
	"net/http"
	"testing"

	"github.com/idnhq/idn/identity"
	"github.com/idnhq/idn/kit/tracing/tracingtest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type tpTransport struct{ base http.RoundTripper }

func (t tpTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Traceparent", agentTraceparent)
	return t.base.RoundTrip(r)
}

func TestScratchStreamable(t *testing.T) {
	up, _ := mcpUpstream(t)
	rec := tracingtest.NewReceiver(t)
	tp := rec.Provider(t)
	g := newGateway(t, gatewayOptions{mcpUpstream: up.URL, tracer: tp})
	client := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, nil)
	cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{
		Endpoint:   g.srv.URL + "/mcp/tools",
		HTTPClient: &http.Client{Transport: g.agent.Transport(tpTransport{http.DefaultTransport}, identity.SignOptions{})},
		MaxRetries: -1,
	}, session2025)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "docs.search", Arguments: map[string]any{"text": "x"}}); err != nil {
		t.Fatal(err)
	}
	tp.ForceFlush(context.Background())
	for _, s := range rec.Spans() {
		t.Logf("%s %s parent %s trace %s %v", s.Name, s.SpanID, s.ParentID, s.TraceID, s.Attributes)
	}
}
