package engine

import (
	"errors"
	"time"

	"github.com/idnhq/idn/apierror"
	"github.com/idnhq/idn/errcode"
	"github.com/idnhq/idn/mcpproxy/internal/arguments"
)

// Sentinel errors, plain (errors.Is). A ConnectionSource returns the first
// three (wrapped is fine); the Proxy returns the others. ErrorCode gives
// each the code the gateway answers it with.
var (
	ErrConnectionNotFound = errors.New("mcpproxy: connection not found")
	ErrConnectionDisabled = errors.New("mcpproxy: connection disabled")
	ErrNotMCP             = errors.New("mcpproxy: connection is not an MCP connection")
	ErrToolNotFound       = errors.New("mcpproxy: tool not found")
	ErrToolForbidden      = errors.New("mcpproxy: tool not allowed for this subject")
	// ErrToolChanged: the tool's listed definition is not the one pinned
	// for the connection (Config.Pins), or it has none yet.
	ErrToolChanged      = errors.New("mcpproxy: the tool's definition changed since it was approved; it waits for review")
	ErrInvalidArguments = errors.New("mcpproxy: invalid tool arguments")
	ErrRateLimited      = errors.New("mcpproxy: tool-call rate limit exceeded")
	ErrCircuitOpen      = errors.New("mcpproxy: circuit breaker open")
	ErrUpstream         = errors.New("mcpproxy: upstream MCP server failed")
	ErrBadRequest       = errors.New("mcpproxy: bad request")
	// ErrSessionNotFound: the MCP endpoint has no session of that id for
	// this caller and connection (it ended, or another caller owns it).
	ErrSessionNotFound = errors.New("mcpproxy: no such MCP session")
	// ErrSessionsExhausted: the MCP endpoint has MaxSessions open.
	ErrSessionsExhausted = errors.New("mcpproxy: too many MCP sessions open")
)

// ArgumentFailure is one place where call arguments break the tool's
// input_schema. Path is a JSON Pointer (RFC 6901) into the arguments; ""
// is the arguments object itself.
type ArgumentFailure = arguments.Failure

// ArgumentsError reports arguments rejected before any upstream call. It
// matches ErrInvalidArguments with errors.Is.
type ArgumentsError struct {
	Tool     string
	Failures []ArgumentFailure
}

func (e *ArgumentsError) Error() string {
	msg := "mcpproxy: invalid arguments for tool " + e.Tool
	if len(e.Failures) > 0 {
		f := e.Failures[0]
		msg += ": " + f.Path + ": " + f.Message
	}
	return msg
}

// Is makes errors.Is(err, ErrInvalidArguments) true.
func (e *ArgumentsError) Is(target error) bool { return target == ErrInvalidArguments }

// RetryError is a refusal the caller may retry after RetryAfter. It wraps
// ErrRateLimited, ErrCircuitOpen or ErrSessionsExhausted.
type RetryError struct {
	Err        error
	RetryAfter time.Duration
}

func (e *RetryError) Error() string { return e.Err.Error() }
func (e *RetryError) Unwrap() error { return e.Err }

// UpstreamError is an upstream failure. Its message has been scrubbed of
// URLs' queries and known secret values, so it is safe to log and return.
// It wraps ErrUpstream.
type UpstreamError struct {
	ConnectionID string
	Message      string // scrubbed
}

func (e *UpstreamError) Error() string {
	return "mcpproxy: upstream MCP server of connection " + e.ConnectionID + " failed: " + e.Message
}

// Unwrap returns ErrUpstream.
func (e *UpstreamError) Unwrap() error { return ErrUpstream }

// own are the sentinels of this package with the codes the gateway
// answers them with: the one place they get a code. An error that wraps
// one is answered with its own text, which this package keeps free of
// secrets (UpstreamError is scrubbed); any other error is answered with its
// code's default message, so nothing unscrubbed can leak.
var own = [...]struct {
	err  error
	code errcode.Code
}{
	{ErrConnectionNotFound, errcode.ConnectionNotFound},
	{ErrConnectionDisabled, errcode.ConnectionDisabled},
	{ErrNotMCP, errcode.ValidationError},
	{ErrToolNotFound, errcode.MCPToolNotFound},
	{ErrToolForbidden, errcode.MCPToolForbidden},
	{ErrToolChanged, errcode.MCPToolChanged},
	{ErrInvalidArguments, errcode.MCPToolArgumentsInvalid},
	{ErrRateLimited, errcode.MCPToolRateLimited},
	{ErrCircuitOpen, errcode.MCPCircuitOpen},
	{ErrUpstream, errcode.UpstreamError},
	{ErrBadRequest, errcode.ValidationError},
	{ErrSessionNotFound, errcode.MCPSessionNotFound},
	{ErrSessionsExhausted, errcode.MCPSessionsExhausted},
}

// ownCode returns the code of the sentinel of this package err wraps.
func ownCode(err error) (errcode.Code, bool) {
	for _, row := range own {
		if errors.Is(err, row.err) {
			return row.code, true
		}
	}
	return 0, false
}

// ErrorCode returns the code the gateway answers err with: that of the
// sentinel of this package it wraps, else the code it carries (errcode.Of),
// else UPSTREAM_ERROR. The admin discover route uses it.
func ErrorCode(err error) errcode.Code {
	if code, ok := ownCode(err); ok {
		return code
	}
	if code, ok := errcode.Of(err); ok {
		return code
	}
	return errcode.UpstreamError
}

// ToAPIError maps an error to the gateway's error envelope: its code,
// Retry-After and, for invalid arguments, the failing paths under
// "details".
func ToAPIError(err error) *apierror.Error {
	if ae, ok := err.(*apierror.Error); ok { // made to be answered
		return ae
	}
	message := "" // the code's default
	if _, ok := ownCode(err); ok {
		message = err.Error()
	}
	e := apierror.Coded(ErrorCode(err), message)
	if re, ok := errors.AsType[*RetryError](err); ok {
		e.RetryAfter = re.RetryAfter
	}
	if ae, ok := errors.AsType[*ArgumentsError](err); ok {
		e = e.With("details", ae.Failures)
	}
	if f, ok := errors.AsType[envelopeFielder](err); ok {
		for k, v := range f.EnvelopeFields() {
			e = e.With(k, v)
		}
	}
	return e
}

// envelopeFielder is an error of Connection.Hold's that names fields of
// the answer (an action's action_id and expires_at); they also travel in
// a JSON-RPC error's data.
type envelopeFielder interface {
	error
	EnvelopeFields() map[string]any
}
