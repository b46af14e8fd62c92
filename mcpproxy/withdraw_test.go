package mcpproxy_test

//lint:file-ignore SA1019 the tests drive sampling, which the SDK deprecates for the newest protocol version only.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/idnhq/idn/internal/mcpnotify"
	"github.com/idnhq/idn/mcpproxy"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// withdrawServer is a go-sdk MCP server whose tools ask the client for a
// sampling during the call. "withdraw" pings first (so that its sampling
// request's id, 2, is not the one the gateway's asks its agent with),
// then withdraws its sampling request once the agent has it, and ends
// its call when released. "end" does the same but writes the
// notifications/cancelled itself and returns at once, so that the result
// follows it on the stream. "stray" pings too, then, while its sampling
// request (2) waits, sends notifications/cancelled naming other requests:
// its answered ping (1, also the id the agent's request has), one never
// sent (99), ids of the gateway's own; and returns the agent's answer. answers collects the ids of the JSON-RPC answers
// the server was posted.
type withdrawServer struct {
	url     string
	asked   chan struct{} // the agent has the server's request (told by the test)
	release chan struct{} // the call may end
	err     chan error    // what the withdrawn request returned to the server

	mu      sync.Mutex
	answers []string
}

func newWithdrawServer(t *testing.T) *withdrawServer {
	ws := &withdrawServer{asked: make(chan struct{}, 1), release: make(chan struct{}), err: make(chan error, 1)}
	s := mcp.NewServer(&mcp.Implementation{Name: "withdrawer", Version: "1"}, nil)
	s.AddSendingMiddleware(mcpnotify.Sending)
	sample := &mcp.CreateMessageParams{MaxTokens: 5, Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "hi"}}}}
	mcp.AddTool(s, &mcp.Tool{Name: "withdraw"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		if err := req.Session.Ping(ctx, nil); err != nil {
			return nil, nil, err
		}
		asking, withdraw := context.WithCancel(ctx)
		go func() {
			select {
			case <-ws.asked:
			case <-ctx.Done():
			}
			withdraw()
		}()
		_, err := req.Session.CreateMessage(asking, sample)
		ws.err <- err
		select {
		case <-ws.release:
		case <-ctx.Done():
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "withdrawn"}}}, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "end"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		if err := req.Session.Ping(ctx, nil); err != nil {
			return nil, nil, err
		}
		go func() { _, _ = req.Session.CreateMessage(ctx, sample) }()
		select {
		case <-ws.asked:
		case <-ctx.Done():
		}
		_ = mcpnotify.Send(ctx, req.Session, "notifications/cancelled", &mcp.CancelledParams{RequestID: 2, Reason: "the call ends"})
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ended"}}}, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "stray"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		if err := req.Session.Ping(ctx, nil); err != nil {
			return nil, nil, err
		}
		go func() {
			select {
			case <-ws.asked:
			case <-ctx.Done():
				return
			}
			for _, id := range []any{1, 99, "idn-ct-1", "idn-1"} {
				_ = mcpnotify.Send(ctx, req.Session, "notifications/cancelled", &mcp.CancelledParams{RequestID: id, Reason: "not yours"})
			}
			close(ws.release)
		}()
		res, err := req.Session.CreateMessage(ctx, sample)
		if err != nil {
			return nil, nil, err
		}
		return &mcp.CallToolResult{Content: []mcp.Content{res.Content}}, nil, nil
	})
	sdk := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		var msg struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if json.Unmarshal(body, &msg) == nil && msg.Method == "" && msg.ID != nil {
			ws.mu.Lock()
			ws.answers = append(ws.answers, string(msg.ID))
			ws.mu.Unlock()
		}
		sdk.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	ws.url = srv.URL
	return ws
}

func (ws *withdrawServer) answered() []string {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	return append([]string(nil), ws.answers...)
}

// heard records what an agent's HTTP client read from the gateway.
type heard struct {
	base http.RoundTripper
	mu   sync.Mutex
	buf  bytes.Buffer
}

func (h *heard) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := h.base.RoundTrip(r)
	if err == nil {
		resp.Body = struct {
			io.Reader
			io.Closer
		}{io.TeeReader(resp.Body, h), resp.Body}
	}
	return resp, err
}

func (h *heard) Write(p []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.buf.Write(p)
}

func (h *heard) String() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.buf.String()
}

