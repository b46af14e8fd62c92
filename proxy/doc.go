// Package proxy is the idn gateway's runtime: an http.Handler that runs
// every agent request through this pipeline, cheapest refusals first:
//
//  1. verify the identity headers, the agent certificate and the RFC 9421
//     signature (identity.Verifier, profile idn-rfc9421-v1), which covers
//     the content-digest field but not yet the body: no body byte is read
//     before step 5;
//  2. look up the connection (404 CONNECTION_NOT_FOUND, 403
//     CONNECTION_DISABLED, 403 ROTATION_REQUIRED in block mode) before any
//     claim work;
//  3. check the approved claim <namespace, public key, service>, submitting
//     a claim for an unapproved caller;
//  4. record the nonce (403 AUTH_REPLAY_DETECTED; 503 NONCE_STORE_FULL), so
//     only approved callers consume nonce memory;
//  5. read the body into a buffer that grows with the bytes received (413
//     REQUEST_BODY_TOO_LARGE past Config.MaxBodyBytes; 503
//     REQUEST_BODY_CAPACITY_EXHAUSTED when the bodies buffered at once
//     would pass Config.MaxInflightBodyBytes) and check it against
//     content-digest, so an unauthenticated sender costs no body memory;
//  6. forward: strip the signing headers, content-digest and the agent's own
//     Authorization and Cookie, inject the connection's credential, and
//     stream the upstream response back with the credential redacted.
//
// Routes: /proxy/{connection_id}/{path} and /<alias>/{path} for http
// connections, and /mcp/{connection_id} (the MCP endpoint, every POST, GET
// and DELETE of the session signed) and /mcp/{connection_id}/… for mcp
// connections, which are authenticated the same way and then served by
// Config.MCP (CallerFrom gives it the verified caller; MCPObserver counts
// and logs what it reports). The package does not import the MCP engine:
// package gateway composes the two. Config.MCPTimeout bounds every /mcp request but the MCP
// session's event stream (GET /mcp/{connection_id}), which lasts as long
// as its session. A {path} whose
// percent-decoded form has a "." or ".." segment or a backslash is refused
// (400 VALIDATION_ERROR) before step 1, since an upstream could resolve it
// outside the connection's base path and prefix; any other path is
// forwarded as sent, never re-encoded.
//
// The agent never sees the connection's credential, even when the upstream
// sends it back (a redirect or error page that echoes a query_param
// credential, a debugging endpoint that echoes request headers). Every form
// that credvault's Resolved.Redactions lists (raw, URL- and JSON-escaped,
// the whole injected header value, and the variable values of 8 bytes or
// more that the credential is built from) becomes "[redacted]" inside every
// response header, trailer and 1xx header. Location is redacted, not
// dropped: the redirect still works when followed through the gateway,
// which replaces the credential parameter with the real one. A header whose
// name holds a form is dropped. A body without Content-Encoding is redacted
// as it streams, holding back only bytes that may begin a form, so event
// streams still arrive event by event; it loses its Content-Length and goes
// out chunked. The agent's Accept-Encoding is not forwarded: the
// transport asks for gzip itself and decodes it, so a compressed echo is
// redacted too. A body an upstream encodes without being asked (say br), and
// upgraded connections, pass as they are. A credential is redacted however short it is, so one of a few
// bytes also replaces the same bytes where they occur by chance. Upstream
// Set-Cookie is dropped, and the agent's Cookie withheld, unless the
// connection sets allow_upstream_cookies. This guards against accidental
// reflection; an upstream set on leaking its credential can always encode
// it some other way. MCP tool results and listings are redacted the same
// way by mcpproxy.
//
// Every failure is answered with the JSON error envelope and a code of
// package errcode, which gives the status; codeOf in errors.go is the one
// mapping from the pipeline's errors to codes, and Handler.Authorize returns
// the refusal as an *Error. Decision logs
// (when Config.DecisionLog is set) fingerprint identities and mask client
// addresses; secrets never reach them.
//
// Configuration follows the repository's one rule: the zero value of every
// field of Config and Options is the safe one (a required field left empty
// is refused), and a protection is turned off only by a field that says so:
// a negative number, an explicit off value, or an Insecure… switch.
package proxy
