// Package controlplane is the idn control plane, composed from parts: the
// HTTP API that docs/control-plane.md lists route by route, the owner
// dashboard, and the background work behind them.
//
// # Use
//
// Open returns a Store (SQLite or PostgreSQL behind one versioned schema);
// New returns a Server, an http.Handler.
//
//	store, err := controlplane.Open(ctx, controlplane.StoreConfig{SQLitePath: "cp.db"})
//	cp, err := controlplane.New(controlplane.Config{Store: store, JWTSecret: secret})
//	err = cp.Start(ctx) // maintenance, webhook and registry workers
//	srv := &http.Server{Handler: cp}
//	err = cp.Up(ctx) // ready to serve
//	srv.Shutdown(ctx); cp.Close(); store.Close()
//
// Close stops the background work and closes the gateways' sockets. Call it
// after the http.Server's Shutdown, which leaves WebSockets open. The
// gateway has the same lifecycle. Provision, IssueSession and SigninLink
// set an owner up without HTTP, as the quickstart does.
//
// Several instances may share one PostgreSQL database. Nonces, sessions,
// claims, webhook deliveries and registry writes live there. Gateway RPCs
// are relayed between instances, and a claim change wakes the feed requests
// waiting for it on every instance. docs/control-plane.md ("Embedding")
// tells the rest.
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
// Beneath them lie four plumbing packages:
//
//   - internal/sqldb: the database handle (the write turn, error classes,
//     the migrations);
//   - internal/web: the HTTP plumbing (body budget, error envelope,
//     origins);
//   - internal/signed: the admission of signed requests;
//   - internal/wake: the long poll's waits, woken in process and across
//     instances by PostgreSQL's NOTIFY.
//
// # Dependencies between parts
//
// A part depends on another only through what it is handed at
// construction:
//
//   - the owner middleware (web.Owner) and the signed-request gate;
//   - hooks for changes it reports (claims.Hooks.Changed, ownerauth.Hooks);
//   - for claims, the registry writer;
//   - for claims, the owners of paired gateways (claims.Config.Gateways,
//     which gatewaylink's Link answers).
//
// So a paired gateway stands for its owner's services without claims
// importing gatewaylink. No part imports the composition. The only part
// other parts import is claims (for its records and its read API), besides
// webhooks' event names.
package controlplane
