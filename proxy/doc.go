// Package proxy is the idn gateway's runtime: an http.Handler that runs
// every agent request through the pipeline of gateway.md "What the service
// does" item 2, in the order of DECISIONS §1:
//
//  1. verify the identity headers, the agent certificate and the RFC 9421
//     signature (identity.Verifier, profile idn-rfc9421-v1);
//  2. look up the connection (404 CONNECTION_NOT_FOUND, 403
//     CONNECTION_DISABLED, 403 ROTATION_REQUIRED in block mode) before any
//     claim work;
//  3. check the approved claim <namespace, public key, service>, submitting
//     an authorization request for an unapproved caller;
//  4. record the nonce (403 AUTH_REPLAY_DETECTED; 503 NONCE_STORE_FULL), so
//     only approved callers consume nonce memory;
//  5. forward: strip the signing headers, content-digest and the agent's own
//     Authorization and Cookie, inject the connection's credential, and
//     stream the upstream response back.
//
// Routes: /proxy/{connection_id}/{path} and /<alias>/{path} for http
// connections, and /mcp/{connection_id}/… for mcp connections, which are
// authenticated the same way and then served by Config.MCP.
//
// Every failure is answered with the spec's error envelope; the mapping
// from errors to status and code is the table in errors.go. Decision logs
// (when Config.DecisionLog is set) fingerprint identities and mask client
// addresses; secrets never reach them.
package proxy
