package mcpproxy

import (
	"github.com/idnhq/idn/errcode"
	"github.com/idnhq/idn/mcpproxy/internal/engine"
)

// The engine's sentinel errors (errors.Is); ErrorCode gives each the code
// the gateway answers it with. A ConnectionSource returns the first three
// (wrapped is fine); the Proxy returns the others.
var (
	ErrConnectionNotFound = engine.ErrConnectionNotFound
	ErrConnectionDisabled = engine.ErrConnectionDisabled
	ErrNotMCP             = engine.ErrNotMCP
	ErrToolNotFound       = engine.ErrToolNotFound
	ErrToolForbidden      = engine.ErrToolForbidden
	// ErrToolChanged: the tool's listed definition is not the one pinned
	// for the connection (Config.Pins), or it has none yet.
	ErrToolChanged      = engine.ErrToolChanged
	ErrInvalidArguments = engine.ErrInvalidArguments
	ErrRateLimited      = engine.ErrRateLimited
	ErrCircuitOpen      = engine.ErrCircuitOpen
	ErrUpstream         = engine.ErrUpstream
	ErrBadRequest       = engine.ErrBadRequest
	// ErrSessionNotFound: the MCP endpoint has no session of that id for
	// this caller and connection (it ended, or another caller owns it).
	ErrSessionNotFound = engine.ErrSessionNotFound
	// ErrSessionsExhausted: the MCP endpoint has MaxSessions open.
	ErrSessionsExhausted = engine.ErrSessionsExhausted
)

// The engine's error types, which callers inspect with errors.As.
type (
	// ArgumentFailure is one place where call arguments break the tool's
	// input_schema; Path is a JSON Pointer (RFC 6901).
	ArgumentFailure = engine.ArgumentFailure
	// ArgumentsError reports arguments rejected before any upstream call.
	ArgumentsError = engine.ArgumentsError
	// RetryError is a refusal the caller may retry after RetryAfter.
	RetryError = engine.RetryError
	// UpstreamError is an upstream failure, its message scrubbed.
	UpstreamError = engine.UpstreamError
)

// ErrorCode returns the code the gateway answers err with: that of the
// sentinel it wraps, else the code it carries (errcode.Of), else
// UPSTREAM_ERROR. The admin discover route uses it.
func ErrorCode(err error) errcode.Code { return engine.ErrorCode(err) }
