package mcpproxy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idnhq/idn/mcpevent"
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
// client against the same call made through the proxy's HTTP handler.
// That adds policy, schema validation, rate limiter, breaker, retry layer
// and the extra HTTP hop. Both run against one in-process MCP server:
// "gateway" is the REST call route, "endpoint" a go-sdk client session on
// the MCP endpoint.
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
			Caller: func(*http.Request) (mcpevent.Caller, error) {
				return mcpevent.Caller{Namespace: "ns", Subject: "agent", Key: "k"}, nil
			},
			Options: mcpproxy.Options{
				RateLimitPerMinute: 1 << 30,
				BreakerFailures:    3,
			},
		})
		if err != nil {
			b.Fatal(err)
		}
		defer p.Close()
		gw := httptest.NewServer(p.Handler())
		defer gw.Close()
		client := mcp.NewClient(&mcp.Implementation{Name: "bench"}, nil)
		cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: gw.URL + "/mcp/bench", DisableStandaloneSSE: true}, session2025)
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
			Caller: func(*http.Request) (mcpevent.Caller, error) {
				return mcpevent.Caller{Namespace: "ns", Subject: "agent"}, nil
			},
			Options: mcpproxy.Options{
				RateLimitPerMinute: 1 << 30,
				BreakerFailures:    3,
			},
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

// BenchmarkEndpointSessionFlood opens b.N sessions of the MCP endpoint from
// one key, 8 at a time, each making one tool call (so each opens an
// upstream session too), while another agent keeps calling a tool on its
// own session. The flood churns through the key's share of sessions; the
// other agent's calls must all succeed. It reports the resident memory of
// the process (gateway, upstream and clients together) at the end and at
// its peak. It also reports the live heap and goroutines once the evicted
// sessions are closed, the sessions left open, and the other agent's
// calls, failures and p50.
func BenchmarkEndpointSessionFlood(b *testing.B) {
	// A plain upstream: the harness's records every request's headers.
	server := newMCPServer()
	upstream := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil))
	defer upstream.Close()
	e := newEnv(b, mcpproxy.Config{Options: mcpproxy.Options{RateLimitPerMinute: 1 << 30}}, mcpproxy.Connection{BaseURL: upstream.URL})
	victim := e.mustConnect(b, bob, nil)
	ctx := context.Background()
	echo := &mcp.CallToolParams{Name: "a.echo", Arguments: map[string]any{"text": "hi"}}
	if _, err := victim.CallTool(ctx, echo); err != nil {
		b.Fatal(err)
	}
	flooder := who{"mallory", "agent", "key-m"}
	const call = `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"a.echo","arguments":{"text":"x"}}}`

	done := make(chan struct{})
	var samples []time.Duration
	var failures int
	victimDone := make(chan struct{})
	go func() {
		defer close(victimDone)
		for {
			select {
			case <-done:
				return
			default:
			}
			start := time.Now()
			res, err := victim.CallTool(ctx, echo)
			samples = append(samples, time.Since(start))
			if err != nil || res.IsError {
				failures++
			}
		}
	}()
	b.ResetTimer()
	var next atomic.Int64
	var wg sync.WaitGroup
	var refused atomic.Int64
	for range 8 {
		wg.Go(func() {
			for next.Add(1) <= int64(b.N) {
				r := e.raw(b, flooder, "POST", "mcp1", "", initialize)
				if sid := r.header.Get("Mcp-Session-Id"); r.status == http.StatusOK && sid != "" {
					e.raw(b, flooder, "POST", "mcp1", sid, call)
				} else {
					refused.Add(1)
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	close(done)
	<-victimDone
	if failures > 0 || refused.Load() > 0 {
		b.Errorf("other agent: %d of %d calls failed; flooder refused %d times", failures, len(samples), refused.Load())
	}
	if rss, peak, ok := residentMemory(); ok {
		b.ReportMetric(rss/(1<<20), "rss-MiB")
		b.ReportMetric(peak/(1<<20), "rss-peak-MiB")
	}
	// What the evicted sessions leave behind, once their closes are done.
	awaitSessions(b, e, float64(1+min(b.N, 32))) // the victim and the default key share
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b.ReportMetric(float64(ms.HeapAlloc)/(1<<20), "live-heap-MiB")
	b.ReportMetric(float64(runtime.NumGoroutine()), "goroutines")
	b.ReportMetric(gaugeValue(b, e, "idn_gateway_mcp_sessions"), "sessions-open")
	b.ReportMetric(float64(len(samples)), "other-calls")
	b.ReportMetric(float64(failures), "other-failures")
	slices.Sort(samples)
	if len(samples) > 0 {
		b.ReportMetric(float64(samples[len(samples)/2].Microseconds()), "other-p50-µs")
	}
}

// residentMemory returns the process's resident set size and its peak, in
// bytes, where /proc says.
func residentMemory() (rss, peak float64, ok bool) {
	raw, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, 0, false
	}
	for line := range strings.SplitSeq(string(raw), "\n") {
		name, value, _ := strings.Cut(line, ":")
		kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(value), " kB"), 64)
		switch {
		case err != nil:
		case name == "VmRSS":
			rss = kb * 1024
		case name == "VmHWM":
			peak = kb * 1024
		}
	}
	return rss, peak, rss > 0
}

// BenchmarkStatelessToolCall compares one MCP 2026-07-28 tools/call made
// by the go-sdk client directly with the same call through the MCP
// endpoint. The server speaks both revisions: the SDK's stateless handler,
// which the gateway speaks to statelessly, and the same server in
// 2025-11-25 sessions, which the gateway's lane rides.
// The difference of the p50 figures is what the gateway adds.
func BenchmarkStatelessToolCall(b *testing.B) {
	server := newMCPServer()
	upstream := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, &mcp.StreamableHTTPOptions{Stateless: true}))
	b.Cleanup(upstream.Close)
	sessions := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil))
	b.Cleanup(sessions.Close)
	gw := benchGateway(b, connectionSet{
		"bench":    {ID: "bench", BaseURL: upstream.URL, Policy: mcpproxy.Policy{Allow: []string{"a.*"}}},
		"sessions": {ID: "sessions", BaseURL: sessions.URL, Policy: mcpproxy.Policy{Allow: []string{"a.*"}}},
	})
	for _, c := range []struct{ name, endpoint string }{{"direct", upstream.URL}, {"endpoint", gw + "/mcp/bench"}, {"endpoint-to-2025-sessions", gw + "/mcp/sessions"}} {
		b.Run(c.name, func(b *testing.B) {
			ctx := context.Background()
			client := mcp.NewClient(&mcp.Implementation{Name: "bench"}, nil)
			cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: c.endpoint, DisableStandaloneSSE: true}, nil)
			if err != nil {
				b.Fatal(err)
			}
			defer cs.Close()
			if v := cs.InitializeResult().ProtocolVersion; v != "2026-07-28" {
				b.Fatalf("negotiated %s", v)
			}
			call := func() {
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "a.echo", Arguments: map[string]any{"text": "hi"}})
				if err != nil || res.IsError {
					b.Fatal(err, res)
				}
			}
			call() // the lane and its upstream session are not part of a call's cost
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
}

