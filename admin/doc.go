// Package admin is the gateway's admin API as a mountable http.Handler. It
// serves connections, credential variables and the service catalog under
// /api/admin/, on top of a credvault.Vault. The same operations are
// methods of Handler (CreateConnection, TestConnection, …) for callers in
// process, such as the pairing client; Problem says how their errors are
// answered.
//
// Secrets are write-only: no response, log line or error carries a secret
// value. Every route is behind an Access policy (see NewAccess): hybrid
// (loopback peer or bearer token, the default), loopback or token.
// Access.Wrap is also the middleware the gateway puts in front of
// /metrics.
//
// Changing where or how a stored secret is sent needs the admin token, or
// OwnerContext for the owner's RPCs over pairing, whatever the mode. Any
// process on the gateway host is a loopback client. Without this rule it
// could point a connection at its own listener and receive the credential.
//
// Mounted on a mux (ExampleNew runs it):
//
//	access, err := admin.NewAccess(admin.AccessConfig{AccessOptions: admin.AccessOptions{
//		Mode: admin.AccessToken, Token: "example-admin-token-123456"}})
//	...
//	h, err := admin.New(admin.Config{Vault: vault, Access: access, CatalogFile: catalog})
//	...
//	mux.Handle("/api/admin/", h)
//
// The zero value of every field of Config, AccessConfig and AccessOptions
// is the safe one. docs/gateway.md lists every route, field and error code
// ("Admin (operator)"), and who may change what ("Authentication").
// docs/threat-model.md tells what a process on the gateway host can and
// cannot do.
package admin
