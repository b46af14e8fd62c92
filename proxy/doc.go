// Package proxy is the idn gateway's runtime: an http.Handler that runs
// every agent request through a pipeline, cheapest refusals first:
//
//  1. verify the identity headers, the agent certificate and the RFC 9421
//     signature (identity.Verifier, profile idn-rfc9421-v1);
//  2. look up the connection;
//  3. check the approved claim <namespace, public key, service>, and file
//     a claim for an unapproved caller;
//  4. record the nonce, so only approved callers consume nonce memory;
//  5. read the body and check it against content-digest, so an
//     unauthenticated sender costs no body memory;
//  6. forward with the connection's credential injected, and stream the
//     answer back with the credential redacted. A connection in an OAuth
//     mode gets an access token from Config.UpstreamTokens for the
//     caller's subject, and an upstream 401 is retried once with a fresh
//     one.
//
// The signature covers content-digest but not the body, so no body byte is
// read before step 5. The agent never sees the credential, even when the
// upstream sends it back. MCP tool results and listings are redacted the
// same way by mcpproxy.
//
// Routes: /proxy/{connection_id}/{path} and /<alias>/{path} serve http
// connections. /mcp/{connection_id} and the routes under it serve mcp
// connections: they are authenticated the same way, then served by
// Config.MCP. CallerFrom gives it the verified caller; MCPObserver counts
// and logs what it reports. The package does not import the MCP engine:
// package gateway composes the two.
//
// Every failure is answered with the JSON error envelope and a code of
// package errcode, which gives the status. codeOf in errors.go is the one
// mapping from the pipeline's errors to codes. Handler.Authorize returns
// the refusal as an *Error.
//
// A gateway with one connection (ExampleNew runs it):
//
//	h, err := proxy.New(proxy.Config{
//		Connections: connectionMap{"weather": weather}, // a Connections of your own
//		Claims:      claims,
//		Nonces:      nonces, // replay.New(replay.Config{})
//	})
//	...
//	http.ListenAndServe(addr, h)
//
// The zero value of every field of Config and Options is the safe one.
// docs/gateway.md tells the pipeline's answers ("Authentication"), the
// routes and what redaction covers ("Runtime (agents)").
// docs/threat-model.md tells what the pipeline stops and what it does not.
package proxy
