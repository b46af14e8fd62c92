// Package credvault is the gateway's credential store. It keeps
// connections, their encrypted upstream secrets, shared credential
// variables and rotation metadata, and puts a connection's credential on
// an outbound request. Beside each connection it keeps its MCP tool pins
// (Records.ToolPins), another package's records.
//
// A Vault sits on a Store. Package sqlitestore gives the gateway's
// default, one SQLite file that the command-line tool and a running
// gateway share; package pgstore, PostgreSQL that a fleet of gateways
// shares, whose commits wake every Vault at once (Notifier); MemoryStore
// keeps the records in memory. Package storetest is the contract they
// pass. Secrets are
// sealed with AES-256-GCM under a 32-byte master key. A wrong master key
// fails at once with ErrWrongMasterKey.
//
// The proxy's hot path is Vault.Lookup: a map read on an immutable
// snapshot of every connection and its decrypted, resolved credential.
// Inject and Vault.Transport put the credential on a request (bearer,
// header_key or query_param). In the two OAuth modes the connection holds
// a client secret and, per account, a sealed refresh token
// (Vault.ConnectAccount); package upstreamauth turns them into access
// tokens. Resolved.Redactions lists the forms in
// which it can come back from an upstream, for a proxy to strip.
//
// A vault in memory, with a secret that references a credential variable
// (ExampleNew runs it):
//
//	v, err := credvault.New(ctx, credvault.Config{Store: &credvault.MemoryStore{}, MasterKey: key})
//	...
//	_, _, _ = v.PutVariable(ctx, "GITHUB_TOKEN", "ghp_example", "alice")
//	_, err = v.Create(ctx, &credvault.Connection{
//		ID: "github", BaseURL: "https://api.github.com",
//		AuthMode: credvault.AuthBearer, AuthSecretKey: "token",
//	}, map[string]string{"token": "{{GITHUB_TOKEN}}"})
//	r, _ := v.Lookup("github")
//	secret, _ := r.Secret() // "ghp_example"
//
// The zero value of every field of Config is the safe one. docs/gateway.md
// lists the connection fields as the admin API shows them; its section
// "Credential store" tells how secrets are sealed, rotated, resolved and
// reloaded. docs/threat-model.md tells what redaction stops and what it
// does not.
package credvault
