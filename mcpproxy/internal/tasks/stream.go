package tasks

import (
	"net/http"
	"sync"
)

// Stream is the ResponseWriter of an agent session's own event stream
// (GET), served by the SDK's server, which writes whole events, each in
// one Write; Send writes an event of its own between them (the SDK's
// server cannot send a method it does not know).
type Stream struct {
	http.ResponseWriter
	mu     sync.Mutex
	open   bool // the SDK accepted the stream
	closed bool // the SDK's handler returned
}

func (w *Stream) WriteHeader(code int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.open = code == http.StatusOK
	w.ResponseWriter.WriteHeader(code)
}

func (w *Stream) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.ResponseWriter.Write(b)
}

func (w *Stream) Flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}

func (w *Stream) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Send writes msg as one event; false when the stream is not open.
func (w *Stream) Send(msg []byte) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.open || w.closed {
		return false
	}
	if _, err := w.ResponseWriter.Write(append(append([]byte("event: message\ndata: "), msg...), "\n\n"...)); err != nil {
		return false
	}
	_ = http.NewResponseController(w.ResponseWriter).Flush()
	return true
}

// Close ends Send's writes: the SDK's handler returned.
func (w *Stream) Close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closed = true
}