// benchGateway serves a proxy of conns, for one caller with no rate
// limit, until the benchmark ends, and returns its URL.
func benchGateway(b *testing.B, conns connectionSet) string {
	p, err := mcpproxy.New(mcpproxy.Config{
		Connections: conns,
		Caller: func(*http.Request) (mcpevent.Caller, error) {
			return mcpevent.Caller{Namespace: "ns", Subject: "agent", Key: "k"}, nil
		},
		Options: mcpproxy.Options{RateLimitPerMinute: 1 << 30, BreakerFailures: 3},
	})
	if err != nil {
		b.Fatal(err)
	}
	gw := httptest.NewServer(p.Handler())
	b.Cleanup(func() {
		gw.Close()
		_ = p.Close()
	})
	return gw.URL
}

// connectionSet is a ConnectionSource of fixed connections.
type connectionSet map[string]mcpproxy.Connection

func (s connectionSet) MCPConnection(_ context.Context, id string) (*mcpproxy.Connection, error) {
	c, ok := s[id]
	if !ok {
		return nil, mcpproxy.ErrConnectionNotFound
	}
	return &c, nil
}

// BenchmarkStatelessRelay measures the gateway's own work on a tools/call
// of the stateless revision. A plain HTTP client posts the call to the MCP
// endpoint. Its upstream answers calls with a canned result; the go-sdk's
// stateless server answers discovery and listing. So ns/op and allocs/op
// are nearly all the relay's: routing check, lane, policy, arguments,
// upstream exchange, scrubbing and the answer.
func BenchmarkStatelessRelay(b *testing.B) {
	server := newMCPServer()
	sdk := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, &mcp.StreamableHTTPOptions{Stateless: true})
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Mcp-Method") != "tools/call" {
			sdk.ServeHTTP(w, r)
			return
		}
		var msg struct {
			ID json.RawMessage `json:"id"`
		}
		_ = json.NewDecoder(r.Body).Decode(&msg)
		w.Header().Set("Content-Type", "application/json")
		_, _ = fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"hello"}],"resultType":"complete"}}`, msg.ID)
	}))
	b.Cleanup(upstream.Close)
	gw := benchGateway(b, connectionSet{"bench": {ID: "bench", BaseURL: upstream.URL, Transport: &http.Transport{MaxIdleConnsPerHost: 16},
		Policy: mcpproxy.Policy{Allow: []string{"a.*"}}, Redact: []string{"a-secret-the-upstream-holds"}}})
	body := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a.echo","arguments":{"text":"hello"},` +
		`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	call := func() {
		req, _ := http.NewRequest(http.MethodPost, gw+"/mcp/bench", bytes.NewReader(body))
		req.Header = http.Header{"Content-Type": {"application/json"}, "Accept": {"application/json, text/event-stream"},
			"Mcp-Protocol-Version": {"2026-07-28"}, "Mcp-Method": {"tools/call"}, "Mcp-Name": {"a.echo"}}
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		out, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if !bytes.Contains(out, []byte(`"text":"hello"`)) {
			b.Fatalf("%s", out)
		}
	}
	call() // the lane, discovery and listing are not part of a call's cost
	b.ReportAllocs()
	for b.Loop() {
		call()
	}
}
