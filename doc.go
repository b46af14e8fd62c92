// Package idn lets AI agents call third-party APIs and MCP servers safely.
//
// Agents hold Ed25519 keys and sign every HTTP request (RFC 9421). A local
// gateway verifies the signature, blocks replays, checks that the namespace
// owner approved the agent for the service (a claim), injects the stored
// upstream credential the agent never sees, and forwards the request. A
// control plane holds namespaces (DIDs), owner passkeys, the claim lifecycle,
// the approved-claims feed, DID resolution, services and webhooks.
//
// The module is a set of importable packages with thin binaries on top:
//
//   - httpsig: RFC 9421 HTTP Message Signatures and RFC 9530 digests.
//   - identity: agent keys, certificates, DIDs and the idn-rfc9421-v1 profile.
//   - didresolve: did:idn documents and a caching resolver client.
//   - claimcache: the approved-claims snapshot a gateway checks against.
//   - replay: a bounded nonce store for replay protection.
//   - credvault: the gateway's encrypted connection and credential store.
//   - admin: the gateway's admin API as an http.Handler.
//   - mcpproxy: an MCP client with discovery cache, tool policy and breaker.
//   - mcpevent: what mcpproxy reports of its traffic, read by proxy and admin.
//   - proxy: the gateway's runtime http.Handler.
//   - controlplane: the control-plane store, domain and HTTP API.
//
// Binaries: cmd/idn (agent CLI), cmd/gateway, cmd/controlplane.
//
// Every Config follows one rule: the zero value of every field is the safe
// one, and a protection is turned off only by a field that says so: a
// negative number (a limit, a rate limit, a breaker, an idle timeout), an
// explicit off value (credvault.RotationOff), or a switch named Insecure….
package idn
