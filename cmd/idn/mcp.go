package main

//lint:file-ignore SA1019 MCP clients of protocol versions up to 2025-11-25 use sampling, roots and logging, which the SDK deprecates for the newer one; relaying them is the point.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/idnhq/idn/apierror"
	"github.com/idnhq/idn/errcode"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idnhq/idn/identity"
	"github.com/idnhq/idn/internal/mcpnotify"
	"github.com/idnhq/idn/internal/mcporder"
	"github.com/idnhq/idn/internal/mcptasks"
	"github.com/idnhq/idn/kit/buildinfo"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// cmdMCP is `idn mcp`: an MCP server on stdin/stdout that forwards every
// request to a gateway's MCP endpoint /mcp/{connection}, each HTTP request
// signed with the identity, so a desktop MCP client can use a gateway with
// no code. It serves until stdin closes. A client of 2025-11-25 or older
// gets a gateway session; one of the stateless revision 2026-07-28 has
// each request forwarded on its own (mcpstateless.go).
func cmdMCP(args []string, e env) error {
	fs := newFlagSet("mcp")
	gatewayURL := fs.String("gateway", "", "gateway base URL, e.g. http://127.0.0.1:38100 (required)")
	connection := fs.String("connection", "", "id of the MCP connection on the gateway (required)")
	subject := fs.String("subject", "", "idn-subject (default: the namespace)")
	ns := fs.String("namespace", "", "identity to use (optional when only one exists)")
	retry := fs.Duration("retry", defaultRetry, "how often to ask the gateway again while the agent's claim awaits approval")
	pos, err := parseInterleaved(fs, args, e)
	if err != nil {
		return err
	}
	if len(pos) != 0 || *gatewayURL == "" || *connection == "" {
		return fmt.Errorf("%w: idn mcp --gateway URL --connection ID [--subject S] [--namespace NS] [--retry 5s]", errUsage)
	}
	base, err := url.Parse(strings.TrimRight(*gatewayURL, "/"))
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" || base.RawQuery != "" {
		return fmt.Errorf("%w: --gateway %q is not an http(s) base URL", errUsage, *gatewayURL)
	}
	id, _, err := loadIdentity(e, *ns)
	if err != nil {
		return err
	}
	b := &bridge{
		endpoint: base.String() + "/mcp/" + url.PathEscape(*connection),
		refusals: &refusals{base: id.Transport(nil, identity.SignOptions{Subject: *subject})},
		calls:    map[string]*mcporder.Call{},
		retry:    *retry,
	}
	b.clientTasks = &clientTasks{endpoint: b.endpoint, post: b.refusals}
	b.stateless = &statelessRelay{endpoint: b.endpoint, sign: id.Transport(nil, identity.SignOptions{Subject: *subject}), retry: *retry}
	// mcporder keeps a call's result behind the progress the gateway sent
	// before it, which would otherwise be dropped. A redirect is never
	// followed: signing the next hop would give whoever answered the 3xx a
	// signed request for any URL it names.
	b.http = &http.Client{
		Transport:     b.clientTasks.transport(&mcporder.Transport{Base: &mcptasks.Tap{Base: b.refusals, Offer: b.tasks.Store, Status: b.status, Progress: b.taskProgress}}),
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return b.serve(context.Background(), e.stdin, e.stdout)
}

// bridge is one stdio MCP session forwarded to one gateway session.
type bridge struct {
	endpoint string
	http     *http.Client
	refusals *refusals

	mu     sync.Mutex
	remote *mcp.ClientSession        // nil until connected, and after it was lost
	local  *mcp.ServerSession        // the stdio session, once connected
	calls  map[string]*mcporder.Call // tools/call in flight by progress token (JSON)
	// caps and version are what the stdio client declared in its
	// initialize: the gateway session is opened with them, so the server
	// behind the gateway offers what it would offer that client.
	caps    *mcp.ClientCapabilities
	version string

	// waiting is true while the gateway refuses the agent until its claim
	// is approved: the bridge stays up, lists no tools and tries again
	// every retry (zero: defaultRetry).
	waiting     bool
	waitReason  string // what the instructions say, also sent as a log message
	retry       time.Duration
	initialized chan struct{} // closed when the stdio client is initialized
	initOnce    sync.Once

	// tasks is what the gateway session offers of tasks (mcptasks.go).
	tasks atomic.Pointer[mcptasks.Offer]
	// taskTokens are the progress tokens of the stdio client's
	// task-augmented calls, whose progress is relayed until their task
	// ends (mcptasks.go).
	taskTokens mcptasks.Tokens
	// clientTasks carries the client side of tasks (mcpclienttasks.go).
	clientTasks *clientTasks
	// stateless carries the requests of the stateless revision
	// (mcpstateless.go).
	stateless *statelessRelay
	// out is stdout, written one whole message at a time.
	out *lockedWriter
}

