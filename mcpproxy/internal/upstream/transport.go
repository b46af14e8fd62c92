// Package upstream is the HTTP layer under the requests to an upstream MCP
// server: a RoundTripper that retries only what is safe to repeat and
// turns a forgotten session's 400 into the transport's 404, the Trace of
// the attempts one MCP operation made, Call, the tools/call exchange run
// without the SDK's client on its session, and Withdrawals, which keeps
// the SDK's client from answering a request the server withdrew.
package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idnhq/idn/kit/tracing"
)

// RetryPolicy bounds the retries of one upstream HTTP exchange.
type RetryPolicy struct {
	MaxRetries     int           // extra attempts after the first; zero or less: none
	BaseDelay      time.Duration // first backoff, doubled per retry, full jitter
	MaxDelay       time.Duration // cap of one backoff
	AttemptTimeout time.Duration // until response headers; 0 = none
}

// Trace records what the HTTP layer saw during one logical MCP operation
// (a discovery or a tool call), so the caller can classify the failure and
// tests can count attempts. It travels in the operation's context.
type Trace struct {
	mu       sync.Mutex
	attempts int
	status   int // status of the last response, 0 when none
}

type traceKey struct{}

// WithTrace returns ctx carrying a new Trace, which the Transport fills.
func WithTrace(ctx context.Context) (context.Context, *Trace) {
	t := &Trace{}
	return context.WithValue(ctx, traceKey{}, t), t
}

func (t *Trace) record(status int) {
	if t == nil {
		return
	}
	t.mu.Lock()
	t.attempts++
	t.status = status
	t.mu.Unlock()
}

// Snapshot returns the attempts made so far and the status of the last
// response (0 when none).
func (t *Trace) Snapshot() (attempts, status int) {
	if t == nil {
		return 0, 0
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.attempts, t.status
}

// Transport sits between the upstream requests (the SDK's streamable
// client transport and the proxy's own tools/call exchanges) and the
// caller's credential-injecting RoundTripper. It observes every HTTP attempt
// and retries, with jittered exponential backoff, only what is safe to
// repeat: network timeouts and 429/502/503/504 answers. A tools/call whose
// body was completely handed to the network before a timeout is never
// retried, because the server may have run it.
type Transport struct {
	Base   func() http.RoundTripper // the connection's current credential transport
	Policy RetryPolicy
	Tracer tracing.Tracer // writes traceparent on every attempt
	// Observe, when set, is told of every attempt.
	Observe func(req *http.Request, resp *http.Response, err error, start time.Time)
}

func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.roundTrip(req)
	if err != nil {
		return nil, err
	}
	return sessionLost(req, resp), nil
}

func (t *Transport) roundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodPost || req.Body == nil {
		if t.Tracer.On() {
			req = req.Clone(req.Context())
			t.Tracer.Inject(req.Context(), req.Header)
		}
		start := time.Now()
		resp, err := t.Base().RoundTrip(req)
		if t.Observe != nil {
			t.Observe(req, resp, err, start)
		}
		if resp != nil {
			traceFrom(req.Context()).record(resp.StatusCode)
		}
		return resp, err
	}
	body, err := io.ReadAll(req.Body)
	_ = req.Body.Close()
	if err != nil {
		return nil, err
	}
	// A request of the stateless revision names its method in a header
	// the server holds to the body: no need to read the body for it.
	method := req.Header.Get("Mcp-Method")
	if method == "" {
		method = Method(body)
	}
	nonIdempotent := method == "tools/call"
	tr := traceFrom(req.Context())
	for attempt := 0; ; attempt++ {
		resp, timedOut, sent, err := t.attempt(req, body)
		last := attempt >= t.Policy.MaxRetries || req.Context().Err() != nil
		if err != nil {
			tr.record(0)
			if last || !timedOut || (nonIdempotent && sent) {
				return nil, err
			}
		} else {
			tr.record(resp.StatusCode)
			if last || !RetryableStatus(resp.StatusCode) {
				return resp, nil
			}
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
			_ = resp.Body.Close()
		}
		if !sleepCtx(req.Context(), t.backoff(attempt)) {
			return nil, req.Context().Err()
		}
	}
}

