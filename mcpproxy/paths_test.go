package mcpproxy_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/idnhq/idn/mcpevent"
	"github.com/idnhq/idn/mcpproxy"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The MCP endpoint has fast paths beside the SDK's: direct.go answers a
// plain tools/call as one JSON body instead of the SDK's server, and
// exchange.go sends every upstream tools/call as one HTTP exchange
// instead of the SDK's client. They are kept for what they save
// (bench/README.md), and only because this test holds them to the SDK's:
// one conversation (a listing, results, a tool error, refusals, invalid
// arguments, progress, cancellation) runs through each combination of
// paths, and every answer must be the SDK paths' answer, message by
// message.
func TestFastPathsAnswerAsTheSDK(t *testing.T) {
	t.Parallel()
	paths := []struct {
		name                  string
		sdkAgent, sdkUpstream bool
	}{
		{"direct.go and exchange.go", false, false},
		{"SDK server and exchange.go", true, false},
		{"direct.go and SDK client", false, true},
		{"SDK server and SDK client", true, true},
	}
	transcripts := make([][]turn, len(paths))
	for i, p := range paths {
		transcripts[i] = converse(t, p.sdkAgent, p.sdkUpstream)
	}
	want := transcripts[len(paths)-1]
	for i, p := range paths[:len(paths)-1] {
		got := transcripts[i]
		if !p.sdkUpstream {
			// The SDK client path relays no progress (it serves only
			// servers that offer protocol versions newer than
			// 2025-11-25 alone, and the SDK's client hands a call's
			// result over before the notifications read just before
			// it): exchange.go adds the progress, and nothing else.
			got = withoutProgress(got)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s answers otherwise than the SDK paths (-sdk +%s):\n%s", p.name, p.name, diff)
		}
	}
	// The progress the fast upstream path relays, in order, before the
	// result, under the agent's token.
	for _, i := range []int{0, 1} {
		for _, tr := range transcripts[i] {
			if tr.Step != "progress" {
				continue
			}
			var methods []string
			for _, m := range tr.Messages {
				if m["method"] != nil {
					methods = append(methods, fmt.Sprint(m["method"], " ", m["params"].(map[string]any)["progressToken"], " ", m["params"].(map[string]any)["progress"]))
				} else {
					methods = append(methods, "result")
				}
			}
			if want := "notifications/progress p1 1,notifications/progress p1 2,notifications/progress p1 3,result"; strings.Join(methods, ",") != want {
				t.Errorf("%s: progress call answered %s, want %s", paths[i].name, strings.Join(methods, ","), want)
			}
		}
	}
}

// turn is one message the agent sent and what came back for it.
type turn struct {
	Step     string
	Status   int
	Messages []map[string]any
}

// withoutProgress returns tr without progress notifications.
func withoutProgress(tr []turn) []turn {
	out := make([]turn, len(tr))
	for i, t := range tr {
		out[i] = turn{Step: t.Step, Status: t.Status}
		for _, m := range t.Messages {
			if m["method"] != "notifications/progress" {
				out[i].Messages = append(out[i].Messages, m)
			}
		}
	}
	return out
}

// pathsUpstream is a go-sdk MCP server for the conversation: a.echo,
// a.fail (a tool error), b.denied (denied by policy), a.progress (three
// progress notifications, then its result) and a.block (runs until
// cancelled, telling started and cancelled).
func pathsUpstream(t *testing.T) (url string, started, cancelled <-chan struct{}) {
	s := mcp.NewServer(&mcp.Implementation{Name: "paths-upstream", Version: "1"}, nil)
	echo := func(_ context.Context, _ *mcp.CallToolRequest, a echoArgs) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: a.Text}}}, nil, nil
	}
	mcp.AddTool(s, &mcp.Tool{Name: "a.echo"}, echo)
	mcp.AddTool(s, &mcp.Tool{Name: "b.denied"}, echo)
	mcp.AddTool(s, &mcp.Tool{Name: "a.fail"}, func(context.Context, *mcp.CallToolRequest, echoArgs) (*mcp.CallToolResult, any, error) {
		return nil, nil, fmt.Errorf("tool exploded")
	})
	mcp.AddTool(s, &mcp.Tool{Name: "a.progress"}, func(ctx context.Context, req *mcp.CallToolRequest, a echoArgs) (*mcp.CallToolResult, any, error) {
		if token := req.Params.GetProgressToken(); token != nil {
			for i := 1; i <= 3; i++ {
				_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: token, Progress: float64(i), Total: 3, Message: "step"})
			}
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done " + a.Text}}}, nil, nil
	})
	begun, done := make(chan struct{}, 1), make(chan struct{}, 1)
	mcp.AddTool(s, &mcp.Tool{Name: "a.block"}, func(ctx context.Context, _ *mcp.CallToolRequest, _ echoArgs) (*mcp.CallToolResult, any, error) {
		begun <- struct{}{}
		<-ctx.Done()
		done <- struct{}{}
		return nil, nil, ctx.Err()
	})
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(srv.Close)
	return srv.URL, begun, done
}

