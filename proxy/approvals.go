package proxy

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/idnhq/idn/apierror"
	"github.com/idnhq/idn/approval"
	"github.com/idnhq/idn/credvault"
	"github.com/idnhq/idn/errcode"
	"github.com/idnhq/idn/identity"
)

// Approvals holds the calls that match a connection's approval_routes (or
// its caller's subject's, in approval_subjects) until the owner approves
// each; *approval.Gate implements it. Its error
// is the caller's answer (see actionRefusal).
type Approvals interface {
	Admit(ctx context.Context, c *approval.Call) error
}

var _ Approvals = (*approval.Gate)(nil)

// holdForApproval runs an admitted /proxy call through the connection's
// approval policy, for the caller's subject. A connection without rules
// costs two length checks. A matching call without an Approvals, or on
// the unsigned bypass (held by every subject's rules), is refused: no one
// could approve it for a known agent.
func (h *Handler) holdForApproval(r *http.Request, rt route, res *credvault.Resolved, caller *identity.Caller, body []byte) error {
	var subject string
	if caller != nil {
		subject = caller.Subject
	}
	if !res.Approvals().HoldsRoute(subject, r.Method, rt.rest) {
		return nil
	}
	c := res.Connection
	if h.cfg.Approvals == nil || caller == nil {
		h.logger.ErrorContext(r.Context(), "approval route matched without an approval desk or a signed caller",
			"request_id", apierror.RequestIDFrom(r.Context()), "connection_id", c.ID)
		return newError(errcode.AuthActionSubmitFailed, nil)
	}
	err := h.cfg.Approvals.Admit(r.Context(), &approval.Call{
		Connection: c.ID, Service: c.ServiceSlug(),
		Namespace: caller.Namespace, PublicKey: caller.PublicKey, AgentName: caller.Name, Subject: caller.Subject,
		Method: r.Method, Path: rt.rest, Query: r.URL.RawQuery, Arguments: body,
	})
	if err == nil {
		return nil
	}
	e := actionRefusal(err)
	if e.code == errcode.AuthActionSubmitFailed || e.code == errcode.DatabaseUnavailable {
		h.logger.WarnContext(r.Context(), "action request not filed", "request_id", apierror.RequestIDFrom(r.Context()),
			"connection_id", c.ID, "code", e.code.String(), "error", err)
	}
	return e
}

// actionRefusal is the answer to a call the approval gate held: the
// request's id and expiry while it waits, the denial, why none was filed,
// or that the hold store failed. The arguments are never part of it.
func actionRefusal(err error) *Error {
	if req, ok := errors.AsType[*approval.RequiredError](err); ok {
		e := newError(errcode.AuthActionApprovalRequired, err)
		e.extra = map[string]any{"action_id": req.ActionID, "expires_at": req.ExpiresAt.UTC().Format(time.RFC3339)}
		return e
	}
	if den, ok := errors.AsType[*approval.DeniedError](err); ok {
		e := newError(errcode.AuthActionDenied, err)
		e.extra = map[string]any{"action_id": den.ActionID}
		return e
	}
	if errors.Is(err, approval.ErrStore) {
		return newError(errcode.DatabaseUnavailable, err)
	}
	if errors.Is(err, approval.ErrDuplicateKey) {
		e := newError(errcode.ValidationError, err)
		e.Message = "the JSON body repeats an object member, so what the owner would approve is ambiguous"
		return e
	}
	return newError(errcode.AuthActionSubmitFailed, err)
}