// defaultRetry is how often idn mcp asks the gateway again while the
// agent's claim awaits approval.
const defaultRetry = 5 * time.Second

var bridgeInfo = &mcp.Implementation{Name: "idn", Version: buildinfo.Version()}

func (b *bridge) serve(ctx context.Context, in io.Reader, out io.Writer) error {
	// Connect first, so the stdio side can offer what the gateway offers
	// and a wrong URL, connection or identity fails at start, not later.
	b.initialized = make(chan struct{})
	b.out = &lockedWriter{w: out}
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	b.clientTasks.ctx, b.clientTasks.out = ctx, b.out
	b.stateless.ctx, b.stateless.out = ctx, b.out
	remote, err := b.session(ctx)
	var (
		caps         *mcp.ServerCapabilities
		instructions string
		newest       = maxRelayedVersion
	)
	switch {
	case err == nil:
		offered := remote.InitializeResult().Capabilities
		caps = &mcp.ServerCapabilities{Tools: offered.Tools, Resources: offered.Resources, Prompts: offered.Prompts}
		if caps.Tools == nil {
			caps.Tools = &mcp.ToolCapabilities{}
		}
		instructions, newest = remote.InitializeResult().Instructions, remote.InitializeResult().ProtocolVersion
		// A client of the stateless revision uses no session, and one
		// that initializes gets a session of its own: this one ends now
		// rather than idle on the gateway.
		b.drop(remote)
	case b.refusals.awaitingApproval():
		// A desktop client shows a server that exits as "connection
		// closed" and must be restarted after the approval: stay up, say
		// why in the instructions, and offer the tools once approved.
		b.waiting = true
		caps = &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: true}, Logging: &mcp.LoggingCapabilities{}}
		instructions = "idn: " + err.Error() + ". " + approvalHint +
			" idn keeps asking the gateway and offers the connection's tools as soon as the claim is approved (a tools/list_changed notification); no restart is needed."
		b.waitReason = instructions
	default:
		return err
	}
	// Requests of a newer protocol than the gateway session's carry its
	// version in _meta, which the gateway would refuse: offer the stdio
	// client no newer one.
	var versions []string
	for _, v := range mcp.SupportedProtocolVersions() {
		if v <= newest {
			versions = append(versions, v)
		}
	}
	server := mcp.NewServer(bridgeInfo, &mcp.ServerOptions{
		Capabilities:              caps,
		Instructions:              instructions,
		SupportedProtocolVersions: versions,
		SubscribeHandler: func(ctx context.Context, r *mcp.SubscribeRequest) error {
			_, err := b.call(ctx, func(cs *mcp.ClientSession) (mcp.Result, error) { return nil, cs.Subscribe(ctx, r.Params) }, true)
			return err
		},
		UnsubscribeHandler: func(ctx context.Context, r *mcp.UnsubscribeRequest) error {
			_, err := b.call(ctx, func(cs *mcp.ClientSession) (mcp.Result, error) { return nil, cs.Unsubscribe(ctx, r.Params) }, true)
			return err
		},
	})
	b.addTaskMethods(server)
	server.AddReceivingMiddleware(b.forward)
	server.AddSendingMiddleware(mcpnotify.Sending)
	var calls sync.WaitGroup
	defer calls.Wait()
	in = &taskCalls{r: bufio.NewReader(in), take: func(line []byte) bool {
		return b.stateless.take(line) || b.clientTasks.fromClient(line) || b.taskCall(ctx, &calls, line)
	}}
	local, err := server.Connect(ctx, &mcp.IOTransport{Reader: io.NopCloser(in), Writer: b.out}, nil)
	if err != nil {
		return err
	}
	b.mu.Lock()
	b.local = local
	waiting := b.waiting
	b.mu.Unlock()
	awaitCtx, stopAwait := context.WithCancel(ctx)
	defer stopAwait()
	if waiting {
		go b.awaitApproval(awaitCtx, local)
	}
	_ = local.Wait()
	stopAwait()
	b.mu.Lock()
	last := b.remote
	b.mu.Unlock()
	if last != nil {
		b.drop(last) // ends the gateway session (DELETE)
	}
	stop() // the stdio client answers nothing more
	b.clientTasks.wg.Wait()
	b.stateless.wg.Wait()
	return nil
}

