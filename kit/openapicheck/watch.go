package openapicheck

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
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
// connections (WebSocket upgrades), CORS preflights and requests whose
// client went away before any answer not at all.
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
		if tw.hijacked || (tw.status == 0 && tw.body.Len() == 0 && r.Context().Err() != nil) {
			// Hijacked, or the client went away before anything was
			// answered: there is no response to hold to the document.
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

// WatchClient returns a copy of c (nil: a zero http.Client) whose every
// response is held to the OpenAPI document the answering server serves at
// GET /openapi.json (fetched once per host), as Watch holds a handler's:
// for servers out of reach of Watch, such as a built binary. Drifts fail t
// when the test ends; event streams are checked up to their headers.
func WatchClient(t testing.TB, c *http.Client) *http.Client {
	t.Helper()
	w := &clientWatch{docs: map[string]*Document{}, seen: map[string]bool{}}
	out := &http.Client{}
	if c != nil {
		*out = *c
	}
	w.base = out.Transport
	if w.base == nil {
		w.base = http.DefaultTransport
	}
	out.Transport = w
	t.Cleanup(func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		for _, d := range w.drifts {
			t.Errorf("response differs from the served OpenAPI document: %s", d)
		}
	})
	return out
}

type clientWatch struct {
	base   http.RoundTripper
	mu     sync.Mutex
	docs   map[string]*Document // by scheme://host
	drifts []string
	seen   map[string]bool
}

func (w *clientWatch) RoundTrip(r *http.Request) (*http.Response, error) {
	res, err := w.base.RoundTrip(r)
	if err != nil || r.URL.Path == "/openapi.json" {
		return res, err
	}
	doc, derr := w.document(r)
	if derr != nil {
		w.report(r, res.StatusCode, derr)
		return res, nil
	}
	var body []byte
	mt, _, _ := mime.ParseMediaType(res.Header.Get("Content-Type"))
	if r.Method != http.MethodHead && mt != "text/event-stream" {
		body, err = io.ReadAll(io.LimitReader(res.Body, watchLimit+1))
		res.Body.Close()
		res.Body = io.NopCloser(bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		if len(body) > watchLimit {
			body = nil
		}
	}
	cerr := doc.CheckResponse(r.Method, r.URL.Path, res.StatusCode, res.Header, body)
	if cerr != nil && body == nil && errors.Is(cerr, errNoBody) {
		cerr = nil
	}
	if cerr != nil {
		w.report(r, res.StatusCode, cerr)
	}
	return res, nil
}

// document fetches and parses the document of r's server, once.
func (w *clientWatch) document(r *http.Request) (*Document, error) {
	origin := r.URL.Scheme + "://" + r.URL.Host
	w.mu.Lock()
	doc := w.docs[origin]
	w.mu.Unlock()
	if doc != nil {
		return doc, nil
	}
	req, err := http.NewRequestWithContext(r.Context(), http.MethodGet, origin+"/openapi.json", nil)
	if err != nil {
		return nil, err
	}
	res, err := w.base.RoundTrip(req)
	if err != nil {
		return nil, fmt.Errorf("openapicheck: fetching the document: %w", err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil || res.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("openapicheck: GET /openapi.json answered %d (%v)", res.StatusCode, err)
	}
	if doc, err = Parse(raw); err != nil {
		return nil, err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.docs[origin] = doc
	return doc, nil
}

func (w *clientWatch) report(r *http.Request, status int, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if key := fmt.Sprint(r.Method, r.URL.Path, status); !w.seen[key] {
		w.seen[key] = true
		w.drifts = append(w.drifts, fmt.Sprintf("%s %s: %v", r.Method, r.URL.Path, err))
	}
}
