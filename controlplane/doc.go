// Package controlplane is the idn control plane, composed from parts: the
// HTTP API that docs/control-plane.md lists route by route, the owner
// dashboard, and the background work behind them.
//
// # Use
//
// Open returns a Store (SQLite or PostgreSQL behind one versioned schema);
// New returns a Server, an http.Handler. Start runs its background work
// (maintenance every minute, webhook and registry workers), Up waits until
// it is ready to serve, and Close stops the work and closes the gateways'
// sockets; call Close after the http.Server's Shutdown, which leaves
// WebSockets open. The gateway has the same lifecycle. Provision, IssueSession and
// SigninLink set an owner up without HTTP, as the quickstart does.
// Several instances may share one PostgreSQL database: nonces, sessions,
// claims, webhook deliveries and registry writes live there, gateway
// RPCs are relayed between instances, and a claim change wakes the feed
// requests waiting for it on every instance.
//
// # Parts
//
// Each part is a package under internal/ with its own store over the
// shared database, its routes and its error rules. They are private: this
// package is the one public door. It wires them and keeps what spans them
// (the test seed, account deletion, metrics, health, CORS, tracing):
//
//   - claims: namespaces, services and API keys, the claim lifecycle, the
//     approved-claims feed and DID resolution (Core), and the API the
//     others read (Provision, Retire, the owner's listings);
//   - ownerauth: passkey accounts and owner sessions (Accounts, Sessions),
//     whose Sessions.Owner admits every owner route of the other parts;
//   - webhooks: the webhook routes, the delivery worker and its signer;
//     webhooks/egress holds the SSRF guard and DNS-over-HTTPS client,
//     alertmail the alert e-mail both webhooks and passkey changes send;
//   - gatewaylink: gateway pairing, the gateways' WebSockets and the RPC
//     relay (Link);
//   - activity: the decisions paired gateways report, bounded by age and
//     per namespace, listed and exported for their owner (Activity);
//   - registrywriter: registry writes to a chain (Writer), behind the
//     three-method Backend that registry/evm implements;
//   - dashboard: the owner's pages over the others' read APIs.
//
// Beneath them, internal/sqldb is the database handle (the write turn,
// error classes, the migrations), internal/web the HTTP plumbing (body
// budget, error envelope, origins), internal/signed the admission of
// signed requests and internal/wake the long poll's waits (woken in
// process, and across instances by PostgreSQL's NOTIFY).
//
// # Dependencies between parts
//
// A part depends on another only through what it is handed at
// construction: the owner middleware (web.Owner), the signed-request gate,
// hooks for changes it reports (claims.Hooks.Changed, ownerauth.Hooks),
// the registry writer for claims, and for claims the owners of paired
// gateways (claims.Config.Gateways, which gatewaylink's Link answers), so
// a paired gateway stands for its owner's services without claims
// importing gatewaylink. No part imports the composition, and the
// only part other parts import is claims (for its records and its read
// API) and webhooks' event names.
package controlplane
