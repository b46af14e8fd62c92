package mirror

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/idnhq/idn/mcpproxy/internal/wire"
)

// toldBound bounds how long an ask the server withdrew waits for the
// agent to have been told.
const toldBound = time.Second

// Told follows the notifications/cancelled an agent session's server
// writes on the session's event streams (Watch). When a request the
// agent is asked during a call ends with its context, the SDK's server
// tells the agent in a goroutine of its own; the call's result, written
// next, would close the call's stream before it, and the agent would
// never be told. Ask waits for it (Await). Its zero value is ready.
type Told struct {
	mu      sync.Mutex
	n       uint64
	changed chan struct{} // closed and replaced at each
}

// Watch returns w counting what the server tells the agent through it.
func (t *Told) Watch(w http.ResponseWriter) http.ResponseWriter {
	return &toldWriter{ResponseWriter: w, t: t}
}

// mark returns the count so far and a channel closed at the next.
func (t *Told) mark() (uint64, <-chan struct{}) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.changed == nil {
		t.changed = make(chan struct{})
	}
	return t.n, t.changed
}

// Await waits until the server has told the agent of a cancellation
// after the count before (from mark), or toldBound passed.
func (t *Told) Await(before uint64) {
	timer := time.NewTimer(toldBound)
	defer timer.Stop()
	for {
		n, changed := t.mark()
		if n > before {
			return
		}
		select {
		case <-changed:
		case <-timer.C:
			return
		}
	}
}

func (t *Told) add() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.n++
	if t.changed != nil {
		close(t.changed)
		t.changed = nil
	}
}

// toldWriter is an event stream's writer that counts the cancellations
// written: the SDK writes each event whole, in one Write.
type toldWriter struct {
	http.ResponseWriter
	t *Told
}

var cancelledMethod = []byte(`"method":"notifications/cancelled"`)

func (w *toldWriter) Write(p []byte) (int, error) {
	n, err := w.ResponseWriter.Write(p)
	if err == nil && bytes.Contains(p, cancelledMethod) {
		w.t.add()
	}
	return n, err
}

func (w *toldWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *toldWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// awaitTold waits, after a request to the agent ended because the server
// withdrew it (ctx's cause is wire.ErrWithdrawn), until the agent was
// told.
func awaitTold(ctx context.Context, t *Told, before uint64) {
	if t != nil && ctx.Err() != nil && errors.Is(context.Cause(ctx), wire.ErrWithdrawn) {
		t.Await(before)
	}
}
