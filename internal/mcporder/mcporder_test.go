package mcporder_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idnhq/idn/internal/mcporder"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A tool that reports progress right before it returns: through Transport,
// every notification has reached the handler when CallTool returns.
func TestResultWaitsForEarlierProgress(t *testing.T) {
	const steps = 20
	s := mcp.NewServer(&mcp.Implementation{Name: "steps", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "count"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		for i := 1; i <= steps; i++ {
			_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: req.Params.GetProgressToken(), Progress: float64(i)})
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil, nil
	})
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	defer srv.Close()

	var mu sync.Mutex
	calls := map[string]*mcporder.Call{}
	got := map[string]int{}
	client := mcp.NewClient(&mcp.Implementation{Name: "relay", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			token, _ := req.Params.ProgressToken.(string)
			mu.Lock()
			got[token]++
			c := calls[token]
			mu.Unlock()
			c.Delivered()
		},
	})
	cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{
		Endpoint: srv.URL, HTTPClient: &http.Client{Transport: &mcporder.Transport{}}, DisableStandaloneSSE: true,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	for i := range 10 {
		token := "t" + string(rune('a'+i))
		c := mcporder.NewCall(token)
		mu.Lock()
		calls[token] = c
		mu.Unlock()
		params := &mcp.CallToolParams{Name: "count", Arguments: map[string]any{}}
		params.SetProgressToken(token)
		start := time.Now()
		if _, err := cs.CallTool(mcporder.WithCall(context.Background(), c), params); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		n := got[token]
		mu.Unlock()
		if n != steps {
			t.Fatalf("call %d returned with %d of %d progress notifications delivered", i, n, steps)
		}
		if d := time.Since(start); d > mcporder.DefaultWait/2 {
			t.Errorf("call %d took %s: the hold-back timed out instead of seeing the deliveries", i, d)
		}
	}
}

// chunked returns its data n bytes at a time.
type chunked struct {
	data []byte
	n    int
}

func (c *chunked) Read(p []byte) (int, error) {
	if len(c.data) == 0 {
		return 0, io.EOF
	}
	k := min(len(p), c.n, len(c.data))
	copy(p, c.data[:k])
	c.data = c.data[k:]
	return k, nil
}

// passThrough runs data through Transport, as a stream of a call with
// token "t" whose progress is never delivered.
func passThrough(t testing.TB, data []byte, chunk int) []byte {
	rt := &mcporder.Transport{
		Wait: time.Nanosecond,
		Base: roundTripper(func(*http.Request) (*http.Response, error) {
			return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"text/event-stream"}},
				Body: io.NopCloser(&chunked{data: data, n: max(chunk, 1)})}, nil
		}),
	}
	req := httptest.NewRequest("POST", "http://x/mcp", nil)
	req = req.WithContext(mcporder.WithCall(req.Context(), mcporder.NewCall("t")))
	resp, err := rt.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestStreamPassesUnchanged(t *testing.T) {
	stream := "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":\"t\",\"progress\":1}}\n\n" +
		"data: {\"jsonrpc\":\"2.0\",\"id\":3,\r\ndata: \"result\":{}}\r\n\r\n" + ": comment\r\rdata: tail without end"
	for _, chunk := range []int{1, 3, 7, 64, 1 << 16} {
		if got := passThrough(t, []byte(stream), chunk); string(got) != stream {
			t.Errorf("chunk %d: got %q", chunk, got)
		}
	}
	long := "data: " + strings.Repeat("x", 1<<20+10) + "\n\ndata: {\"id\":1,\"result\":{}}\n\n"
	if got := passThrough(t, []byte(long), 1<<15); !bytes.Equal(got, []byte(long)) {
		t.Errorf("an event past the inspection bound was changed (%d bytes of %d)", len(got), len(long))
	}
}

// The stream is the upstream's, so untrusted: whatever it holds comes out
// unchanged.
func FuzzStreamPassesUnchanged(f *testing.F) {
	f.Add([]byte("data: {\"method\":\"notifications/progress\",\"params\":{\"progressToken\":\"t\"}}\n\ndata: {\"id\":1}\n\n"), 5)
	f.Add([]byte("\r\n\r\n\n\r\ndata:\r\rdata: {\"id\":null}\n\n"), 1)
	f.Add([]byte("data: {\"id\":\"x\",\"method\":\"\"}\r\n\n"), 2)
	f.Fuzz(func(t *testing.T, data []byte, chunk int) {
		if chunk < 0 {
			chunk = -chunk
		}
		if got := passThrough(t, data, chunk%4096); !bytes.Equal(got, data) {
			t.Fatalf("stream changed: %q → %q", data, got)
		}
	})
}
