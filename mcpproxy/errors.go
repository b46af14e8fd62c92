package mcpproxy

import (
	"errors"
	"time"

	"github.com/idnhq/idn/errcode"
	"github.com/idnhq/idn/internal/apierror"
)

// Sentinel errors. A ConnectionSource returns the first three (wrapped is
// fine); the Proxy returns the others. Each carries the code the gateway
// answers it with (errcode.Of), which gives the status.
var (
	ErrConnectionNotFound = errcode.New(errcode.ConnectionNotFound, "mcpproxy: connection not found")
	ErrConnectionDisabled = errcode.New(errcode.ConnectionDisabled, "mcpproxy: connection disabled")
	ErrNotMCP             = errcode.New(errcode.ValidationError, "mcpproxy: connection is not an MCP connection")
	ErrToolNotFound       = errcode.New(errcode.MCPToolNotFound, "mcpproxy: tool not found")
	ErrToolForbidden      = errcode.New(errcode.MCPToolForbidden, "mcpproxy: tool not allowed for this subject")
	ErrInvalidArguments   = errcode.New(errcode.MCPToolArgumentsInvalid, "mcpproxy: invalid tool arguments")
	ErrRateLimited        = errcode.New(errcode.MCPToolRateLimited, "mcpproxy: tool-call rate limit exceeded")
	ErrCircuitOpen        = errcode.New(errcode.MCPCircuitOpen, "mcpproxy: circuit breaker open")
	ErrUpstream           = errcode.New(errcode.UpstreamError, "mcpproxy: upstream MCP server failed")
	ErrBadRequest         = errcode.New(errcode.ValidationError, "mcpproxy: bad request")
	// ErrSessionNotFound: the MCP endpoint has no session of that id for
	// this caller and connection (it ended, or another caller owns it).
	ErrSessionNotFound = errcode.New(errcode.MCPSessionNotFound, "mcpproxy: no such MCP session")
	// ErrSessionsExhausted: the MCP endpoint has MaxSessions open.
	ErrSessionsExhausted = errcode.New(errcode.MCPSessionsExhausted, "mcpproxy: too many MCP sessions open")
)

// ArgumentFailure is one place where call arguments break the tool's
// input_schema. Path is a JSON Pointer (RFC 6901) into the arguments; ""
// is the arguments object itself.
type ArgumentFailure struct {
	Path    string `json:"path"`
	Message string `json:"message"`
}

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

// Code returns MCP_TOOL_ARGUMENTS_INVALID.
func (e *ArgumentsError) Code() errcode.Code { return errcode.MCPToolArgumentsInvalid }

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

// own are the sentinels of this package. An error that wraps one is
// answered with its own text, which this package keeps free of secrets
// (UpstreamError is scrubbed); any other error is answered with its code's
// default message, so nothing unscrubbed can leak.
var own = [...]error{
	ErrConnectionNotFound, ErrConnectionDisabled, ErrNotMCP, ErrToolNotFound, ErrToolForbidden,
	ErrInvalidArguments, ErrRateLimited, ErrCircuitOpen, ErrUpstream, ErrBadRequest,
	ErrSessionNotFound, ErrSessionsExhausted,
}

// ErrorCode returns the code the gateway answers err with: the code err
// carries (errcode.Of), else UPSTREAM_ERROR. The admin discover route
// uses it.
func ErrorCode(err error) errcode.Code {
	if code, ok := errcode.Of(err); ok {
		return code
	}
	return errcode.UpstreamError
}

// toAPIError maps an error to the gateway's error envelope: its code,
// Retry-After and, for invalid arguments, the failing paths under
// "details".
func toAPIError(err error) *apierror.Error {
	message := "" // the code's default
	for _, sentinel := range own {
		if errors.Is(err, sentinel) {
			message = err.Error()
			break
		}
	}
	e := apierror.Coded(ErrorCode(err), message)
	if re, ok := errors.AsType[*RetryError](err); ok {
		e.RetryAfter = re.RetryAfter
	}
	if ae, ok := errors.AsType[*ArgumentsError](err); ok {
		e = e.With("details", ae.Failures)
	}
	return e
}