// converse holds the conversation with a gateway whose paths are set as
// given, and returns its transcript.
func converse(t *testing.T, sdkAgent, sdkUpstream bool) []turn {
	t.Helper()
	upURL, started, cancelled := pathsUpstream(t)
	src := &sources{conns: map[string]*mcpproxy.Connection{}}
	src.set(&mcpproxy.Connection{ID: "paths", BaseURL: upURL, Policy: mcpproxy.Policy{Deny: []string{"b.*"}}})
	p, err := mcpproxy.New(mcpproxy.Config{
		Connections: src,
		Caller: func(*http.Request) (mcpevent.Caller, error) {
			return mcpevent.Caller{Namespace: "ns", Subject: "agent", Key: "k"}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	mcpproxy.UseSDKPaths(p, sdkAgent, sdkUpstream)
	srv := httptest.NewServer(p.Handler())
	t.Cleanup(func() {
		srv.Close()
		_ = p.Close()
	})
	var sid string
	post := func(step, body string) turn {
		t.Helper()
		req, _ := http.NewRequest("POST", srv.URL+"/mcp/paths", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if sid != "" {
			req.Header.Set("Mcp-Session-Id", sid)
			req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		defer resp.Body.Close()
		if sid == "" {
			sid = resp.Header.Get("Mcp-Session-Id")
		}
		return turn{Step: step, Status: resp.StatusCode, Messages: readMessages(t, resp)}
	}
	call := func(id int, params string) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":%s}`, id, params)
	}
	var tr []turn
	tr = append(tr, post("initialize", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"paths","version":"1"}}}`))
	tr = append(tr, post("initialized", `{"jsonrpc":"2.0","method":"notifications/initialized"}`))
	tr = append(tr, post("list", `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`))
	tr = append(tr, post("result", call(3, `{"name":"a.echo","arguments":{"text":"hi"}}`)))
	tr = append(tr, post("tool error", call(4, `{"name":"a.fail","arguments":{"text":"x"}}`)))
	tr = append(tr, post("invalid arguments", call(5, `{"name":"a.echo","arguments":{"text":5}}`)))
	tr = append(tr, post("denied", call(6, `{"name":"b.denied","arguments":{"text":"x"}}`)))
	tr = append(tr, post("unknown", call(7, `{"name":"z.nope","arguments":{}}`)))
	tr = append(tr, post("progress", call(8, `{"name":"a.progress","arguments":{"text":"p"},"_meta":{"progressToken":"p1"}}`)))
	tr = append(tr, post("no progress asked", call(9, `{"name":"a.progress","arguments":{"text":"q"}}`)))
	tr = append(tr, post("a client's own _meta", call(10, `{"name":"a.echo","arguments":{"text":"m"},"_meta":{"example.com/trace":"t1"}}`)))
	// Cancellation: the call runs upstream until the agent withdraws it.
	blocked := make(chan turn, 1)
	go func() { blocked <- post("cancelled call", call(11, `{"name":"a.block","arguments":{"text":"b"}}`)) }()
	within(t, started, "the blocking tool to start")
	tr = append(tr, post("cancel", `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":11,"reason":"enough"}}`))
	within(t, cancelled, "the upstream tool to be cancelled")
	tr = append(tr, within(t, blocked, "the cancelled call's answer"))
	tr = append(tr, post("after cancellation", call(12, `{"name":"a.echo","arguments":{"text":"again"}}`)))
	return tr
}

// readMessages returns the JSON-RPC messages of an answer: its JSON body
// or the data of each event of its event stream.
func readMessages(t *testing.T, resp *http.Response) []map[string]any {
	t.Helper()
	var out []map[string]any
	add := func(raw string) {
		var m map[string]any
		if err := json.Unmarshal([]byte(raw), &m); err != nil {
			t.Fatalf("message %q: %v", raw, err)
		}
		out = append(out, m)
	}
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		raw, _ := io.ReadAll(resp.Body)
		if len(strings.TrimSpace(string(raw))) > 0 {
			add(string(raw))
		}
		return out
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	var data []string
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "data:"); ok {
			data = append(data, strings.TrimPrefix(v, " "))
		}
		if line == "" && len(data) > 0 {
			add(strings.Join(data, "\n"))
			data = nil
		}
	}
	if len(data) > 0 {
		add(strings.Join(data, "\n"))
	}
	return out
}
