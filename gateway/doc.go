// Package gateway is a complete idn gateway as a library: the credential
// vault (credvault) sealed in a SQLite file or a store a fleet shares
// (Config.Store), the approved-claims cache and
// its feed poller (claimcache), claim submission for unknown callers, the
// nonce store (replay), the signed runtime pipeline (proxy), the MCP proxy
// (mcpproxy), the admin API (admin), Prometheus metrics and health checks,
// wired as cmd/gateway runs them. The gateway is where the layers meet:
// its mcp.go adapts the vault's connections, the proxy's verified caller
// and the proxy's MCP observer to mcpproxy, so proxy and mcpproxy import
// neither each other.
//
// A Gateway is an http.Handler; it never owns a listener or the process.
// Configure it with a Config whose zero fields take sensible defaults,
// call Start for the background work (the claims feed poll), Up to wait
// until it is ready to serve, serve it with any http.Server (NewServer has
// the recommended timeouts), and Close it when done:
//
//	gw, err := gateway.New(gateway.Config{
//		DataDir:       dir,
//		MasterKey:     key,
//		ControlPlaneURL:   "https://idn.example",
//		ServiceAPIKey: apiKey,
//		Logger:        slog.Default(),
//	})
//	if err != nil { … }
//	defer gw.Close()
//	if err := gw.Start(ctx); err != nil { … }
//	if err := gw.Up(ctx); err != nil { … } // claims loaded
//	http.Handle("/idn/", http.StripPrefix("/idn", gw))
//
// Routes, relative to where it is mounted: /proxy/{connection_id}/{path}
// and /mcp/{connection_id}/… for agents (signed, RFC 9421 profile
// idn-rfc9421-v1), /api/admin/… for the operator, /metrics and /health,
// /health/live, /health/ready. Mounted under a prefix with
// http.StripPrefix, signatures are still checked against the request-target
// the client sent, prefix included, so an agent signs the URL it calls.
//
// The claims feed and claim filings carry the gateway's own signature and
// a service API key (Config.ServiceAPIKey, Config.ConnectionAPIKey). A
// gateway paired with its owner's dashboard (package pairing, gateway
// pair) needs no key for that owner's services: where it has none, its
// signature alone stands for them (Config.Paired), so a connection the
// owner adds from the dashboard serves at once. An unpaired gateway
// refuses, at creation, a connection whose service it has no key for
// (409 SERVICE_API_KEY_MISSING).
//
// The nonce store survives a restart: Close saves it to DataDir and New
// loads it, and after a crash New refuses what the dead process may have
// accepted (docs/gateway.md, "Nonces across a restart").
//
// It reads no environment variable: cmd/gateway maps the GATEWAY_* and
// IDN_* settings onto Config; the errors that name a missing key name
// cmd/gateway's variables for it.
//
// Configuration follows the repository's one rule: the zero value of every
// field of Config is the safe one (a required field left empty is refused),
// and a protection is turned off only by a field that says so: a negative
// number, an explicit off value, or an Insecure… switch.
package gateway