// approvalHint says where a claim is approved.
const approvalHint = "The namespace owner approves the claim in the control plane's dashboard (Claims) or its API (POST /v1/claims/{id}/approve)."

// awaitApproval tells the stdio client, once it is initialized, why it
// waits (a log message, which clients that do not show instructions
// show), asks the gateway again every retry until it opens a session, and
// then tells the client (a log message) that its tool list changed. When
// the owner rejects the claim instead, it says so and stops asking.
func (b *bridge) awaitApproval(ctx context.Context, local *mcp.ServerSession) {
	select {
	case <-b.initialized:
	case <-ctx.Done():
		return
	}
	_ = mcpnotify.Send(ctx, local, "notifications/message", &mcp.LoggingMessageParams{Level: "warning", Logger: "idn", Data: b.waitReason})
	every := b.retry
	if every <= 0 {
		every = defaultRetry
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if _, err := b.session(ctx); err == nil {
			break
		}
		if b.refusals.lastErrcode() == errcode.AuthClaimRejected {
			// The owner answered: asking again would only repeat it.
			_ = mcpnotify.Send(ctx, local, "notifications/message", &mcp.LoggingMessageParams{Level: "error", Logger: "idn",
				Data: "idn: " + b.refusals.lastRefusal() + ". idn stops asking the gateway; once the owner approves the rejected claim, restart idn mcp."})
			return
		}
		select {
		case <-t.C:
		case <-ctx.Done():
			return
		}
	}
	b.mu.Lock()
	b.waiting = false
	b.mu.Unlock()
	_ = mcpnotify.Send(ctx, local, "notifications/message", &mcp.LoggingMessageParams{Level: "info", Logger: "idn",
		Data: "idn: the claim is approved; the connection's tools are available"})
	_ = mcpnotify.Send(ctx, local, "notifications/tools/list_changed", &mcp.ToolListChangedParams{})
}

// isWaiting reports whether the agent's claim still awaits approval.
func (b *bridge) isWaiting() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.waiting
}

// session returns the gateway session, opening one when there is none.
func (b *bridge) session(ctx context.Context) (*mcp.ClientSession, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.remote != nil {
		return b.remote, nil
	}
	// The SDK's client asks for the stateless revision first, which the
	// gateway now serves; the bridge relays sessions (tasks, the
	// session's own stream), so it asks for the newest session version.
	opts := &mcp.ClientSessionOptions{ProtocolVersion: maxRelayedVersion}
	if b.version != "" && b.version <= maxRelayedVersion {
		opts.ProtocolVersion = b.version
	}
	cs, err := b.client().Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint:   b.endpoint,
		HTTPClient: b.http,
		// The session's own stream carries what the server behind the
		// gateway says and asks outside a call.
	}, opts)
	if err != nil {
		if why := b.refusals.lastRefusal(); why != "" {
			return nil, fmt.Errorf("connecting to %s: %s", b.endpoint, why)
		}
		return nil, fmt.Errorf("connecting to %s: %w", b.endpoint, err)
	}
	b.remote = cs
	return cs, nil
}

// drop ends and forgets a gateway session: one that was lost, or the one
// opened at start to learn what the gateway offers. It closes cs after
// unlocking: Close waits for the session's handlers, which take the lock
// to relay what the gateway says.
func (b *bridge) drop(cs *mcp.ClientSession) {
	b.mu.Lock()
	mine := b.remote == cs
	if mine {
		b.remote = nil
	}
	b.mu.Unlock()
	if mine {
		_ = cs.Close()
	}
}

// progress relays the gateway's progress notifications of the stdio
// client's tools/call in flight to it. The gateway session serves this
// one client, so their tokens are the client's own; a task's progress is
// written as the tap reads it (taskProgress), and progress under any
// other token is not the client's.
func (b *bridge) progress(ctx context.Context, req *mcp.ProgressNotificationClientRequest) {
	key := tokenKey(req.Params.ProgressToken)
	b.mu.Lock()
	local, call := b.local, b.calls[key]
	b.mu.Unlock()
	if call == nil {
		return
	}
	if local != nil && !b.taskTokens.Tracks(json.RawMessage(key)) {
		_ = local.NotifyProgress(ctx, req.Params)
	}
	call.Delivered()
}

