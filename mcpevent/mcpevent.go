// Package mcpevent is what the MCP engine (mcpproxy) reports about the
// traffic it relays. The HTTP layer (proxy) counts and logs these events,
// and the admin API answers a connection test's Handshake. Neither needs
// the engine to read them, so the types live here, importing nothing.
//
//	engine, _ := mcpproxy.New(mcpproxy.Config{
//		OnUpstream: observer.Upstream,
//		OnDecision: observer.Decision,
//	})
package mcpevent

import "time"

// Caller is who sent a request on an MCP route, as the verified signature
// says.
type Caller struct {
	Namespace string // idn-namespace: keys the tool-call rate limit
	Subject   string // idn-subject: selects the subject tool policy
	// Key is the caller's public key in any stable encoding. With
	// Namespace and Subject it owns the MCP sessions the caller opens on
	// the MCP endpoint; no other caller can use them.
	Key string
}

// Exchange is one HTTP exchange with an upstream MCP server (each attempt
// of a retried one).
type Exchange struct {
	ConnectionID string
	// Method is the HTTP method: POST for JSON-RPC messages, GET for the
	// session's event stream, DELETE when a session ends.
	Method string
	// Status is the response's status; 0 when none came (Err is set).
	Status int
	// Err is the transport failure, unscrubbed. It is for classifying,
	// never for logging as is.
	Err error
	// Elapsed is the time to the response headers or the failure.
	Elapsed time.Duration
}

// Decision is what the engine decided about a caller's request. Method
// names the request: a tool listing ("tools/list"), a tool call
// ("tools/call", task-augmented or not), a tasks method ("tasks/get",
// "tasks/result", "tasks/list", "tasks/cancel"), a server's
// task-augmented "sampling/createMessage" or "elicitation/create", or a
// task status notification ("notifications/tasks/status").
type Decision struct {
	ConnectionID string
	Caller       Caller
	Method       string
	Tool         string // for tools/call
	// Outcome is the result as idn_gateway_mcp_tool_call_total counts it
	// for calls: success, tool_error, error, filtered, tool_changed, not_found,
	// invalid_arguments, rate_limited, circuit_open or task_created.
	// Listings end in "success" or "error". The tasks methods add
	// "not_owned" (a task of another session, or none). Notifications are
	// "relayed", "no_stream" (kept for a resumed stream) or "not_owned".
	// A server's tasks request the agent did not offer is "not_offered".
	Outcome string
	// Code is the stable error code of a refusal or failure.
	Code string
}

// Handshake is what a test of an MCP connection learned: a new session
// (initialize), tools/list to its last page, the session closed.
type Handshake struct {
	// ServerName, ServerVersion and ProtocolVersion are from the server's
	// initialize answer; empty when initialize failed.
	ServerName      string `json:"server_name"`
	ServerVersion   string `json:"server_version"`
	ProtocolVersion string `json:"protocol_version"`
	// Tools is the number of tools the server lists.
	Tools int `json:"tools"`
	// Status is the HTTP status of the server's last answer; 0 when none
	// came. The admin API answers it as the test result's status.
	Status int `json:"-"`
}
