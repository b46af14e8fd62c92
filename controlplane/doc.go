// Package controlplane is the idn control plane: the store (SQLite or
// PostgreSQL behind one versioned schema), the claim lifecycle and the HTTP
// API that docs/control-plane.md lists route by route.
//
// Open returns a Store; New returns a Server, an http.Handler serving:
//
//   - signed routes (idn-rfc9421-v1 profile; see signed.go for the order
//     in which a request is admitted): the public lookups GET
//     /v1/namespaces/{ns} and GET /.well-known/did/{did}, whose nonces are
//     kept in a bounded memory, and, with a service API key as well, POST
//     /v1/claims, GET /v1/verify and the approved-claims feed GET
//     /v1/namespaces/claims, whose nonces are recorded in the database so
//     instances sharing one PostgreSQL refuse each other's replays. Every
//     signed request first spends a token of its client address
//     (Config.SignedRatePerMinute), so a signer who proves nothing, which
//     any self-made key can be, makes the server write nothing;
//   - owner routes (idn_session cookie: an HS256 JWT whose sid must be live
//     in the sessions table): services and their API keys under
//     /v1/services, claim approve/reject/revoke under /v1/claims/{id}/,
//     the claim listing, the rejection of every pending claim of one
//     service (POST /v1/namespaces/{ns}/claims/reject-pending?service=…)
//     and the API form of the DID document under /v1/namespaces/{ns}/;
//   - passkey accounts under /v1/auth/* (Config.Auth, WebAuthn with ES256
//     and EdDSA): signup, login, me, logout, passkeys, settings,
//     verification, the owner's sessions (GET /v1/auth/sessions, DELETE
//     /v1/auth/sessions/{id}) and account deletion;
//   - webhooks under /v1/services/{id}/webhooks (Config.Webhooks; package
//     webhooks), with their recent deliveries and a test event on request
//     (POST …/webhooks/{wid}/test);
//   - gateway pairing (Config.Gateways, package gatewaylink): pairing
//     sessions (POST /v1/gateways/pairings), the gateway's WebSocket
//     /v1/gateways/connect (upgrade signed by the gateway's identity, nonce
//     recorded once the key is paired or names an open pairing session),
//     the owner's gateways (GET /v1/gateways, DELETE /v1/gateways/{id})
//     and the RPC relay POST /v1/gateways/{id}/rpc;
//   - public DID resolution at /1.0/identifiers/{did} and GET /health;
//   - the owner dashboard at / (below);
//   - POST /v1/test/seed and POST /v1/test/signin-links, only when
//     Config.TestSeedToken is set (loopback clients with the token; no
//     signed headers, so tests and the quickstart need no identity to
//     bootstrap).
//
// The dashboard is HTML from html/template (/login, /signup, /claims,
// /services, /services/{id}, /gateways, /gateways/{id}, /account, /did) with a few ES modules under
// /assets/<content hash>/, all embedded in the binary. Pages read the store
// to render; every action runs through the JSON API above from the browser
// (fetch with the session cookie, WebAuthn through navigator.credentials),
// so the dashboard's origin must be in AllowedOrigins and Auth.Origins. The
// pages send a CSP without inline code or eval, frame-ancestors 'none',
// nosniff and Referrer-Policy: same-origin. The claims page asks the API for
// its view every two seconds and re-renders what changed, so new requests
// appear without a reload; an answer of REAUTH_REQUIRED runs the passkey
// check and the action again. One-time sign-in links (dashboard_signin.go)
// open it as the owner of a seeded namespace, for the quickstart.
//
// Claim states move pending → approved → revoked, pending → rejected and
// pending → expired (Server.Maintain). Every move is one conditional UPDATE
// (… WHERE status = <from>), so concurrent moves of one claim serialise on
// the row and the loser gets 409 CLAIM_STATE_CONFLICT. Lifecycle changes
// are published to Config.Events after they commit.
//
// Pending claims are budgeted per namespace and service
// (Config.MaxPendingClaims), and one agent address (an IPv4 address or an
// IPv6 /64) may hold only Config.MaxPendingPerAgent of a budget: a flood
// through one service, whether a hostile service's key or self-made agent
// keys sent through a gateway, never refuses another service's claims,
// and the owner clears it with one reject-pending call.
//
// No request makes the server hold a body byte before its sender is
// known: a signed request's body is read after its signature (which covers
// content-digest), service key and nonce have passed, an owner route's
// after the session has, and any other request may send 64 KiB at most.
// Buffers grow with the bytes received, never from Content-Length, and the
// bytes held at once across requests are capped
// (Config.MaxInflightBodyBytes; past it 503
// REQUEST_BODY_CAPACITY_EXHAUSTED with Retry-After).
//
// Passkey challenges are single-use, bound to their ceremony, namespace and
// session, and expire. Rate limits key on the client address, never on the
// namespace alone, so strangers cannot lock an owner out: ceremony options
// are budgeted per address, signups are 5 per address per hour, and failed
// assertions back off exponentially per namespace and address (counters in
// the database). A session remembers its last passkey check: adding or
// removing a passkey and deleting the account need one within five
// minutes, made after the last credential change with an established
// passkey (see auth_stepup.go); passkey changes are mailed to the alert
// address. Deletion revokes every approved claim through the
// normal transition (so webhooks fire), removes services, keys, passkeys
// and sessions, and leaves a tombstone, so the DID resolves as deactivated
// and the name can never be registered again.
//
// Webhook deliveries (package webhooks) are written by triggers into an
// outbox in the same transaction as the claim change, then sent by
// Server.RunWorkers per Standard Webhooks (HMAC-SHA256 signatures), leased
// so several instances can share the queue and each webhook-id succeeds
// once, retried with backoff within the retry window and marked failed
// after the threshold (with an optional SMTP alert, package alertmail).
// Targets are checked at dial time (package webhooks/egress), so private,
// loopback and link-local addresses are refused even through DNS
// rebinding, and redirects are never followed. Registry writes
// (BLOCKCHAIN_MODE; RegistryConfig) go through the Registry interface,
// which registry/evm implements on a chain, so this package never imports
// a chain client: sync writes before the claim moves (502
// REGISTRY_WRITE_FAILED leaves it unchanged), memory queues in the
// process, queue leases each owed write from the database; a failed write
// shows on its claim as registry_error. The PostgreSQL triggers need
// PostgreSQL 13 or newer.
//
// Choices where the specs are silent: a claim of another owner answers 404
// (ids reveal nothing); GET /v1/verify's service defaults to the key's
// service and must equal it (403); a pending claim older than the expiry
// cannot be approved, and is expired instead of returned when its tuple is
// resubmitted, even before Maintain has marked it; deleting a service
// revokes its approved claims and rejects its pending ones (with events);
// ALLOWED_ORIGINS also get CORS with credentials; words of the API's paths
// (claims, services, …) cannot name a new namespace, since a route such as
// the feed at /v1/namespaces/claims would shadow it.
//
// Gateway pairing is package gatewaylink, composed here: its Link serves
// the gateway routes, holds this instance's gateway sockets and relays
// RPCs between instances. Register Server.CloseGateways with
// http.Server.RegisterOnShutdown: Shutdown leaves WebSockets open.
//
// The feed keeps per-service state (approved count, change version) in a
// trigger-maintained table: total and ETag cost one row read, an unchanged
// feed answers 304 without reading claims, and the ETag of page 0 changes
// whenever any page changes (what a polling gateway needs). Sequential
// pages continue from a remembered sort key instead of skipping offset
// rows, so reading 100,000 claims in pages of 2,000 costs the same per page.
package controlplane