func tokenKey(token any) string {
	raw, _ := json.Marshal(token)
	return string(raw)
}

// forward sends the requests the gateway answers to it; initialize, ping
// and notifications stay with the local server. Cancellation follows ctx:
// the stdio client's notifications/cancelled cancels it, and the go-sdk
// client then sends its own to the gateway.
func (b *bridge) forward(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method == "notifications/initialized" {
			b.initOnce.Do(func() { close(b.initialized) })
		}
		var op func(*mcp.ClientSession) (mcp.Result, error)
		// A tools/call that met a closed connection may have run; one that
		// met a lost session (404) never reached the gateway's session.
		retryClosed := true
		var relayed *mcporder.Call // a call whose progress is relayed
		switch r := req.(type) {
		case *mcp.ServerRequest[*mcp.InitializeParams]:
			return b.initialize(ctx, method, req, r.Params, next)
		case *mcp.CompleteRequest:
			op = func(cs *mcp.ClientSession) (mcp.Result, error) { return cs.Complete(ctx, r.Params) }
		case *mcp.ServerRequest[*mcp.SetLoggingLevelParams]:
			if _, err := b.call(ctx, func(cs *mcp.ClientSession) (mcp.Result, error) { return nil, cs.SetLoggingLevel(ctx, r.Params) }, true); err != nil && !b.isWaiting() {
				return nil, err
			}
			return next(ctx, method, req)
		case *mcp.ListToolsRequest:
			if b.relaysTasks() {
				params := r.Params
				if params == nil {
					params = &mcp.ListToolsParams{}
				}
				return b.listTools(ctx, params)
			}
			res, err := b.call(ctx, func(cs *mcp.ClientSession) (mcp.Result, error) { return cs.ListTools(ctx, r.Params) }, true)
			if err != nil && b.isWaiting() {
				// Until approved. The SDK writes cacheScope whatever it holds,
				// and "" is no scope: the protocol's default is "public".
				return &mcp.ListToolsResult{Tools: []*mcp.Tool{}, Cacheable: mcp.Cacheable{CacheScope: "public"}}, nil
			}
			return res, err
		case *mcp.CallToolRequest:
			retryClosed = false
			params := &mcp.CallToolParams{Meta: r.Params.Meta, Name: r.Params.Name, Arguments: r.Params.Arguments}
			if r.Params.Arguments == nil {
				params.Arguments = map[string]any{}
			}
			if token := r.Params.GetProgressToken(); token != nil {
				key, call := tokenKey(token), mcporder.NewCall(token)
				b.mu.Lock()
				b.calls[key] = call
				b.mu.Unlock()
				defer func() {
					b.mu.Lock()
					delete(b.calls, key)
					b.mu.Unlock()
				}()
				ctx, relayed = mcporder.WithCall(ctx, call), call
			}
			op = func(cs *mcp.ClientSession) (mcp.Result, error) { return cs.CallTool(ctx, params) }
		case *mcp.ListResourcesRequest:
			op = func(cs *mcp.ClientSession) (mcp.Result, error) { return cs.ListResources(ctx, r.Params) }
		case *mcp.ListResourceTemplatesRequest:
			op = func(cs *mcp.ClientSession) (mcp.Result, error) { return cs.ListResourceTemplates(ctx, r.Params) }
		case *mcp.ReadResourceRequest:
			op = func(cs *mcp.ClientSession) (mcp.Result, error) { return cs.ReadResource(ctx, r.Params) }
		case *mcp.ListPromptsRequest:
			op = func(cs *mcp.ClientSession) (mcp.Result, error) { return cs.ListPrompts(ctx, r.Params) }
		case *mcp.GetPromptRequest:
			op = func(cs *mcp.ClientSession) (mcp.Result, error) { return cs.GetPrompt(ctx, r.Params) }
		default:
			return next(ctx, method, req)
		}
		var res mcp.Result
		var err error
		if _, isCall := req.(*mcp.CallToolRequest); isCall {
			res, err = b.callHeld(ctx, req.GetSession(), op)
		} else {
			res, err = b.call(ctx, op, retryClosed)
		}
		if relayed != nil && relayed.Reported() > 0 && ctx.Err() == nil {
			settle(ctx, req.GetSession())
		}
		return res, err
	}
}

// settleWait bounds how long a call's result waits for the stdio client
// to answer the ping that settles its progress.
const settleWait = mcporder.DefaultWait

