package mcpproxy

import (
	"errors"
	"net/http"
	"time"

	"github.com/idnhq/idn/internal/apierror"
)

// Sentinel errors. A ConnectionSource returns the first three (wrapped is
// fine); the Proxy returns the others. toAPIError maps each to its status and
// code.
var (
	ErrConnectionNotFound = errors.New("mcpproxy: connection not found")
	ErrConnectionDisabled = errors.New("mcpproxy: connection disabled")
	ErrNotMCP             = errors.New("mcpproxy: connection is not an MCP connection")
	ErrToolNotFound       = errors.New("mcpproxy: tool not found")
	ErrToolForbidden      = errors.New("mcpproxy: tool not allowed for this subject")
	ErrInvalidArguments   = errors.New("mcpproxy: invalid tool arguments")
	ErrRateLimited        = errors.New("mcpproxy: tool-call rate limit exceeded")
	ErrCircuitOpen        = errors.New("mcpproxy: circuit breaker open")
	ErrUpstream           = errors.New("mcpproxy: upstream MCP server failed")
	ErrBadRequest         = errors.New("mcpproxy: bad request")
	// ErrSessionNotFound: the MCP endpoint has no session of that id for
	// this caller and connection (it ended, or another caller owns it).
	ErrSessionNotFound = errors.New("mcpproxy: no such MCP session")
	// ErrSessionsExhausted: the MCP endpoint has MaxSessions open.
	ErrSessionsExhausted = errors.New("mcpproxy: too many MCP sessions open")
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

// errorTable maps each sentinel to its HTTP answer, in one place.
var errorTable = []struct {
	err    error
	status int
	code   string
}{
	{ErrConnectionNotFound, http.StatusNotFound, "CONNECTION_NOT_FOUND"},
	{ErrConnectionDisabled, http.StatusForbidden, "CONNECTION_DISABLED"},
	{ErrNotMCP, http.StatusBadRequest, "VALIDATION_ERROR"},
	{ErrBadRequest, http.StatusBadRequest, "VALIDATION_ERROR"},
	{ErrToolNotFound, http.StatusNotFound, "MCP_TOOL_NOT_FOUND"},
	{ErrToolForbidden, http.StatusForbidden, "MCP_TOOL_FORBIDDEN"},
	{ErrInvalidArguments, http.StatusBadRequest, "MCP_TOOL_ARGUMENTS_INVALID"},
	{ErrRateLimited, http.StatusTooManyRequests, "MCP_TOOL_RATE_LIMITED"},
	{ErrCircuitOpen, http.StatusServiceUnavailable, "MCP_CIRCUIT_OPEN"},
	{ErrUpstream, http.StatusBadGateway, "MCP_UPSTREAM_ERROR"},
	{ErrSessionNotFound, http.StatusNotFound, "MCP_SESSION_NOT_FOUND"},
	{ErrSessionsExhausted, http.StatusServiceUnavailable, "MCP_SESSIONS_EXHAUSTED"},
}

// ErrorStatus returns the HTTP status and stable code the gateway answers
// an error of this package with; an error it does not know is 502
// MCP_UPSTREAM_ERROR. The admin discover route uses it.
func ErrorStatus(err error) (status int, code string) {
	e := toAPIError(err)
	return e.Status, e.Code
}

// toAPIError maps an error from this package to the gateway's error
// envelope: status, stable code, Retry-After and, for invalid arguments,
// the failing paths under "details". An error this package does not know
// becomes 502 MCP_UPSTREAM_ERROR with a generic message, so nothing
// unscrubbed can leak.
func toAPIError(err error) *apierror.Error {
	for _, row := range errorTable {
		if !errors.Is(err, row.err) {
			continue
		}
		e := apierror.New(row.status, row.code, err.Error())
		var re *RetryError
		if errors.As(err, &re) {
			e.RetryAfter = re.RetryAfter
		}
		var ae *ArgumentsError
		if errors.As(err, &ae) {
			e = e.With("details", ae.Failures)
		}
		return e
	}
	return apierror.New(http.StatusBadGateway, "MCP_UPSTREAM_ERROR", "mcpproxy: upstream MCP request failed")
}
