// Package mcpproxy is the Model Context Protocol side of the idn gateway: it
// discovers an upstream MCP server's tools, filters them by the connection's
// and the caller's tool policy, validates call arguments against each tool's
// input_schema, and calls tools over the streamable HTTP transport (MCP
// 2025-03-26 and later) using github.com/modelcontextprotocol/go-sdk.
//
// It is two parts, split by what they do. The call engine
// (internal/engine) keeps each connection's upstream sessions, discovery
// cache, breaker and rate limit, and runs discover, list, call and probe
// with every check; the REST tool routes (handler.go) and both eras of
// the MCP endpoint share it. The relay endpoint (internal/relay) is
// /mcp/{connection_id}: each era's wire, reaching upstream through the
// engine only. This package composes them: Config, Options, Proxy, and
// the names of the engine's public types.
//
// The routes, answers and error codes are listed in docs/gateway.md; how
// the parts behave:
//
//   - Sessions: per connection, initialize_required → ready; a session the
//     server forgets (404 for its id, or the 400 "no valid session" some
//     servers answer instead) or that fails goes to reinitialize_pending
//     and is re-initialized by the next request; a request that met a lost
//     session is retried once on the new one.
//   - Discovery: fresh within DiscoveryTTL; stale up to StaleIfError later
//     (refreshed, served stale when the refresh fails); expired after that.
//     refresh=force always asks upstream. Concurrent refreshes of one
//     connection share one upstream discovery. Every attempt is handed to
//     Config.OnDiscovery for storage, with errors scrubbed of secrets.
//   - Tests: Probe (the admin test route) is a session of its own, apart
//     from the cache and the breaker.
//   - Policy: package toolpolicy (see Policy.Explain for the order); '*' and '?' wildcards.
//   - Pins: with Config.Pins, the pin keeper (package toolpin) observes
//     every listing read (discovery, a session's tools/list, each page).
//     A tool whose definition is not the pinned one is left out of
//     listings and refused (403 MCP_TOOL_CHANGED) until accepted.
//   - Calls: unknown tool 404, filtered tool 403, bad arguments 400 with the
//     failing JSON Pointer paths, all before any upstream request; then the
//     per connection + namespace rate limit (429) and breaker (503), both
//     with Retry-After.
//   - Upstream calls: each tools/call is one HTTP exchange on the
//     upstream session, read in the calling goroutine; the call's
//     progress arrives on its own event stream, ahead of its result; a
//     stream the server ends early is resumed with Last-Event-ID, bounded.
//     Everything else uses the go-sdk's client session.
//   - Upstream eras: a connection's first session lets the SDK's client
//     find the server's era (server/discover, then initialize), and the
//     connection remembers it (engine's era.go). A server offering
//     2026-07-28 is spoken to statelessly: the SDK's client holds no
//     session upstream, and tools/call goes through
//     upstream.CallStateless, which carries the server's input_required
//     rounds as JSON (the agent's answers go back as written, which the
//     SDK's client would read and re-encode) and asks each question
//     through the call's relay: on a 2025 agent's session stream, or as
//     a stateless agent's round. A stateless agent gets a stateless
//     server's rounds as the server wrote them, its requestState sealed
//     to the caller and tool, so the gateway holds nothing between rounds
//     (relay's passthrough.go). Other servers keep 2025-era sessions.
//   - Retries: only network timeouts and upstream 429/502/503/504, bounded,
//     with full-jitter exponential backoff; never a tools/call whose request
//     was completely sent before a timeout.
//   - Secrets: upstream error text has every URL's user info and query
//     removed and every known secret value replaced before it reaches a
//     response, a log line or the stored discovery. Tool results and tool
//     listings have every known secret replaced in their strings, so an
//     upstream that echoes its request headers cannot hand the credential
//     to the agent. Redirects are never followed, so credentials cannot be
//     forwarded elsewhere.
//   - MCP endpoint: /mcp/{connection_id} also speaks the MCP Streamable HTTP
//     transport (POST, GET, DELETE; the go-sdk's server side), so MCP
//     clients use the gateway as an MCP server that relays the upstream
//     one (package relay; package mirror decides what passes): each agent
//     session has an upstream session of its own, opened at its
//     initialize by a client that declares what the agent declared
//     (sampling, elicitation, roots) and asks for the agent's protocol
//     version. The agent gets the server's capabilities,
//     instructions, tool listings as listed, completions, subscriptions,
//     logging and notifications, and the server's sampling, elicitation
//     and roots requests, answered by the agent; minus what policy
//     removes: tools the subject may not use, resources and prompts where
//     the connection does not expose them. tools/call takes the same
//     policy, validation, rate limit and breaker as the REST routes,
//     checked against the tools the session's upstream session lists;
//     invalid arguments come back as a tool result with isError, other
//     refusals as JSON-RPC errors whose data.code is the REST code. A
//     tools/call without a progress token, from an agent that declared
//     neither sampling nor elicitation, is answered by the endpoint itself
//     with one JSON body (relay's direct.go, reading with package wire); the
//     rest goes through the SDK's server, whose event streams carry a
//     call's notifications and the server's requests before its result.
//     An elicitation's answer is carried past the SDK as the agent wrote
//     it (mirror.Answers): the SDK's server and client would check it
//     against the requested schema and fill in its defaults.
//     Tasks (MCP 2025-11-25), which the SDK has no model of, are carried
//     as JSON where the upstream offers them (relay's tasks.go): task-augmented
//     calls take a plain call's checks, and each task belongs to the
//     agent session that created it, whatever the server allows, and so
//     do its status and progress notifications. The client side of tasks
//     (the agent's tasks a server creates and polls) is relayed as JSON
//     on the agent's own stream, each task bound to its agent session and
//     upstream session (package clienttasks).
//     Both fast paths (relay's direct.go and upstream.Request) are held to the SDK's
//     server and client by a contract test that runs one conversation
//     through every combination and compares it message by message;
//     bench/README.md has what they save. Cancellation
//     (notifications/cancelled) reaches the upstream either way, and the
//     server's of its own request during a call the agent asked. A
//     session is bound to the caller (namespace, key and subject) and
//     connection that opened it: another caller naming its id gets 404,
//     the same answer as an unknown id, and what its upstream session
//     sends reaches it alone. Its upstream session closes when it ends,
//     so upstream state never passes between agent sessions (the REST
//     routes and discovery share the connection's). Sessions end after
//     SessionIdleTimeout without a request, on DELETE, or when their
//     caller opens one past its share: at most MaxSessionsPerKey per key,
//     MaxSessionsPerNamespace per namespace and MaxSessions in all, the
//     caller's own least recently used session is evicted to make room. A
//     full pool refuses (503) only a caller whose namespace holds none.
//   - Stateless revision: a POST without a session whose version is
//     2026-07-28 (header or _meta) goes to the SDK's stateless handler,
//     served by the same dispatch on a lane, an upstream client per
//     caller, connection and declared capabilities (relay's
//     stateless.go): a pooled session to a 2025-era server, none to a
//     stateless one. The server's requests during a call become
//     input_required rounds (package rounds), carried as JSON: the SDK
//     has no way to return them from a middleware, nor to mark a result
//     complete, and its types would rewrite the server's params. A
//     first call without progress is answered directly, as direct.go
//     answers a session's. Mcp-Method and Mcp-Name must match the body
//     (relay's routing.go), in both revisions.
//   - Bounds on the server: at most hold.PerSession of its requests are
//     answered at once per agent session, hold.PerConnection per
//     connection, the rest dropped; each answer is posted within
//     hold.ReplyTimeout, and a session's end ends every exchange of its
//     upstream session (package hold).
//
// Settings is the MCP configuration of a connection (its endpoint, tool
// policy and what it exposes; package mcpsettings) and Discovery its last
// discovery: records the gateway stores with the connection (credvault's
// extensions) and turns into a Connection per lookup.
//
// The parts that stand alone are packages of their own: toolpolicy and
// mcpsettings for users; under internal/, engine and relay (above),
// upstream (the retrying transport
// and the exchanges), wire (the fast paths' JSON-RPC messages), mirror
// (what an agent session sees of its upstream session), tasks and
// clienttasks (what it keeps of tasks), rounds (the stateless
// revision's held calls), hold (what its server can make it
// hold), resume (its own event stream's
// numbered, kept events), pool (the sessions' table and shares), scrub
// (secret removal), arguments (argument validation), limit (breaker, rate
// limit and their defaults) and metrics. Policy, SubjectPolicy, Decision, Source, Settings,
// SettingsError, Discovery, Tool and ToolAnnotations are aliases of their
// types; Connection, ConnectionSource, ToolPins, ToolList, CallResult,
// ServerInfo, Refresh, SessionState and the errors are the engine's.
//
// The gateway owns authentication: Handler reads the already verified
// caller through Config.Caller and never looks at signatures itself.
//
// Configuration follows the repository's one rule: the zero value of every
// field of Config and Options is the safe one (a required field left empty
// is refused), and a protection is turned off only by a field that says so:
// a negative number, an explicit off value, or an Insecure… switch.
package mcpproxy
