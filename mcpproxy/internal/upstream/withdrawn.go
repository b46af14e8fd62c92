package upstream

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/idnhq/idn/internal/mcptasks"
	"github.com/idnhq/idn/mcpproxy/internal/wire"
)

// maxWithdrawn bounds the withdrawn request ids a Withdrawals keeps: past
// it, the oldest is forgotten.
const maxWithdrawn = 64

// Withdrawals returns base (nil: http.DefaultTransport) for the SDK's
// client of an upstream session, which answers even a request the server
// withdrew: its client ends the handler's context (and so the agent is
// told), then posts the error that made. Each notifications/cancelled
// read from the session's event streams is noted, and an answer to a
// request it named is not sent: the server is answered 202 Accepted
// without it, as it would have been.
func Withdrawals(base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	w := &withdrawals{base: base, ids: map[string]bool{}}
	return w
}

type withdrawals struct {
	base http.RoundTripper

	mu    sync.Mutex
	ids   map[string]bool
	order []string
}

func (w *withdrawals) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodPost && req.Body != nil && w.any() {
		body, err := io.ReadAll(req.Body)
		_ = req.Body.Close()
		if err != nil {
			return nil, err
		}
		if w.answersWithdrawn(body) {
			return &http.Response{
				Status: "202 Accepted", StatusCode: http.StatusAccepted, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
				Header: http.Header{}, Body: http.NoBody, Request: req,
			}, nil
		}
		req = req.Clone(req.Context())
		req.Body = io.NopCloser(bytes.NewReader(body))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	}
	resp, err := w.base.RoundTrip(req)
	if err != nil || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		return resp, err
	}
	resp.Body = mcptasks.Divert(resp.Body, func(data []byte) bool {
		if bytes.Contains(data, []byte(`"notifications/cancelled"`)) {
			w.note(data)
		}
		return false
	})
	return resp, nil
}

func (w *withdrawals) any() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.ids) > 0
}

// note keeps the id a notifications/cancelled, data, names.
func (w *withdrawals) note(data []byte) {
	var msg struct {
		Method string `json:"method"`
		Params struct {
			RequestID json.RawMessage `json:"requestId"`
		} `json:"params"`
	}
	if json.Unmarshal(data, &msg) != nil || msg.Method != "notifications/cancelled" {
		return
	}
	key, ok := wire.IDKey(msg.Params.RequestID)
	if !ok {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ids[key] {
		return
	}
	if len(w.order) == maxWithdrawn {
		delete(w.ids, w.order[0])
		w.order = w.order[1:]
	}
	w.ids[key] = true
	w.order = append(w.order, key)
}

// answersWithdrawn reports whether body is an answer to a withdrawn
// request, and forgets the request when it is.
func (w *withdrawals) answersWithdrawn(body []byte) bool {
	var msg wire.Incoming
	if json.Unmarshal(body, &msg) != nil || msg.Method != "" || msg.Result == nil && msg.Error == nil {
		return false
	}
	key, ok := wire.IDKey(msg.ID)
	if !ok {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.ids[key] {
		return false
	}
	delete(w.ids, key)
	for i, k := range w.order {
		if k == key {
			w.order = append(w.order[:i], w.order[i+1:]...)
			break
		}
	}
	return true
}
