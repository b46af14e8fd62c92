// Package engine is mcpproxy's call engine: what the REST tool routes
// and both eras of the MCP endpoint share. Per connection it keeps the
// upstream sessions (the shared one of the REST routes and discovery, and
// each agent session's own, opened by the client its relay configures),
// the discovery cache, the circuit breaker and the rate limit. Its
// operations are Discover, Tools, Explain, Call and Probe; CallTool is
// Call on an agent session's upstream session, with what the server
// sends during the call handed to a CallRelay.
//
// Every check of a call happens here, in one order: the tool is listed,
// allowed by the policy, pinned, its arguments match its input_schema,
// the rate limit, Connection.Hold, then the breaker. Errors are the
// sentinels and types of errors.go, mapped to the gateway's codes in one
// table (ToAPIError).
//
// Upstream, a tools/call is one HTTP exchange read in the calling
// goroutine (exchange.go, package upstream), so its progress and the
// server's requests reach the caller ahead of its result; everything else
// uses the go-sdk's client session. Tasks, which the SDK has no model
// of, are sent as JSON (Exchange).
//
// Upstream eras (era.go): a connection's first session lets the SDK's
// client find its server's era, which the connection remembers. A
// server offering 2026-07-28 is spoken to without a session, its
// tools/call exchanged by upstream.CallStateless: the SDK's client would
// read and re-encode the agent's answers to the server's rounds.
package engine
