// Package mcporder keeps an MCP tool call's result behind the progress
// notifications its server sent before it, for a go-sdk client relaying
// them.
//
// The go-sdk client hands a JSON-RPC response to the waiting caller as soon
// as it reads it, while the notifications read just before it wait in a
// queue for the notification handler. A tool that reports progress right
// before it returns thus has its last notifications overtaken by its
// result; a relay that stops forwarding a call's progress when the call
// returns (as it must: clients drop progress after the response) loses
// them. Transport restores the wire order: in the event stream of a call
// whose context carries a Call, it holds back the response event until the
// handler has reported every progress notification for the call's token
// that came before it (Call.Delivered), or until Transport.Wait passes.
package mcporder

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"sync"
	"time"
)

// Call is one tool call whose progress is being relayed.
type Call struct {
	token []byte // the progress token, as JSON

	mu        sync.Mutex
	seen      int           // progress notifications for token read from the wire
	delivered int           // of those, reported by Delivered
	changed   chan struct{} // closed and replaced at every Delivered
}

// NewCall returns the Call of a request sent with progress token token
// (a string or an integer, as MCP allows).
func NewCall(token any) *Call {
	raw, _ := json.Marshal(token)
	return &Call{token: raw, changed: make(chan struct{})}
}

// Delivered reports that the progress handler has relayed one progress
// notification for the call's token.
func (c *Call) Delivered() {
	c.mu.Lock()
	c.delivered++
	close(c.changed)
	c.changed = make(chan struct{})
	c.mu.Unlock()
}

// Reported returns how many progress notifications Delivered reported.
func (c *Call) Reported() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.delivered
}

func (c *Call) sawProgress() {
	c.mu.Lock()
	c.seen++
	c.mu.Unlock()
}

// await waits until every progress notification seen was delivered, ctx is
// done or limit passes.
func (c *Call) await(ctx context.Context, limit time.Duration) {
	timer := time.NewTimer(limit)
	defer timer.Stop()
	for {
		c.mu.Lock()
		done, changed := c.delivered >= c.seen, c.changed
		c.mu.Unlock()
		if done {
			return
		}
		select {
		case <-changed:
		case <-timer.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

type callKey struct{}

// WithCall returns ctx carrying c, for the request of the call.
func WithCall(ctx context.Context, c *Call) context.Context {
	return context.WithValue(ctx, callKey{}, c)
}

// DefaultWait is how long Transport holds a response back when Wait is
// zero: a bound, should a notification never reach the handler.
const DefaultWait = time.Second

// maxEvent bounds the bytes of one event held to be inspected; a longer
// event passes unexamined and ends the ordering of its stream.
const maxEvent = 1 << 20

// Transport is an http.RoundTripper that orders the event stream of every
// request whose context carries a Call; other requests pass unchanged.
type Transport struct {
	// Base sends the requests. Nil means http.DefaultTransport.
	Base http.RoundTripper
	// Wait bounds how long one response is held back. Zero means
	// DefaultWait.
	Wait time.Duration
}

// RoundTrip implements http.RoundTripper.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	base := t.Base
	if base == nil {
		base = http.DefaultTransport
	}
	resp, err := base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	c, ok := req.Context().Value(callKey{}).(*Call)
	if !ok {
		return resp, nil
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "text/event-stream" {
		return resp, nil
	}
	wait := t.Wait
	if wait <= 0 {
		wait = DefaultWait
	}
	resp.Body = &orderedBody{body: resp.Body, call: c, ctx: req.Context(), wait: wait}
	return resp, nil
}

// orderedBody passes an event stream through event by event, holding each
// response event until the call's earlier progress was delivered. Its
// output is its input, byte for byte.
type orderedBody struct {
	body io.ReadCloser
	call *Call
	ctx  context.Context
	wait time.Duration

	pending     []byte // read, not yet split into events
	ready       []byte // to hand out
	err         error  // from body, returned once pending and ready are empty
	passThrough bool   // an event was too long: stop inspecting
}

func (b *orderedBody) Read(p []byte) (int, error) {
	for len(b.ready) == 0 {
		if !b.passThrough {
			if end := eventEnd(b.pending); end > 0 {
				b.ready, b.pending = b.pending[:end:end], b.pending[end:]
				b.inspect(b.ready)
				break
			}
			b.passThrough = len(b.pending) > maxEvent
		}
		if b.passThrough || b.err != nil {
			if len(b.pending) > 0 {
				b.ready, b.pending = b.pending, nil
				break
			}
			if b.err != nil {
				return 0, b.err
			}
		}
		buf := make([]byte, 32<<10)
		n, err := b.body.Read(buf)
		b.pending = append(b.pending, buf[:n]...)
		b.err = err
	}
	n := copy(p, b.ready)
	b.ready = b.ready[n:]
	return n, nil
}

func (b *orderedBody) Close() error { return b.body.Close() }

// eventEnd returns the length of the first complete event in buf (through
// the blank line that ends it), or 0. SSE lines end in CRLF, LF or CR.
func eventEnd(buf []byte) int {
	best := 0
	for _, sep := range [][]byte{[]byte("\n\n"), []byte("\r\n\r\n"), []byte("\r\r"), []byte("\n\r\n"), []byte("\r\n\n")} {
		if i := bytes.Index(buf, sep); i >= 0 && (best == 0 || i+len(sep) < best) {
			best = i + len(sep)
		}
	}
	return best
}

// inspect counts a progress notification for the call's token, and holds
// a response until the progress before it was delivered.
func (b *orderedBody) inspect(event []byte) {
	var data []byte
	for line := range bytes.Lines(event) {
		line = bytes.TrimRight(line, "\r\n")
		if v, ok := bytes.CutPrefix(line, []byte("data:")); ok {
			if len(data) > 0 {
				data = append(data, '\n')
			}
			data = append(data, bytes.TrimPrefix(v, []byte(" "))...)
		}
	}
	var msg struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params struct {
			ProgressToken json.RawMessage `json:"progressToken"`
		} `json:"params"`
	}
	if len(data) == 0 || json.Unmarshal(data, &msg) != nil {
		return
	}
	switch {
	case msg.Method == "notifications/progress" && bytes.Equal(msg.Params.ProgressToken, b.call.token):
		b.call.sawProgress()
	case msg.Method == "" && len(msg.ID) > 0:
		b.call.await(b.ctx, b.wait)
	}
}
