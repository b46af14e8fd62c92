package proxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"syscall"
	"time"

	"github.com/idnhq/idn/apierror"
	"github.com/idnhq/idn/claimcache"
	"github.com/idnhq/idn/errcode"
	"github.com/idnhq/idn/identity"
	"github.com/idnhq/idn/replay"
)

// Error is a refusal by the gateway: a code, which gives the HTTP status,
// and a message safe to show the caller. Errors returned by
// Handler.Authorize are of this type; it implements errcode.Error.
type Error struct {
	code    errcode.Code
	Message string
	extra   map[string]any
	err     error
	retry   time.Duration // Retry-After of a 503; zero means retryAfter
}

func (e *Error) Error() string { return "proxy: " + e.code.String() + ": " + e.Message }

// Code returns the stable code; its Status is the answer's HTTP status.
func (e *Error) Code() errcode.Code { return e.code }

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.err }

func (e *Error) api() *apierror.Error {
	ae := apierror.Coded(e.code, e.Message)
	ae.Extra = e.extra
	return ae
}

// newError returns the refusal with code and its default message; the
// cause's detail stays in logs.
func newError(code errcode.Code, cause error) *Error {
	return &Error{code: code, Message: code.Message(), err: cause}
}

// classify turns any error of the pipeline into an *Error.
func classify(err error) *Error {
	if e, ok := errors.AsType[*Error](err); ok {
		return e
	}
	return newError(codeOf(err), err)
}

// codeOf is the one place where the errors of the pipeline get their code:
// the gateway's own and the claims cache's, then the verification errors
// (identity.AuthCode), then those that carry a code. Anything else is
// refused with AUTH_FORBIDDEN.
func codeOf(err error) errcode.Code {
	switch {
	case errors.Is(err, errBodyBudget):
		return errcode.RequestBodyCapacityExhausted
	case errors.Is(err, replay.ErrFull):
		return errcode.NonceStoreFull
	case errors.Is(err, replay.ErrClosed), errors.Is(err, replay.ErrUnavailable):
		return errcode.NonceStoreUnavailable
	case errors.Is(err, claimcache.ErrUnavailable):
		return errcode.AuthClaimsUnavailable
	case errors.Is(err, claimcache.ErrRevoked):
		return errcode.AuthClaimRevoked
	case errors.Is(err, claimcache.ErrRejected):
		return errcode.AuthClaimRejected
	case errors.Is(err, claimcache.ErrNotApproved):
		return errcode.AuthClaimRequired
	case errors.Is(err, claimcache.ErrLookupFailed):
		return errcode.AuthClaimsLookupFailed
	case errors.Is(err, claimcache.ErrRateLimited):
		return errcode.AuthClaimSubmitRateLimited
	}
	if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
		return errcode.RequestBodyTooLarge
	}
	if code, ok := identity.AuthCode(err); ok {
		return code
	}
	if code, ok := errcode.Of(err); ok {
		return code
	}
	return errcode.AuthForbidden
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

// callerCauses are the control plane's refusals of a claim submission
// whose cause is the caller's own (its namespace, the pending claims of its
// namespace or address): the caller is answered with the control plane's
// code and a message that says what it can do; the format takes the
// caller's namespace. Any other refusal is the gateway's or the control
// plane's to fix, and answered AUTH_CLAIM_SUBMIT_FAILED.
var callerCauses = map[errcode.Code]string{
	errcode.NamespaceNotFound:        "namespace %q is not registered with the control plane, so no claim can be filed for this agent; register the namespace, then retry",
	errcode.NamespaceDeactivated:     "namespace %q is deactivated on the control plane, so no claim can be filed for its agents",
	errcode.NamespaceInvalid:         "namespace %q is not a valid namespace for the control plane, so no claim can be filed for this agent",
	errcode.PendingLimitReached:      "namespace %q has too many pending claims for this service, so this agent's claim was not filed; its owner must approve or reject some first",
	errcode.AgentPendingLimitReached: "this agent's address has too many pending claims for namespace %q and this service, so its claim was not filed; the owner must approve or reject some first",
}

// submitRefusal is the refusal of a caller whose claim could not be filed
// (err from ClaimSubmitter.Submit): the gateway's own rate limit, a cause
// of the caller's (callerCauses), or AUTH_CLAIM_SUBMIT_FAILED with what
// the control plane answered, if it answered.
func submitRefusal(err error, namespace string) *Error {
	if errors.Is(err, claimcache.ErrRateLimited) {
		return newError(errcode.AuthClaimSubmitRateLimited, err)
	}
	se, answered := errors.AsType[*claimcache.StatusError](err)
	if answered {
		if code, ok := errcode.Parse(se.Code); ok {
			if format, ok := callerCauses[code]; ok {
				e := newError(code, err)
				e.Message = fmt.Sprintf(format, namespace)
				return e
			}
		}
	}
	e := newError(errcode.AuthClaimSubmitFailed, err)
	if answered {
		details := map[string]any{"control_plane_status": se.StatusCode}
		if se.Code != "" {
			details["control_plane_code"] = se.Code
		}
		e.extra = map[string]any{"details": details}
	}
	return e
}
