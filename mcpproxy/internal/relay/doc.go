// Package relay is mcpproxy's relay endpoint: /mcp/{connection_id}, the
// MCP Streamable HTTP transport served to agents, in both eras. It calls
// upstream only through package engine, so both eras take the REST
// routes' checks, rate limit and breaker.
//
//   - 2025-11-25 sessions (streamable.go, sessions.go, relay.go): each
//     agent session has a go-sdk server of its own, bound to its caller,
//     and an upstream session of its own whose client declares what the
//     agent declared. The server's notifications and requests reach that
//     agent alone; policy removes what the subject may not see. Sessions
//     share one pool with per-key and per-namespace shares (package pool).
//   - 2026-07-28 requests (stateless.go): served by the go-sdk's stateless
//     handler on a lane, an upstream client per caller, connection and
//     declared capabilities: a pooled session to a 2025-era server, none
//     to a stateless one. The server's requests during a call become
//     input_required rounds (package rounds); a stateless server's own
//     rounds pass through, their state sealed to the caller
//     (passthrough.go).
//   - Mcp-Method and Mcp-Name must match the body, in both eras
//     (routing.go). A session id names its replica (replica.go).
//
// The go-sdk is the protocol implementation wherever it can be. The relay
// carries JSON past it only where the SDK would change or drop what the
// agent and the server wrote:
//
//   - Tasks (tasks.go, packages tasks and clienttasks): the SDK has no
//     model of them; its server would run a task-augmented call as a
//     plain one.
//   - Elicitation answers (mirror.Answers): the SDK's server and client
//     would check them against the requested schema and fill in defaults.
//   - Rounds: the SDK has no way to return input_required from a
//     middleware, nor to mark a result complete, and its types would
//     rewrite the server's params. A stateless server's rounds are
//     carried as JSON for the same reasons (upstream.CallStateless), and
//     so is its final result: the SDK's types would drop what they do not
//     know, and its decoder takes a 32 KiB buffer for each message.
//   - The fast path (direct.go, package wire): a tools/call without
//     progress, from an agent that can be asked nothing during it, is
//     answered as one JSON body. It skips the SDK server's decoding and
//     hand-offs. Routing reads the body once for every check (wire.Peek),
//     and the call reads it once more (wire.ClassifyStateless).
//     mcpproxy's contract test holds it to the SDK's answer.
//
// docs/gateway.md lists every method and what happens to it.
package relay
