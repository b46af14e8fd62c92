// Package admin is the gateway's admin API as a mountable http.Handler:
// connections, credential variables and the service catalog under
// /api/admin/, on top of a credvault.Vault. docs/gateway.md lists every
// route, field and error code. The same operations are methods of
// Handler (CreateConnection, TestConnection, …), for callers in process
// such as the pairing client; Problem says how their errors are answered.
//
// Secrets are write-only: connection objects list their names in
// credential_keys, variables are listed without values, and no response,
// log line or error carries a secret value. PATCH changes only the fields
// it names; a JSON null clears an optional field. Unknown and read-only
// fields are refused with 400 VALIDATION_ERROR, so a typo never passes
// silently.
//
// Every route is behind an Access policy (see NewAccess): hybrid (loopback
// peer or bearer token, the default), loopback or token; browser
// cross-site use is refused, and so is a request whose Host is not a
// loopback literal, localhost or a configured name, which is what a page
// using DNS rebinding sends. Access.Wrap is also the middleware the
// gateway puts in front of /metrics.
//
// Changing where or how a stored secret is sent needs more than being on
// the host, whatever the mode: a PATCH that changes a field of
// the vault's SecretRouteChanges (base_url, path_prefix, protocol, the auth
// fields, allow_upstream_cookies, and the extensions its Config.Extensions
// names: the gateway's mcp_endpoint and mcp_transport), rotate, a
// create whose secret references a credential variable, and a write of a
// variable a connection references answer 401 ADMIN_TOKEN_REQUIRED unless
// the request presented the admin token or carries OwnerContext (the
// owner's RPCs over pairing). Any process on the gateway host, an agent's
// shell included, is a loopback client; without this it could point a
// connection at its own listener and receive the credential. A loopback
// client may still read, list, test, discover and create connections with
// secrets it supplies.
//
// test and discover run Config.GuardCheck on the request as it arrived,
// before the handler reads a body byte, so a signed check covers the body
// the handler acts on. Without a GuardCheck they are refused 403
// ADMIN_FORBIDDEN unless Config.InsecureUnguardedChecks says otherwise.
//
// Answers worth knowing:
//
//   - POST /api/admin/credential-variables answers 201 for a new key and
//     200 when it replaced an existing one.
//   - test answers 200 with {"ok","status","latency_ms","error"?,"tested_at"}
//     whatever the upstream said; ok means a status below 400. The upstream
//     body is never returned (it could echo the credential). An mcp
//     connection is tested with Config.TestMCP when it is set: an MCP
//     handshake, whose answer adds what the server said (an "mcp" member)
//     and whose failure says which step failed; it takes no request body
//     fields (400 VALIDATION_ERROR naming the field).
//   - discover is delegated to Config.Discover (the MCP engine); without it
//     the route answers 501 DISCOVERY_UNAVAILABLE.
//   - A POST, PUT or PATCH whose body is not application/json answers 415
//     UNSUPPORTED_MEDIA_TYPE (such a request is what a browser can send
//     cross-site without a CORS preflight). A bodyless POST (test,
//     discover) needs no Content-Type. DELETE needs none either: it is
//     never a CORS "simple" request, so browsers preflight it.
//
// Configuration follows the repository's one rule: the zero value of every
// field of Config, AccessConfig and AccessOptions is the safe one (a
// required field left empty is refused), and a protection is turned off only
// by a field that says so: a negative number, an explicit off value, or an
// Insecure… switch.
package admin
