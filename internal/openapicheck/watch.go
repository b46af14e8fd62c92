package openapicheck

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"mime"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// watchLimit bounds the body Watch keeps of one response; a longer body
// (a proxied download) is checked for status and media type only.
const watchLimit = 4 << 20

// Watch returns h with every response it answers held to the OpenAPI
// document h itself serves at GET /openapi.json: a response that differs
// (CheckResponse) fails t when the test ends. Call it before starting the
// server, so the server's own cleanup (which waits for its handlers) runs
// first. Event streams are checked up to their headers, hijacked
// connections (WebSocket upgrades) and CORS preflights not at all.
func Watch(t testing.TB, h http.Handler) http.Handler {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/openapi.json", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("openapicheck: GET /openapi.json answered %d", rec.Code)
	}
	doc, err := Parse(rec.Body.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu     sync.Mutex
		drifts []string
		seen   = map[string]bool{}
	)
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, d := range drifts {
			t.Errorf("response differs from the served OpenAPI document: %s", d)
		}
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
			// A CORS preflight: answered for any path, listed by no document.
			h.ServeHTTP(w, r)
			return
		}
		tw := &teeWriter{ResponseWriter: w}
		h.ServeHTTP(tw, r)
		if tw.hijacked {
			return
		}
		status := tw.status
		if status == 0 {
			status = http.StatusOK
		}
		body := tw.body.Bytes()
		if tw.streaming || tw.overflow {
			// Only the status and media type can be held to the document.
			body = nil
		}
		if r.Method == http.MethodHead {
			body = nil
		}
		err := doc.CheckResponse(r.Method, r.URL.Path, status, w.Header(), body)
		if err != nil && (tw.streaming || tw.overflow || r.Method == http.MethodHead) && errors.Is(err, errNoBody) {
			err = nil
		}
		if err == nil {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if key := fmt.Sprint(r.Method, r.URL.Path, status); !seen[key] {
			seen[key] = true
			drifts = append(drifts, fmt.Sprintf("%s %s: %v", r.Method, r.URL.Path, err))
		}
	})
}

// teeWriter passes a response through and keeps a copy of its status and
// body.
type teeWriter struct {
	http.ResponseWriter
	status    int
	body      bytes.Buffer
	overflow  bool
	streaming bool
	hijacked  bool
}

func (w *teeWriter) WriteHeader(code int) {
	if w.status == 0 && code >= 200 {
		w.status = code
		mt, _, _ := mime.ParseMediaType(w.Header().Get("Content-Type"))
		w.streaming = mt == "text/event-stream"
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *teeWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if !w.streaming && !w.overflow {
		if w.body.Len()+len(p) > watchLimit {
			w.overflow = true
		} else {
			w.body.Write(p)
		}
	}
	return w.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach Flush and deadlines.
func (w *teeWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *teeWriter) Flush() {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}

func (w *teeWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	w.hijacked = true
	return http.NewResponseController(w.ResponseWriter).Hijack()
}
