package proxy

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/idnhq/idn/identity"
	"github.com/idnhq/idn/kit/textcap"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// exportedBytes is what spans would weigh in an export: names and
// attribute values.
func exportedBytes(spans tracetest.SpanStubs) int {
	n := 0
	for _, s := range spans {
		n += len(s.Name)
		for _, a := range s.Attributes {
			n += len(a.Key) + len(a.Value.String())
		}
	}
	return n
}

// checkPerCall fails when n calls logged or exported more than 2 KB each.
func checkPerCall(t *testing.T, n, logged, exported int) {
	t.Helper()
	t.Logf("%d calls: decision log %d bytes a call, spans %d bytes a call", n, logged/n, exported/n)
	if logged/n > 2<<10 || exported/n > 2<<10 {
		t.Errorf("decision log %d bytes, spans %d bytes a call; want at most 2 KB each", logged/n, exported/n)
	}
}

// Attack: an approved agent calls tools the connection does not have,
// under names of its own choosing, to grow the decision log and the
// exported spans. Each call costs a bounded number of bytes of both, and
// the calls stop at the tool-call rate limit.
func TestUnknownToolNamesAreBounded(t *testing.T) {
	t.Parallel()
	setup := func(t *testing.T) (*gateway, *tracetest.InMemoryExporter, func() int32) {
		up, calls := mcpUpstream(t)
		spans := tracetest.NewInMemoryExporter()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
		t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
		return newGateway(t, gatewayOptions{mcpUpstream: up.URL, tracer: tp}), spans, calls.Load
	}

	t.Run("100 KB names on the REST route, past the rate limit", func(t *testing.T) {
		t.Parallel()
		g, spans, calls := setup(t)
		const n = 200
		name := strings.Repeat("n", 100<<10)
		logged, exported := len(g.logs.Bytes()), exportedBytes(spans.GetSpans())
		start := time.Now()
		codes := map[string]int{}
		for range n {
			a := g.do(g.request(g.agent, "POST", "/mcp/tools/tools/"+name+"/call", `{}`))
			code, _ := a.env["code"].(string)
			codes[code]++
		}
		elapsed := time.Since(start)
		t.Logf("%d calls in %v", n, elapsed)
		// The default limit, 120 a minute, refills 2 a second; every
		// other answer must be the limit's.
		if most := 120 + 2*int(elapsed.Seconds()+1); codes["MCP_TOOL_NOT_FOUND"] > most || codes["MCP_TOOL_NOT_FOUND"]+codes["MCP_TOOL_RATE_LIMITED"] != n {
			t.Errorf("answers %v in %v: want at most %d not found, the rest rate limited", codes, elapsed, most)
		}
		// The discovery: server/discover (the era), initialize,
		// initialized and tools/list.
		if calls() > 4 {
			t.Errorf("%d upstream requests, want the discovery's only", calls())
		}
		checkPerCall(t, n, len(g.logs.Bytes())-logged, exportedBytes(spans.GetSpans())-exported)
	})

	t.Run("2 MB names in an MCP session", func(t *testing.T) {
		t.Parallel()
		g, spans, _ := setup(t)
		const n = 20
		name := strings.Repeat("m", 2<<20)
		// Signed at the gateway's clock, so that a slow run (2 MB bodies
		// under the race detector) stays inside the signature window.
		client := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, nil)
		cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{
			Endpoint: g.srv.URL + "/mcp/tools",
			HTTPClient: &http.Client{Transport: g.agent.Transport(http.DefaultTransport.(*http.Transport).Clone(),
				identity.SignOptions{Created: g.clock.now()})},
			MaxRetries: -1,
		}, session2025)
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close()
		logged, exported := len(g.logs.Bytes()), exportedBytes(spans.GetSpans())
		for range n {
			_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: map[string]any{}})
			var je *jsonrpc.Error
			if !errors.As(err, &je) || !strings.Contains(string(je.Data), "MCP_TOOL_NOT_FOUND") {
				t.Fatalf("call: %v", err)
			}
			if len(je.Message) > 2*textcap.Name {
				t.Fatalf("the error quotes %d bytes of the name", len(je.Message))
			}
		}
		checkPerCall(t, n, len(g.logs.Bytes())-logged, exportedBytes(spans.GetSpans())-exported)
	})
}
