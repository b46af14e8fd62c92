package upstream

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"mime"
	"net/http"
	"time"

	"github.com/idnhq/idn/mcpproxy/internal/wire"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A server of MCP 2025-11-25 may end a request's event stream before the
// answer and have the client poll for the rest: it sends event ids (and
// may set a reconnection time with retry), closes the stream, and expects
// a GET with Last-Event-ID. The relay resumes such a stream as the SDK's
// client does, within bounds of its own.

const (
	// maxResumes bounds the resumptions in a row that bring no new event.
	maxResumes = 5
	// resumeDelay is the wait before resuming when the server set none.
	resumeDelay = time.Second
	// maxResumeDelay bounds the wait a server's retry field can set.
	maxResumeDelay = 30 * time.Second
)

// resumer reopens one request's event stream.
type resumer struct {
	s      Session
	method string
	tries  int    // resumptions since the last new event
	after  string // the last event id when tries last counted from 0
	body   io.ReadCloser
}

// reopen waits for the server's reconnection time and resumes the stream
// events read, after its last event; events then reads the resumed one.
// A stream without event ids cannot be resumed: its end is the error.
func (r *resumer) reopen(ctx context.Context, events *wire.EventReader) error {
	last := events.LastID()
	if last == "" {
		return fmt.Errorf("%s: the upstream's event stream ended before the result", r.method)
	}
	if last != r.after {
		r.after, r.tries = last, 0
	}
	if r.tries++; r.tries > maxResumes {
		return fmt.Errorf("%s: the upstream's event stream ended %d times without a new event", r.method, maxResumes)
	}
	delay := resumeDelay
	if retry := events.Retry(); retry > 0 {
		delay = min(retry, maxResumeDelay)
	}
	timer := time.NewTimer(delay)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-timer.C:
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.s.Endpoint(), nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Last-Event-ID", last)
	if r.s.ID != "" {
		req.Header.Set("Mcp-Session-Id", r.s.ID)
	}
	if r.s.Protocol != "" {
		req.Header.Set("Mcp-Protocol-Version", r.s.Protocol)
	}
	resp, err := r.s.Client.Do(req)
	if err != nil {
		return fmt.Errorf("%s: resuming the upstream's event stream: %w", r.method, err)
	}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	switch {
	case resp.StatusCode == http.StatusNotFound && r.s.ID != "":
		resp.Body.Close()
		return fmt.Errorf("%s: resuming the upstream's event stream: %w", r.method, mcp.ErrSessionMissing)
	case resp.StatusCode != http.StatusOK || mt != "text/event-stream":
		resp.Body.Close()
		return fmt.Errorf("%s: resuming the upstream's event stream: upstream answered %s (%s)", r.method, resp.Status, mt)
	}
	r.close()
	r.body = resp.Body
	events.Resume(bufio.NewReader(resp.Body))
	return nil
}

// close closes the resumed stream being read, if any.
func (r *resumer) close() {
	if r.body != nil {
		r.body.Close()
		r.body = nil
	}
}
