// Package apierror writes the JSON error envelope shared by the gateway and
// the control plane, and carries the request id that every envelope names.
//
// The envelope is {"error","code","request_id","timestamp","docs_url"}
// (docs_url links to the code's row in docs/errors.md) plus optional
// fields (details, or anything a caller adds through Error.Extra);
// codes, and so statuses, come only from package errcode.
// Request ids come from a validated X-Request-Id header or are generated.
// Every envelope carries the Idn-Error header (MarkHeader).
package apierror

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/idnhq/idn/errcode"
)

// MarkHeader names the response header that marks an envelope as written by
// an idn server; its value is the envelope's code. The gateway removes it
// from upstream answers, so a client acts on a code (a claim to show the
// owner, a wait) only when the header is there and names the same code.
const MarkHeader = "Idn-Error"

// Error is an HTTP error answer: a code of package errcode, which gives the
// status, and a message safe to show the caller. Extra fields are merged
// into the envelope. It implements errcode.Error.
type Error struct {
	code       errcode.Code
	Message    string
	RetryAfter time.Duration  // when > 0, sets Retry-After in whole seconds (at least 1)
	Extra      map[string]any // additional envelope fields, e.g. "details"
}

func (e *Error) Error() string { return e.code.String() + ": " + e.Message }

// Code returns the error's code; its Status is the answer's.
func (e *Error) Code() errcode.Code { return e.code }

// Coded returns an Error with the given code and message; an empty message
// means the code's default message.
func Coded(code errcode.Code, message string) *Error {
	if message == "" {
		message = code.Message()
	}
	return &Error{code: code, Message: message}
}

// With returns a copy of e with key set to value in its extra fields.
func (e *Error) With(key string, value any) *Error {
	c := *e
	c.Extra = make(map[string]any, len(e.Extra)+1)
	for k, v := range e.Extra {
		c.Extra[k] = v
	}
	c.Extra[key] = value
	return &c
}

// WithRetryAfter returns a copy of e that sets Retry-After to d.
func (e *Error) WithRetryAfter(d time.Duration) *Error {
	c := *e
	c.RetryAfter = d
	return &c
}

// Write sends e as the JSON envelope. The request id is taken from the
// request's context (see RequestID); it is generated when absent.
func Write(w http.ResponseWriter, r *http.Request, e *Error) {
	id := RequestIDFrom(r.Context())
	if id == "" {
		id = newRequestID()
	}
	body := make(map[string]any, 4+len(e.Extra))
	for k, v := range e.Extra {
		body[k] = v
	}
	body["error"] = e.Message
	body["code"] = e.code.String()
	body["request_id"] = id
	body["timestamp"] = time.Now().UTC().Format(time.RFC3339)
	body["docs_url"] = e.code.DocsURL()
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	h.Set(MarkHeader, e.code.String())
	if e.RetryAfter > 0 {
		secs := int64((e.RetryAfter + time.Second - 1) / time.Second)
		h.Set("Retry-After", strconv.FormatInt(secs, 10))
	}
	w.WriteHeader(e.code.Status())
	_ = json.NewEncoder(w).Encode(body)
}

type requestIDKey struct{}

// RequestID is middleware that gives every request an id: the incoming
// X-Request-Id when it is 1 to 128 characters of [A-Za-z0-9._:-], else a
// fresh random one. The id is echoed in the X-Request-Id response header and
// available to handlers through RequestIDFrom.
func RequestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("X-Request-Id")
		if !validRequestID(id) {
			id = newRequestID()
		}
		w.Header().Set("X-Request-Id", id)
		next.ServeHTTP(w, r.WithContext(WithRequestID(r.Context(), id)))
	})
}

// WithRequestID returns a context carrying id.
func WithRequestID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, requestIDKey{}, id)
}

// RequestIDFrom returns the request id stored by RequestID, or "".
func RequestIDFrom(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

func validRequestID(s string) bool {
	if len(s) == 0 || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9',
			c == '.', c == '_', c == ':', c == '-':
		default:
			return false
		}
	}
	return true
}

func newRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return "req_" + hex.EncodeToString(b[:])
}

// WriteJSON writes v as a JSON answer with the given status, uncached and
// not sniffable.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