// samplingAgent opens a session of an agent that declares sampling and
// holds every sampling request until told to answer it (answer) or until
// it is withdrawn: asked receives each request, withdrawn each one whose
// context the agent's client ended, which only a notifications/cancelled
// naming the id the agent was asked with does.
func samplingAgent(t *testing.T, e *env, answer <-chan struct{}) (cs *mcp.ClientSession, asked, withdrawn <-chan struct{}, h *heard) {
	t.Helper()
	a, w, stop := make(chan struct{}, 4), make(chan struct{}, 4), make(chan struct{})
	h = &heard{base: identityTransport{alice}}
	client := mcp.NewClient(&mcp.Implementation{Name: "sampler", Version: "1"}, &mcp.ClientOptions{
		CreateMessageHandler: func(ctx context.Context, _ *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			a <- struct{}{}
			select {
			case <-answer:
				return &mcp.CreateMessageResult{Model: "m", Role: "assistant", Content: &mcp.TextContent{Text: "the agent's answer"}}, nil
			case <-ctx.Done():
				w <- struct{}{}
				return &mcp.CreateMessageResult{}, ctx.Err()
			case <-stop:
				return &mcp.CreateMessageResult{}, errors.New("the test ended")
			}
		},
	})
	cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{
		Endpoint: e.srv.URL + "/mcp/mcp1", HTTPClient: &http.Client{Transport: h}, MaxRetries: -1,
	}, session2025)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	t.Cleanup(func() { close(stop) }) // first: a request still held would hold Close
	return cs, a, w, h
}

// onEachPath runs test in parallel on each combination of the endpoint's
// paths, against a withdrawServer of its own.
func onEachPath(t *testing.T, test func(t *testing.T, ws *withdrawServer, e *env)) {
	t.Parallel()
	for _, paths := range []struct{ sdkAgent, sdkUpstream bool }{{false, false}, {true, false}, {false, true}, {true, true}} {
		t.Run(fmt.Sprintf("SDK agent side %v, SDK upstream side %v", paths.sdkAgent, paths.sdkUpstream), func(t *testing.T) {
			t.Parallel()
			ws := newWithdrawServer(t)
			e := newEnv(t, mcpproxy.Config{}, mcpproxy.Connection{BaseURL: ws.url})
			mcpproxy.UseSDKPaths(e.proxy, paths.sdkAgent, paths.sdkUpstream)
			test(t, ws, e)
		})
	}
}

// A server that withdraws a request it sent during a call (its own
// timeout, say) has the agent told: the agent that was asked gets
// notifications/cancelled under the id it was asked with (its client
// ends the request's handler), and the server gets no answer to the
// withdrawn request. Through each combination of the endpoint's paths.
func TestServerWithdrawsItsRequest(t *testing.T) {
	onEachPath(t, func(t *testing.T, ws *withdrawServer, e *env) {
		never := make(chan struct{})
		cs, asked, withdrawn, _ := samplingAgent(t, e, never)
		done := make(chan error, 1)
		go func() {
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "withdraw", Arguments: map[string]any{}})
			if err == nil && (res.IsError || res.Content[0].(*mcp.TextContent).Text != "withdrawn") {
				err = fmt.Errorf("result %+v", res)
			}
			done <- err
		}()
		within(t, asked, "the agent to be asked")
		ws.asked <- struct{}{}
		if err := within(t, ws.err, "the server's request to end"); err == nil {
			t.Fatal("the server's withdrawn request was answered")
		}
		within(t, withdrawn, "the agent to be told the request is withdrawn")
		close(ws.release)
		if err := within(t, done, "the call's result"); err != nil {
			t.Fatal(err)
		}
		// The ping (1) was answered; the withdrawn sampling (2) is not.
		if got := strings.Join(ws.answered(), ","); got != "1" {
			t.Errorf("the server was posted answers to %s, want only the ping's (1)", got)
		}
	})
}

// Attack: a server that names in notifications/cancelled a request it did
// not send this agent (another session's, an id of the gateway's own, one
// never sent) cannot have the agent told anything, nor end the request
// the agent is being asked.
func TestServerCancellingAnotherRequestReachesNoAgent(t *testing.T) {
	onEachPath(t, func(t *testing.T, ws *withdrawServer, e *env) {
		cs, asked, withdrawn, h := samplingAgent(t, e, ws.release)
		go func() {
			<-asked
			ws.asked <- struct{}{}
		}()
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "stray", Arguments: map[string]any{}})
		if err != nil || res.IsError || res.Content[0].(*mcp.TextContent).Text != "the agent's answer" {
			t.Fatalf("call = %+v, %v", res, err)
		}
		select {
		case <-withdrawn:
			t.Error("a cancellation naming another request ended the agent's")
		default:
		}
		if got := h.String(); strings.Contains(got, "notifications/cancelled") {
			t.Errorf("the agent was sent a cancellation: %s", got)
		}
	})
}

// A server that withdraws its request and ends its call at once (its
// notifications/cancelled, then its result, on the call's stream) has
// the agent told before the result, which closes the stream the agent was
// asked on.
func TestServerWithdrawsItsRequestAndEndsTheCall(t *testing.T) {
	onEachPath(t, func(t *testing.T, ws *withdrawServer, e *env) {
		never := make(chan struct{})
		cs, asked, withdrawn, _ := samplingAgent(t, e, never)
		done := make(chan error, 1)
		go func() {
			_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "end", Arguments: map[string]any{}})
			done <- err
		}()
		within(t, asked, "the agent to be asked")
		ws.asked <- struct{}{}
		if err := within(t, done, "the call's result"); err != nil {
			t.Fatal(err)
		}
		within(t, withdrawn, "the agent to be told the request is withdrawn")
	})
}
