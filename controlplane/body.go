package controlplane

import (
	"context"
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/idnhq/idn/errcode"
	"github.com/idnhq/idn/internal/apierror"
	"github.com/idnhq/idn/internal/bodybudget"
)

// Request bodies are read only once their sender is known: a signed
// request after its signature (which covers content-digest), nonce and,
// where the route needs one, service API key have passed; an owner route
// after the session has. Everything else, sign-up and login included, may
// send at most anonymousBodyBytes. No buffer is ever sized from
// Content-Length; buffers grow with the bytes that arrive, and every byte
// read counts against Config.MaxInflightBodyBytes until the body is
// decoded (decodeJSON) or its request ends, whichever comes first: a
// handler that then waits (an RPC waiting for its gateway's answer) holds
// no share of the budget other tenants need.

// DefaultMaxInflightBodyBytes is the zero Config's cap on the request body
// bytes held at once across all requests in flight.
const DefaultMaxInflightBodyBytes = 64 << 20

// anonymousBodyBytes caps the body of a request whose sender has not been
// authenticated; sign-up and login bodies are a few kilobytes.
const anonymousBodyBytes = 64 << 10

// errBodyCapacity reports that reading on would pass
// Config.MaxInflightBodyBytes; the client is told to retry shortly.
var (
	errBodyCapacity          = errors.New("controlplane: in-flight request bodies at capacity")
	errBodyCapacityExhausted = apierror.Coded(errcode.RequestBodyCapacityExhausted, "").WithRetryAfter(time.Second)
)

// meteredBody is every request's body as the handlers see it. It yields at
// most limit bytes and charges each byte read to the budget until the
// request ends, so the bodies held at once never pass the budget whatever
// clients declare.
type meteredBody struct {
	rc     io.ReadCloser
	w      http.ResponseWriter
	budget *bodybudget.Budget
	limit  int64 // raised by admitBody once the sender is authenticated
	read   int64 // bytes read, counted against limit
	held   int64 // bytes read and not yet given back to the budget
	err    error
}

func (b *meteredBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	// One byte past the limit tells a body of exactly limit bytes from a
	// longer one.
	if room := b.limit + 1 - b.read; int64(len(p)) > room {
		p = p[:room]
	}
	n, err := b.rc.Read(p)
	if n == 0 {
		return 0, err
	}
	if !b.budget.Take(int64(n)) {
		b.err = errBodyCapacity
		return 0, b.err
	}
	b.read += int64(n)
	b.held += int64(n)
	if b.read > b.limit {
		// The rest of the body is not wanted: do not keep the connection
		// for another request behind it.
		b.w.Header().Set("Connection", "close")
		b.err = &http.MaxBytesError{Limit: b.limit}
		return 0, b.err
	}
	return n, err
}

func (b *meteredBody) Close() error { return b.rc.Close() }

// giveBack returns the bytes read so far to the budget.
func (b *meteredBody) giveBack() {
	b.budget.Give(b.held)
	b.held = 0
}

type meteredBodyKey struct{}

// meterBody puts r's body under the budget with the anonymous limit. It
// returns the request to serve, which lets bodyDecoded find the metered
// body, and the function that gives its bytes back when the request ends.
func (s *Server) meterBody(w http.ResponseWriter, r *http.Request) (*http.Request, func()) {
	if r.Body == nil || r.Body == http.NoBody {
		return r, func() {}
	}
	b := &meteredBody{rc: r.Body, w: w, budget: &s.bodies, limit: min(anonymousBodyBytes, s.cfg.MaxBodyBytes)}
	r = r.WithContext(context.WithValue(r.Context(), meteredBodyKey{}, b))
	r.Body = b
	return r, b.giveBack
}

// bodyDecoded gives r's body bytes back to the budget once decodeJSON has
// turned them into values: the buffer that held them is garbage, and what
// a handler keeps of it is bounded by its route (RPCs by the per-owner
// cap), not by this budget. The body reads as empty from then on.
func (s *Server) bodyDecoded(r *http.Request) {
	if b, ok := r.Context().Value(meteredBodyKey{}).(*meteredBody); ok {
		r.Body = http.NoBody
		b.giveBack()
	}
}

// admitBody lets an authenticated request send up to MaxBodyBytes. It has
// no effect once reading has begun.
func (s *Server) admitBody(r *http.Request) {
	if b, ok := r.Body.(*meteredBody); ok && b.read == 0 {
		b.limit = s.cfg.MaxBodyBytes
	}
}

// bodyLimit is what r's body may hold now.
func (s *Server) bodyLimit(r *http.Request) int64 {
	if b, ok := r.Body.(*meteredBody); ok {
		return b.limit
	}
	return s.cfg.MaxBodyBytes
}

// bodyError maps a failed body read to its answer.
func bodyError(err error) *apierror.Error {
	var tooBig *http.MaxBytesError
	switch {
	case errors.Is(err, errBodyCapacity):
		return errBodyCapacityExhausted
	case errors.As(err, &tooBig):
		return errBodyTooLarge
	}
	return nil
}
