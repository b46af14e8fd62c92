package proxy

import (
	"context"
	"errors"
	"net"
	"net/http"
	"syscall"
	"time"

	"github.com/idnhq/idn/claimcache"
	"github.com/idnhq/idn/httpsig"
	"github.com/idnhq/idn/internal/apierror"
	"github.com/idnhq/idn/replay"
)

// Error codes of the gateway runtime that are not authentication codes.
const (
	CodeConnectionNotFound   = "CONNECTION_NOT_FOUND"
	CodeConnectionDisabled   = "CONNECTION_DISABLED"
	CodeProtocolMismatch     = "CONNECTION_PROTOCOL_MISMATCH"
	CodeRotationRequired     = "ROTATION_REQUIRED"
	CodeCredentialUnresolved = "CREDENTIAL_UNRESOLVED"
	CodeUpstreamError        = "UPSTREAM_ERROR"
	CodeUpstreamTimeout      = "UPSTREAM_TIMEOUT"
	CodeBodyTooLarge         = "REQUEST_BODY_TOO_LARGE"
	CodeBodyCapacity         = "REQUEST_BODY_CAPACITY_EXHAUSTED"
	CodeNonceStoreFull       = "NONCE_STORE_FULL"
	CodeValidation           = "VALIDATION_ERROR"
	CodeNotFound             = "NOT_FOUND"
	CodeAuthForbidden        = "AUTH_FORBIDDEN"
)

// Error is a refusal by the gateway: an HTTP status, a stable code and a
// message safe to show the caller. Errors returned by Handler.Authorize are
// of this type.
type Error struct {
	Status  int
	Code    string
	Message string
	extra   map[string]any
	err     error
}

func (e *Error) Error() string { return "proxy: " + e.Code + ": " + e.Message }

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.err }

// StatusCode returns the HTTP status to answer with.
func (e *Error) StatusCode() int { return e.Status }

// ErrorCode returns the stable machine code.
func (e *Error) ErrorCode() string { return e.Code }

func (e *Error) api() *apierror.Error {
	return &apierror.Error{Status: e.Status, Code: e.Code, Message: e.Message, Extra: e.extra}
}

// statusOf is the one table from codes to HTTP status.
var statusOf = map[string]int{
	"AUTH_HEADERS_INVALID":           http.StatusForbidden,
	"AUTH_SIGNATURE_INVALID":         http.StatusForbidden,
	"AUTH_SIGNED_COMPONENTS_INVALID": http.StatusForbidden,
	"AUTH_IDENTITY_INVALID":          http.StatusForbidden,
	"AUTH_NONCE_INVALID":             http.StatusForbidden,
	"AUTH_REPLAY_DETECTED":           http.StatusForbidden,
	"AUTH_CLAIMS_UNAVAILABLE":        http.StatusServiceUnavailable,
	"AUTH_CLAIMS_LOOKUP_FAILED":      http.StatusInternalServerError,
	"AUTH_CLAIM_REQUIRED":            http.StatusForbidden,
	"AUTH_CLAIM_SUBMIT_RATE_LIMITED": http.StatusTooManyRequests,
	CodeAuthForbidden:                http.StatusForbidden,
	CodeRotationRequired:             http.StatusForbidden,
	CodeConnectionNotFound:           http.StatusNotFound,
	CodeConnectionDisabled:           http.StatusForbidden,
	CodeProtocolMismatch:             http.StatusBadRequest,
	CodeCredentialUnresolved:         http.StatusInternalServerError,
	CodeUpstreamError:                http.StatusBadGateway,
	CodeUpstreamTimeout:              http.StatusGatewayTimeout,
	CodeBodyTooLarge:                 http.StatusRequestEntityTooLarge,
	CodeBodyCapacity:                 http.StatusServiceUnavailable,
	CodeNonceStoreFull:               http.StatusServiceUnavailable,
	CodeValidation:                   http.StatusBadRequest,
	CodeNotFound:                     http.StatusNotFound,
}