// settle returns once the stdio client has handled what it was sent
// before, or after settleWait. The bridge writes a call's progress before
// its result, but a client may read both at once and handle them out of
// order: the TypeScript SDK runs notification handlers in a later
// microtask, answers a response at once, and drops a call's progress
// handler with its response, so the progress read with the result was
// lost. It answers a ping only after the handlers queued before it ran,
// so the result, written after the answer, comes after the progress in
// every client that handles messages in the order it reads them.
func settle(ctx context.Context, session mcp.Session) {
	ss, ok := session.(*mcp.ServerSession)
	if !ok {
		return
	}
	ctx, cancel := detached(ctx)
	defer cancel()
	ctx, stop := context.WithTimeout(ctx, settleWait)
	defer stop()
	_ = ss.Ping(ctx, nil)
}

// call runs op on the gateway session. A session the gateway no longer
// knows (it expired while idle, or the gateway restarted) is replaced and
// op retried once.
func (b *bridge) call(ctx context.Context, op func(*mcp.ClientSession) (mcp.Result, error), retryClosed bool) (mcp.Result, error) {
	for try := 0; ; try++ {
		cs, err := b.session(ctx)
		if err != nil {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "idn: " + err.Error()}
		}
		res, err := op(cs)
		if err == nil {
			return res, nil
		}
		var je *jsonrpc.Error
		if errors.As(err, &je) && !errors.Is(err, mcp.ErrSessionMissing) {
			return nil, je // the gateway's answer, code and data intact
		}
		lost := errors.Is(err, mcp.ErrSessionMissing) || (retryClosed && errors.Is(err, mcp.ErrConnectionClosed))
		if lost {
			b.drop(cs)
		}
		if !lost || try > 0 || ctx.Err() != nil {
			return nil, fmt.Errorf("idn: gateway: %w", err)
		}
	}
}

// refusals remembers the gateway's last error envelope or redirect, so that
// a failure to connect says why (a claim awaiting approval, an unknown
// connection, a redirect) where the MCP client would only say "Forbidden".
type refusals struct {
	base     http.RoundTripper
	mu       sync.Mutex
	last     string
	lastCode string // the code of the last error envelope
}

// awaitingApproval reports whether the last refusal ends once the agent's
// claim is approved: the claim awaits approval, the gateway has yet to
// load it, or the owner revoked it (and may approve it again). A rejected
// claim is not waited for: the owner has answered.
func (r *refusals) awaitingApproval() bool {
	code := r.lastErrcode()
	return code == errcode.AuthClaimRequired || code == errcode.AuthClaimsUnavailable || code == errcode.AuthClaimRevoked
}

// lastErrcode is the code of the last error envelope (zero when none).
func (r *refusals) lastErrcode() errcode.Code {
	r.mu.Lock()
	defer r.mu.Unlock()
	code, _ := errcode.Parse(r.lastCode)
	return code
}

func (r *refusals) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := r.base.RoundTrip(req)
	if err == nil && resp.Header.Get("Location") != "" && resp.StatusCode >= 300 && resp.StatusCode < 400 {
		r.mu.Lock()
		r.last = fmt.Sprintf("the gateway answered %s, a redirect to %q, which idn does not follow with a signed request", resp.Status, resp.Header.Get("Location"))
		r.mu.Unlock()
	}
	if err != nil || resp.StatusCode < 400 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		return resp, err
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	var envelope struct {
		Code        string `json:"code"`
		Message     string `json:"error"`
		ClaimID     string `json:"claim_id"`
		ClaimStatus string `json:"claim_status"`
		RequestID   string `json:"request_id"`
	}
	// Only the gateway's own envelopes, which it marks, are read: an
	// upstream's body could name another key's claim.
	if err == nil && json.Unmarshal(body, &envelope) == nil && envelope.Code != "" && resp.Header.Get(apierror.MarkHeader) == envelope.Code {
		why := envelope.Code + ": " + envelope.Message
		if envelope.ClaimID != "" {
			why += " (claim " + envelope.ClaimID + ", " + envelope.ClaimStatus + ")"
		}
		if envelope.RequestID != "" {
			// What the gateway's operator finds the refusal under in its log.
			why += " [request " + envelope.RequestID + "]"
		}
		r.mu.Lock()
		r.last, r.lastCode = why, envelope.Code
		r.mu.Unlock()
	}
	return resp, nil
}

func (r *refusals) lastRefusal() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last
}
