// Package pairing connects a gateway to its owner's dashboard: it keeps an
// outbound WebSocket to the control plane open (so nothing needs to reach
// the gateway) and runs the owner's RPCs on the gateway's local store.
//
// Pairing: the owner starts a pairing session in the dashboard and gets a
// session id and an 8-character code; the gateway's operator runs
// `gateway pair --session-id S --pair-code C --namespace N`. The client
// opens {ControlPlaneURL}/v1/gateways/connect with an upgrade request signed
// by the gateway's own identity (profile idn-rfc9421-v1, a fresh nonce per
// attempt), sends the code with the gateway's name, version and HPKE
// public key, and stores what the control plane answers (its gateway id)
// in DataDir/pairing.json. From then on the signed upgrade alone
// reconnects, with exponential backoff and jitter (at most MaxBackoff)
// whenever the socket ends, until the owner unpairs the gateway (close
// code 4403, ErrUnpaired; pairing.json is then removed, so the gateway
// reads as unpaired again). While paired, the gateway's signing key also
// stands, at the control plane, for its owner's services: the gateway
// reads their claims and files claims for them without a service API key.
//
// The HPKE key pair (X25519) is kept in DataDir/pairing-key, its private
// half sealed with the gateway's master key (credvault's AES-256-GCM
// sealing). Status reports its fingerprint, the lower-case hex of the
// first 8 bytes of the SHA-256 of the public key, as the dashboard shows
// it.
//
// RPCs are JSON-RPC 2.0 requests whose params and results are the bodies
// of the gateway's admin API. Each runs, in process, the operation of
// package admin that serves the route beside it:
//
//	connections.list     {}                              GET    /api/admin/connections
//	connections.get      {"id"}                          GET    /api/admin/connections/{id}
//	connections.create   create body, sealed_secrets     POST   /api/admin/connections
//	connections.update   {"id", …fields}                 PATCH  /api/admin/connections/{id}
//	connections.delete   {"id"}                          DELETE /api/admin/connections/{id}
//	connections.test     {"id", …test body}              POST   /api/admin/connections/{id}/test
//	connections.discover {"id", "refresh"?}              POST   /api/admin/connections/{id}/discover
//	connections.rotate   {"id", sealed_secrets, …}       POST   /api/admin/connections/{id}/rotate
//	connections.tool_pins    {"id"}                      GET    /api/admin/connections/{id}/tool-pins
//	connections.accept_tools {"id", "tools", …}          POST   /api/admin/connections/{id}/tool-pins/accept
//	variables.list       {}                              GET    /api/admin/credential-variables
//	variables.set        {"key", sealed_secrets, …}      POST   /api/admin/credential-variables
//	variables.delete     {"key", "force"?}               DELETE /api/admin/credential-variables/{key}
//
// An admin error answers a JSON-RPC error of code -32000 whose data is
// the admin envelope ({"status","code","error","details"?}).
//
// Secret values never travel in clear: a body that would carry "secrets"
// (create, rotate) or a variable's "value" carries "sealed_secrets"
// instead, base64url of an RFC 9180 HPKE single-shot seal (base mode,
// DHKEM(X25519, HKDF-SHA256), HKDF-SHA256, AES-256-GCM, info
// "idn-pairing-v1" followed by the gateway id, no additional data) of the
// JSON secrets object: {"NAME":"value",…} for a connection, {"KEY":"value"}
// with the variable's own key for a variable. A plaintext "secrets" or
// "value" field is refused (-32602), so a relay that logs its messages, or
// a control plane that is not trusted with secrets, never sees one. The
// control plane is trusted to say which owner asks: the operations run
// with admin.OwnerContext, and test and discover need no signed agent
// check (the admin API's GuardCheck keeps its HTTP routes), since the
// caller is the owner, authenticated by passkey at the control plane.
//
// A message that is not JSON, not a JSON-RPC 2.0 request or larger than
// pairwire.MaxMessageBytes is answered with a JSON-RPC error; the socket
// stays up.
//
// Activity: a Reporter sends the gateway's decisions about agents'
// requests (never a payload, query, header or secret) to the control
// plane for the owner's Activity page, in batches POSTed to
// pairwire.ActivityPath and signed by the gateway's identity, not over
// the socket, so that the process serving agents (gateway serve) reports
// while another (gateway pair) holds the socket. It queues in memory,
// bounded, verified agents apart from the rest, and never makes the
// request path wait; refusals before a signature are counted, not queued.
//
// Configuration follows the repository's one rule: the zero value of every
// field of Config is the safe one (a required field left empty is refused),
// and a protection is turned off only by a field that says so: a negative
// number, an explicit off value, or an Insecure… switch.
package pairing