// messages are the caller-facing summaries per code; details stay in logs.
var messages = map[string]string{
	"AUTH_HEADERS_INVALID":           "signed headers are missing, duplicated or malformed",
	"AUTH_SIGNATURE_INVALID":         "request signature verification failed",
	"AUTH_SIGNED_COMPONENTS_INVALID": "signed components do not match the idn-rfc9421-v1 profile",
	"AUTH_IDENTITY_INVALID":          "identity headers or agent certificate are missing or invalid",
	"AUTH_NONCE_INVALID":             "signature nonce is missing or malformed",
	"AUTH_REPLAY_DETECTED":           "nonce already used; retry with a new nonce",
	"AUTH_CLAIMS_UNAVAILABLE":        "approved claims are not available; try again shortly",
	"AUTH_CLAIMS_LOOKUP_FAILED":      "approved-claims lookup failed",
	"AUTH_CLAIM_REQUIRED":            "this agent is not approved for this service; the namespace owner must approve the claim",
	"AUTH_CLAIM_SUBMIT_RATE_LIMITED": "too many authorization requests for this namespace; try again later",
	CodeAuthForbidden:                "request refused",
	CodeRotationRequired:             "the connection's credential is overdue for rotation",
	CodeConnectionNotFound:           "no such connection",
	CodeConnectionDisabled:           "the connection is disabled",
	CodeProtocolMismatch:             "the connection does not serve this protocol",
	CodeCredentialUnresolved:         "the connection's credential references a missing variable",
	CodeUpstreamError:                "the upstream could not be reached",
	CodeUpstreamTimeout:              "the upstream did not answer in time",
	CodeBodyTooLarge:                 "request body is too large",
	CodeBodyCapacity:                 "the gateway is holding as many request bodies as it may; try again shortly",
	CodeNonceStoreFull:               "the gateway is at its replay-protection capacity; try again shortly",
	CodeValidation:                   "invalid request",
	CodeNotFound:                     "not found",
}

func newError(code string, cause error) *Error {
	status, ok := statusOf[code]
	if !ok {
		status, code = http.StatusForbidden, CodeAuthForbidden
	}
	return &Error{Status: status, Code: code, Message: messages[code], err: cause}
}

// classify turns any error of the pipeline into an *Error.
func classify(err error) *Error {
	var e *Error
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &e):
		return e
	case errors.Is(err, errBodyBudget):
		return newError(CodeBodyCapacity, err)
	case errors.Is(err, httpsig.ErrBodyTooLarge), errors.As(err, &tooLarge):
		return newError(CodeBodyTooLarge, err)
	case httpsig.Code(err) != "":
		return newError(httpsig.Code(err), err)
	case errors.Is(err, replay.ErrReplay):
		return newError("AUTH_REPLAY_DETECTED", err)
	case errors.Is(err, replay.ErrFull):
		return newError(CodeNonceStoreFull, err)
	case errors.Is(err, claimcache.ErrUnavailable):
		return newError("AUTH_CLAIMS_UNAVAILABLE", err)
	case errors.Is(err, claimcache.ErrNotApproved):
		return newError("AUTH_CLAIM_REQUIRED", err)
	case errors.Is(err, claimcache.ErrRateLimited):
		return newError("AUTH_CLAIM_SUBMIT_RATE_LIMITED", err)
	case errors.Is(err, claimcache.ErrLookupFailed):
		return newError("AUTH_CLAIMS_LOOKUP_FAILED", err)
	}
	return newError(CodeAuthForbidden, err)
}

// upstreamClass names the kind of a transport failure for metrics, and
// whether it was a timeout.
func upstreamClass(err error) (class string, timeout bool) {
	var ne net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return "timeout", true
	case errors.Is(err, context.Canceled):
		return "canceled", false
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connect", false
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return "reset", false
	}
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Op == "dial" {
		return "connect", false
	}
	return "other", false
}

// retryAfter is sent with 503 answers that clear by themselves.
const retryAfter = 2 * time.Second
