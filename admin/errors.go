package admin

import (
	"errors"
	"log/slog"
	"net/http"

	"github.com/idnhq/idn/credvault"
	"github.com/idnhq/idn/internal/apierror"
)

// HTTPError may be implemented by errors returned from Config.GuardCheck
// and Config.Discover to choose the answer: the error's message, with the
// given status and stable code, is written as the error envelope. Other
// errors from GuardCheck answer 403 ADMIN_FORBIDDEN; other errors from
// Discover answer 502 UPSTREAM_ERROR.
type HTTPError interface {
	error
	StatusCode() int
	ErrorCode() string
}

// errorRule maps errors matching match to an envelope.
type errorRule struct {
	match func(error) bool
	build func(error) *apierror.Error
}

func is(target error) func(error) bool { return func(err error) bool { return errors.Is(err, target) } }

func as[T error](err error) (T, bool) {
	var t T
	ok := errors.As(err, &t)
	return t, ok
}

func isType[T error](err error) bool { _, ok := as[T](err); return ok }

// errorTable is the one place where store and request errors become API
// codes and statuses.
var errorTable = []errorRule{
	{isType[*apierror.Error], func(err error) *apierror.Error { e, _ := as[*apierror.Error](err); return e }},
	{isType[HTTPError], func(err error) *apierror.Error {
		e, _ := as[HTTPError](err)
		return apierror.New(e.StatusCode(), e.ErrorCode(), e.Error())
	}},
	{isType[*http.MaxBytesError], func(error) *apierror.Error {
		return apierror.New(http.StatusRequestEntityTooLarge, "REQUEST_BODY_TOO_LARGE", "request body is too large")
	}},
	{isType[*credvault.ValidationError], func(err error) *apierror.Error {
		e, _ := as[*credvault.ValidationError](err)
		return apierror.New(http.StatusBadRequest, "VALIDATION_ERROR", e.Field+": "+e.Message).With("field", e.Field)
	}},
	{isType[*credvault.VariableInUseError], func(err error) *apierror.Error {
		e, _ := as[*credvault.VariableInUseError](err)
		return apierror.New(http.StatusConflict, "VARIABLE_IN_USE", "credential variable "+e.Key+" is still referenced; delete with ?force=true to remove it anyway").
			With("connections", e.Connections)
	}},
	{is(credvault.ErrNotFound), func(error) *apierror.Error {
		return apierror.New(http.StatusNotFound, "CONNECTION_NOT_FOUND", "connection not found")
	}},
	{is(credvault.ErrVariableNotFound), func(error) *apierror.Error {
		return apierror.New(http.StatusNotFound, "VARIABLE_NOT_FOUND", "credential variable not found")
	}},
	{is(credvault.ErrExists), func(error) *apierror.Error {
		return apierror.New(http.StatusConflict, "CONNECTION_EXISTS", "a connection with this id already exists")
	}},
	{is(credvault.ErrCredentialUnresolved), func(error) *apierror.Error {
		return apierror.New(http.StatusInternalServerError, "CREDENTIAL_UNRESOLVED", "the connection's stored credential cannot be resolved")
	}},
}

// writeError answers err through errorTable; anything unmatched is a 500
// whose detail goes to the log only.
func writeError(w http.ResponseWriter, r *http.Request, log *slog.Logger, err error) {
	for _, rule := range errorTable {
		if rule.match(err) {
			apierror.Write(w, r, rule.build(err))
			return
		}
	}
	log.Error("admin: request failed", "method", r.Method, "path", r.URL.Path, "request_id", apierror.RequestIDFrom(r.Context()), "err", err)
	apierror.Write(w, r, apierror.New(http.StatusInternalServerError, "INTERNAL_ERROR", "internal error"))
}

func badRequest(format string) *apierror.Error {
	return apierror.New(http.StatusBadRequest, "VALIDATION_ERROR", format)
}
