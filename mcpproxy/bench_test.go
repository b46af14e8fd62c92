package mcpproxy_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idnhq/idn/mcpproxy"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// reportPercentiles reports p50 and p99 of the per-call latencies.
func reportPercentiles(b *testing.B, samples []time.Duration) {
	b.Helper()
	if len(samples) == 0 {
		return
	}
	slices.Sort(samples)
	at := func(q float64) time.Duration { return samples[min(len(samples)-1, int(q*float64(len(samples))))] }
	b.ReportMetric(float64(at(0.50).Microseconds()), "p50-µs")
	b.ReportMetric(float64(at(0.99).Microseconds()), "p99-µs")
}

// BenchmarkToolCall compares one tool call made directly with a go-sdk
// client against the same call made through the proxy's HTTP handler
// (policy, schema validation, rate limiter, breaker, retry layer and the
// extra HTTP hop), both against one in-process MCP server: "gateway" is the
// REST call route, "endpoint" a go-sdk client session on the MCP endpoint.
// The difference of the p50 figures is the latency the gateway adds.
func BenchmarkToolCall(b *testing.B) {
	server := newMCPServer()
	upstream := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil))
	defer upstream.Close()
	ctx := context.Background()

	b.Run("direct", func(b *testing.B) {
		client := mcp.NewClient(&mcp.Implementation{Name: "bench"}, nil)
		cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: upstream.URL, DisableStandaloneSSE: true}, nil)
		if err != nil {
			b.Fatal(err)
		}
		defer cs.Close()
		samples := make([]time.Duration, 0, b.N)
		b.ResetTimer()
		for range b.N {
			start := time.Now()
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "a.echo", Arguments: map[string]any{"text": "hi"}})
			samples = append(samples, time.Since(start))
			if err != nil || res.IsError {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		reportPercentiles(b, samples)
	})

	b.Run("endpoint", func(b *testing.B) {
		p, err := mcpproxy.New(mcpproxy.Config{
			Connections: oneConnection{mcpproxy.Connection{ID: "bench", BaseURL: upstream.URL, Policy: mcpproxy.Policy{Allow: []string{"a.*"}}}},
			Caller: func(*http.Request) (mcpproxy.Caller, error) {
				return mcpproxy.Caller{Namespace: "ns", Subject: "agent", Key: "k"}, nil
			},
			RateLimitPerMinute: 1 << 30,
			BreakerFailures:    3,
		})
		if err != nil {
			b.Fatal(err)
		}
		defer p.Close()
		gw := httptest.NewServer(p.Handler())
		defer gw.Close()
		client := mcp.NewClient(&mcp.Implementation{Name: "bench"}, nil)
		cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: gw.URL + "/mcp/bench", DisableStandaloneSSE: true}, nil)
		if err != nil {
			b.Fatal(err)
		}
		defer cs.Close()
		call := func() {
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "a.echo", Arguments: map[string]any{"text": "hi"}})
			if err != nil || res.IsError {
				b.Fatal(err)
			}
		}
		call() // discovery and the upstream session are not part of a call's cost
		samples := make([]time.Duration, 0, b.N)
		b.ResetTimer()
		for range b.N {
			start := time.Now()
			call()
			samples = append(samples, time.Since(start))
		}
		b.StopTimer()
		reportPercentiles(b, samples)
	})

	b.Run("gateway", func(b *testing.B) {
		p, err := mcpproxy.New(mcpproxy.Config{
			Connections: oneConnection{mcpproxy.Connection{ID: "bench", BaseURL: upstream.URL, Policy: mcpproxy.Policy{Allow: []string{"a.*"}}}},
			Caller: func(*http.Request) (mcpproxy.Caller, error) {
				return mcpproxy.Caller{Namespace: "ns", Subject: "agent"}, nil
			},
			RateLimitPerMinute: 1 << 30,
			BreakerFailures:    3,
		})
		if err != nil {
			b.Fatal(err)
		}
		defer p.Close()
		gw := httptest.NewServer(p.Handler())
		defer gw.Close()
		client := gw.Client()
		url := gw.URL + "/mcp/bench/tools/a.echo/call"
		call := func() {
			resp, err := client.Post(url, "application/json", strings.NewReader(`{"text":"hi"}`))
			if err != nil {
				b.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				b.Fatalf("status %d", resp.StatusCode)
			}
		}
		call() // discovery and session set-up are not part of a call's cost
		samples := make([]time.Duration, 0, b.N)
		b.ResetTimer()
		for range b.N {
			start := time.Now()
			call()
			samples = append(samples, time.Since(start))
		}
		b.StopTimer()
		reportPercentiles(b, samples)
	})
}