// attempt sends one copy of req. timedOut reports a network timeout (or the
// attempt timeout); sent reports that the request may have reached the
// server: net/http wrote it whole, or a transport that tells nothing of
// its writing took it.
func (t *Transport) attempt(req *http.Request, body []byte) (resp *http.Response, timedOut, sent bool, err error) {
	// The body is one the transport knows to be in memory, so that it
	// writes the request's head and body at once.
	var traced, wrote atomic.Bool
	ctx, cancel := context.WithCancel(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
		GetConn: func(string) { traced.Store(true) },
		WroteRequest: func(w httptrace.WroteRequestInfo) {
			if w.Err == nil {
				wrote.Store(true)
			}
		},
	}))
	var fired atomic.Bool
	var timer *time.Timer
	if t.Policy.AttemptTimeout > 0 {
		timer = time.AfterFunc(t.Policy.AttemptTimeout, func() { fired.Store(true); cancel() })
	}
	r := req.Clone(ctx)
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	r.ContentLength = int64(len(body))
	t.Tracer.Inject(r.Context(), r.Header)
	start := time.Now()
	resp, err = t.Base().RoundTrip(r)
	if t.Observe != nil {
		defer func() { t.Observe(req, resp, err, start) }()
	}
	if timer != nil && !timer.Stop() && err == nil {
		// The timer fired after the headers arrived; the body is already
		// cancelled, so treat the attempt as timed out.
		_ = resp.Body.Close()
		resp, err = nil, context.DeadlineExceeded
	}
	if err != nil {
		cancel()
		var ne net.Error
		timedOut = fired.Load() || (errors.As(err, &ne) && ne.Timeout() && req.Context().Err() == nil)
		return nil, timedOut, wrote.Load() || !traced.Load(), err
	}
	resp.Body = &cancelBody{ReadCloser: resp.Body, cancel: cancel}
	return resp, false, true, nil
}

func (t *Transport) backoff(attempt int) time.Duration {
	d := t.Policy.BaseDelay << attempt
	if d <= 0 || d > t.Policy.MaxDelay {
		d = t.Policy.MaxDelay
	}
	if d <= 0 {
		return 0
	}
	// Full jitter: spread simultaneous retries over the whole window.
	return time.Duration(rand.Int64N(int64(d)) + 1)
}

// sessionLostPeek bounds how much of a 400 answer is read to recognise a
// lost session.
const sessionLostPeek = 4 << 10

// sessionLost turns an upstream's 400 that says the request's session id is
// unknown into the 404 the transport specifies for a session the server
// forgot. Servers built on the pattern of the TypeScript and Python SDK
// examples answer a restarted server's old session id with 400 "Bad
// Request: No valid session ID provided"; the go-sdk client would take that
// for a broken request (or, with a JSON-RPC body, for the server's verdict)
// instead of re-initializing. Any other answer is returned unchanged.
func sessionLost(req *http.Request, resp *http.Response) *http.Response {
	if resp.StatusCode != http.StatusBadRequest || req.Header.Get("Mcp-Session-Id") == "" {
		return resp
	}
	head, err := io.ReadAll(io.LimitReader(resp.Body, sessionLostPeek))
	if err != nil || !saysSessionUnknown(head) {
		resp.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(head), resp.Body), resp.Body}
		return resp
	}
	_ = resp.Body.Close()
	const msg = "mcpproxy: upstream no longer knows the session"
	return &http.Response{
		Status:        "404 Not Found",
		StatusCode:    http.StatusNotFound,
		Proto:         resp.Proto,
		ProtoMajor:    resp.ProtoMajor,
		ProtoMinor:    resp.ProtoMinor,
		Header:        http.Header{"Content-Type": {"text/plain; charset=utf-8"}},
		Body:          io.NopCloser(strings.NewReader(msg)),
		ContentLength: int64(len(msg)),
		Request:       resp.Request,
	}
}

// saysSessionUnknown reports whether an error body (plain text or a
// JSON-RPC error) is about an invalid, unknown or expired session.
func saysSessionUnknown(body []byte) bool {
	s := strings.ToLower(string(body))
	if !strings.Contains(s, "session") {
		return false
	}
	for _, w := range []string{"valid", "not found", "unknown", "expired", "no such", "missing"} {
		if strings.Contains(s, w) {
			return true
		}
	}
	return false
}

// RetryableStatus reports whether an upstream answer with this status may
// be retried: 429, 502, 503 and 504.
func RetryableStatus(code int) bool {
	switch code {
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

func traceFrom(ctx context.Context) *Trace {
	t, _ := ctx.Value(traceKey{}).(*Trace)
	return t
}

// Method returns the method of a single JSON-RPC message, or "".
func Method(body []byte) string {
	var m struct {
		Method string `json:"method"`
	}
	if json.Unmarshal(body, &m) != nil {
		return ""
	}
	return m.Method
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// cancelBody releases the attempt's context when the response is closed.
type cancelBody struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b *cancelBody) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}
