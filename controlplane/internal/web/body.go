package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"time"

	"github.com/idnhq/idn/apierror"
	"github.com/idnhq/idn/errcode"
	"github.com/idnhq/idn/kit/bodybudget"
)

// No buffer is ever sized from Content-Length; buffers grow with the bytes
// that arrive. Every byte read counts against the budget until the body is
// decoded (Decode) or its request ends, whichever comes first. So a handler
// that then waits (an RPC waiting for its gateway's answer) holds no share
// of the budget other tenants need.

// anonymousBodyBytes caps the body of a request whose sender has not been
// authenticated; sign-up and login bodies are a few kilobytes.
const anonymousBodyBytes = 64 << 10

// errBodyCapacity reports that reading on would pass the budget; the
// client is told to retry shortly.
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
	limit  int64 // raised by AdmitBody once the sender is authenticated
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

// MeterBody puts r's body under the budget with the anonymous limit. It
// returns the request to serve and the function that gives its bytes back
// when the request ends.
func (k *Kit) MeterBody(w http.ResponseWriter, r *http.Request) (*http.Request, func()) {
	if r.Body == nil || r.Body == http.NoBody {
		return r, func() {}
	}
	b := &meteredBody{rc: r.Body, w: w, budget: &k.Bodies, limit: min(anonymousBodyBytes, k.MaxBodyBytes)}
	r = r.WithContext(context.WithValue(r.Context(), meteredBodyKey{}, b))
	r.Body = b
	return r, b.giveBack
}

// bodyDecoded gives r's body bytes back to the budget once Decode has
// turned them into values. The buffer that held them is garbage then. What
// a handler keeps of it is bounded by its route, not by this budget. The
// body reads as empty from then on.
func bodyDecoded(r *http.Request) {
	if b, ok := r.Context().Value(meteredBodyKey{}).(*meteredBody); ok {
		r.Body = http.NoBody
		b.giveBack()
	}
}

// AdmitBody lets an authenticated request send up to MaxBodyBytes. It has
// no effect once reading has begun.
func (k *Kit) AdmitBody(r *http.Request) {
	if b, ok := r.Body.(*meteredBody); ok && b.read == 0 {
		b.limit = k.MaxBodyBytes
	}
}

// bodyLimit is what r's body may hold now.
func (k *Kit) bodyLimit(r *http.Request) int64 {
	if b, ok := r.Body.(*meteredBody); ok {
		return b.limit
	}
	return k.MaxBodyBytes
}

// bodyError maps a failed body read to its answer.
func bodyError(err error) *apierror.Error {
	var tooBig *http.MaxBytesError
	switch {
	case errors.Is(err, errBodyCapacity):
		return errBodyCapacityExhausted
	case errors.As(err, &tooBig):
		return ErrBodyTooLarge
	}
	return nil
}

// ReadBody reads the whole body of an authenticated request (AdmitBody
// first) into a buffer that grows as bytes arrive.
func (k *Kit) ReadBody(r *http.Request) ([]byte, *apierror.Error) {
	if r.Body == nil || r.Body == http.NoBody {
		return nil, nil
	}
	k.AdmitBody(r)
	if r.ContentLength > k.bodyLimit(r) {
		return nil, ErrBodyTooLarge
	}
	b, err := io.ReadAll(r.Body)
	if err != nil {
		if e := bodyError(err); e != nil {
			return nil, e
		}
		return nil, Validation("request body could not be read")
	}
	return b, nil
}

// Decode reads a JSON object body into v: Content-Type must be
// application/json, the size is capped (see AdmitBody) and trailing data
// is refused. A declared length over the cap is refused before any byte is
// read.
func (k *Kit) Decode(w http.ResponseWriter, r *http.Request, v any) *apierror.Error {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "application/json" {
		return ErrUnsupportedMedia
	}
	if r.ContentLength > k.bodyLimit(r) {
		return ErrBodyTooLarge
	}
	body := r.Body
	if _, metered := body.(*meteredBody); !metered {
		body = http.MaxBytesReader(w, body, k.MaxBodyBytes)
	}
	defer bodyDecoded(r)
	dec := json.NewDecoder(body)
	if err := dec.Decode(v); err != nil {
		if e := bodyError(err); e != nil {
			return e
		}
		return Validation("request body is not valid JSON: %v", jsonProblem(err))
	}
	if _, err := dec.Token(); err != io.EOF {
		if e := bodyError(err); e != nil {
			return e
		}
		return Validation("request body must be a single JSON object")
	}
	return nil
}

// jsonProblem describes a decoding error without echoing input values.
func jsonProblem(err error) string {
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) {
		return fmt.Sprintf("field %q has the wrong type", typeErr.Field)
	}
	var syn *json.SyntaxError
	if errors.As(err, &syn) {
		return fmt.Sprintf("syntax error at byte %d", syn.Offset)
	}
	return "malformed body"
}
