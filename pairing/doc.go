// Package pairing connects a gateway to its owner's dashboard. It keeps an
// outbound WebSocket to the control plane open, so nothing needs to reach
// the gateway. It runs the owner's RPCs on the gateway's local store.
//
// Pairing: the owner starts a pairing session in the dashboard and gets a
// session id and an 8-character code. The gateway's operator runs
// `gateway pair --session-id S --pair-code C --namespace N`. The client
// opens {ControlPlaneURL}/v1/gateways/connect with an upgrade request signed
// by the gateway's own identity (profile idn-rfc9421-v1, a fresh nonce per
// attempt). It sends the code with the gateway's name, version and HPKE
// public key. It stores the gateway id the control plane answers in
// DataDir/pairing.json.
//
// From then on the signed upgrade alone reconnects whenever the socket
// ends, with exponential backoff and jitter (at most MaxBackoff). That
// lasts until the owner unpairs the gateway: close code 4403, ErrUnpaired.
// pairing.json is then removed, so the gateway reads as unpaired again.
// While paired, the gateway's signing key also stands for its owner's
// services at the control plane. The gateway then reads their claims and
// files claims for them without a service API key.
//
// The HPKE key pair (X25519) is kept in DataDir/pairing-key. Its private
// half is sealed with the gateway's master key (credvault's AES-256-GCM
// sealing). Client.Fingerprint is the lower-case hex of the first 8 bytes
// of the SHA-256 of the public key, as the dashboard shows it.
//
// Config.Files keeps the key and the state elsewhere than DataDir: a fleet
// of gateways keeps them in its shared store, so that it pairs once and
// every replica holds the same pairing (docs/gateway.md, "Running a
// fleet").
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
//	connections.disconnect_account {"id", "subject"?}    DELETE /api/admin/connections/{id}/accounts
//	connections.tool_pins    {"id"}                      GET    /api/admin/connections/{id}/tool-pins
//	connections.accept_tools {"id", "tools", …}          POST   /api/admin/connections/{id}/tool-pins/accept
//	connections.reject_tools {"id", "tools", …}          POST   /api/admin/connections/{id}/tool-pins/reject
//	variables.list       {}                              GET    /api/admin/credential-variables
//	variables.set        {"key", sealed_secrets, …}      POST   /api/admin/credential-variables
//	variables.delete     {"key", "force"?}               DELETE /api/admin/credential-variables/{key}
//
// Two more RPCs only the control plane sends, for an OAuth account the
// owner connects from the dashboard, run on Config.Connector:
// pairwire.MethodConnectStart and MethodConnectFinish.
//
// An admin error answers a JSON-RPC error of code -32000 whose data is
// the admin envelope ({"status","code","error","details"?}).
//
// Secret values never travel in clear. A body that would carry "secrets"
// (create, rotate) or a variable's "value" carries "sealed_secrets"
// instead: an RFC 9180 HPKE seal of the JSON secrets object, as
// docs/control-plane.md ("Owner: paired gateways") specifies. The object is
// {"NAME":"value",…} for a connection and {"KEY":"value"} for a variable.
// A plaintext "secrets" or "value" field is refused (-32602). So a relay
// that logs its messages, or a control plane not trusted with secrets,
// never sees one.
//
// The control plane is trusted to say which owner asks, since the owner
// signed in to it with a passkey. The operations run with
// admin.OwnerContext. Test and discover need no signed agent check here;
// the admin API's GuardCheck still guards their HTTP routes.
//
// Owner passkeys: the ready message of a new pairing pins the owner's
// passkeys in OwnerKeysFile. Afterwards the control plane cannot replace
// them; only the owner's approval.KeysUpdate, signed by a pinned passkey,
// does (the owner_keys.update RPC, or owner_keys_update at a reconnect).
//
// A message that is not JSON, not a JSON-RPC 2.0 request or larger than
// pairwire.MaxMessageBytes is answered with a JSON-RPC error; the socket
// stays up.
//
// Activity: a Reporter sends the gateway's decisions about agents'
// requests to the owner's Activity page, never a payload, query, header or
// secret. It POSTs signed batches to pairwire.ActivityPath, not over the
// socket. So the process serving agents (gateway serve) reports while
// another (gateway pair) may hold the socket. Its queues are bounded and
// never make the request path wait.
//
// docs/gateway.md ("Pairing with a dashboard", "Activity reports") tells
// the operator's side; docs/control-plane.md ("Owner: paired gateways")
// the control plane's.
//
// Configuration follows the repository's one rule: the zero value of every
// field of Config is the safe one, and a required field left empty is
// refused. A protection is turned off only by a field that says so: a
// negative number, an explicit off value, or an Insecure… switch.
package pairing
