package admin

import (
	"errors"
	"log/slog"
	"net/http"

	"github.com/idnhq/idn/apierror"
	"github.com/idnhq/idn/credvault"
	"github.com/idnhq/idn/errcode"
)

// errorRule maps errors matching match to an envelope.
type errorRule struct {
	match func(error) bool
	build func(error) *apierror.Error
}

func is(target error) func(error) bool { return func(err error) bool { return errors.Is(err, target) } }

func isType[T error](err error) bool { _, ok := errors.AsType[T](err); return ok }

// answer answers with code and its default message: the vault's errors
// name ids and keys.
func answer(code errcode.Code) func(error) *apierror.Error {
	return func(error) *apierror.Error { return apierror.Coded(code, "") }
}

// withDefaultMessage answers an error that carries a code with that code's
// default message: the error's own text may name ids and paths.
func withDefaultMessage(err error) *apierror.Error {
	code, _ := errcode.Of(err)
	return apierror.Coded(code, "")
}

// errorTable is the one place where the errors of the admin API become
// answers; the first matching row wins. An error from Config.GuardCheck or
// Config.Discover that carries a code (errcode.Error) is answered with
// that code and the code's message: a Go error's text is written for logs
// ("proxy: AUTH_IDENTITY_INVALID: …"), not for the people reading the
// answer. Anything unmatched is a 500.
var errorTable = []errorRule{
	{isType[*apierror.Error], func(err error) *apierror.Error { e, _ := errors.AsType[*apierror.Error](err); return e }},
	{isType[*http.MaxBytesError], func(error) *apierror.Error { return apierror.Coded(errcode.RequestBodyTooLarge, "") }},
	{isType[*credvault.ValidationError], func(err error) *apierror.Error {
		e, _ := errors.AsType[*credvault.ValidationError](err)
		return apierror.Coded(errcode.ValidationError, e.Field+": "+e.Message).With("field", e.Field)
	}},
	{isType[*credvault.VariableInUseError], func(err error) *apierror.Error {
		e, _ := errors.AsType[*credvault.VariableInUseError](err)
		return apierror.Coded(errcode.VariableInUse, "credential variable "+e.Key+" is still referenced; delete with ?force=true to remove it anyway").
			With("connections", e.Connections)
	}},
	{is(credvault.ErrNotFound), answer(errcode.ConnectionNotFound)},
	{is(credvault.ErrVariableNotFound), answer(errcode.VariableNotFound)},
	{is(credvault.ErrAccountNotFound), func(error) *apierror.Error {
		return apierror.Coded(errcode.NotFound, "no account is connected to this connection for this subject")
	}},
	{is(credvault.ErrExists), answer(errcode.ConnectionExists)},
	{is(credvault.ErrCredentialUnresolved), answer(errcode.CredentialUnresolved)},
	{is(credvault.ErrStoreUnavailable), answer(errcode.DatabaseUnavailable)},
	{isType[errcode.Error], withDefaultMessage},
}

// answered reports whether errorTable has a row for err.
func answered(err error) bool {
	for _, rule := range errorTable {
		if rule.match(err) {
			return true
		}
	}
	return false
}

// problem is the answer errorTable gives err; ok is false, and the answer
// a 500, when no row matches.
func problem(err error) (e *apierror.Error, ok bool) {
	for _, rule := range errorTable {
		if rule.match(err) {
			return rule.build(err), true
		}
	}
	return apierror.Coded(errcode.InternalError, ""), false
}

// Problem is how the admin API answers an error of its operations: the
// code (which gives the status), a message safe to show the caller, and
// the envelope's further members (details, field, …). An error it does
// not know is INTERNAL_ERROR; its text is for the caller's log only.
func Problem(err error) (code errcode.Code, message string, extra map[string]any) {
	e, _ := problem(err)
	return e.Code(), e.Message, e.Extra
}

// writeError answers err through errorTable; anything unmatched is a 500
// whose detail goes to the log only.
func writeError(w http.ResponseWriter, r *http.Request, log *slog.Logger, err error) {
	e, ok := problem(err)
	if !ok {
		log.Error("admin: request failed", "method", r.Method, "path", r.URL.Path, "request_id", apierror.RequestIDFrom(r.Context()), "err", err)
	}
	apierror.Write(w, r, e)
}

func badRequest(message string) *apierror.Error {
	return apierror.Coded(errcode.ValidationError, message)
}
