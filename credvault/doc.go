// Package credvault is the gateway's credential store: connections, their
// encrypted upstream secrets, shared credential variables and rotation
// metadata. docs/gateway.md lists the connection fields as the admin API
// shows them.
//
// A Vault sits on a Store: package sqlitestore gives the gateway's default,
// one SQLite file that the command-line tool and a running gateway share,
// and MemoryStore keeps the records in memory. Secrets
// are sealed with AES-256-GCM under a 32-byte master key; the additional
// data of every ciphertext names its record (kind, id, version), so a
// ciphertext copied to another record or another version does not open. The
// store holds a sealed key-check value, so opening it with the wrong master
// key fails at once with ErrWrongMasterKey instead of producing garbage.
//
// Only the current secret version of a connection is kept: rotation replaces
// the sealed secrets and increments secret_version in one transaction, and
// rotation_history keeps metadata (version, time, subject, reason) only, so
// a rotated-out credential is gone from the store rather than kept as a
// liability.
//
// Secret values may reference credential variables as {{KEY}}, either as the
// whole value or inline ("Bearer {{KEY}}"). References are resolved when the
// in-memory snapshot is built; a reference that cannot be resolved makes
// Resolved.Secret return ErrCredentialUnresolved, which the gateway answers
// with 500 CREDENTIAL_UNRESOLVED.
//
// A connection's Extensions are members of its JSON object that another
// package owns (the gateway keeps an MCP connection's settings and last
// discovery there): the Vault stores and encodes them beside the
// connection's fields and leaves their checks, their part in the secret's
// route and the further hosts they may send the credential to to
// Config.Extensions, whose zero value refuses them. A document from before
// a field became an extension loads with that member as an extension.
//
// The proxy's hot path is Vault.Lookup: a map read on an immutable snapshot
// of every connection and its decrypted, resolved credential. The snapshot
// is rebuilt after each write through the Vault and, by polling
// Store.Generation, after commits by other processes (the gateway sees a
// change made by the command-line tool within about 250 ms).
//
// Inject and Vault.Transport put a connection's credential on an outbound
// request (bearer, header_key or query_param). Errors returned by the
// transport never carry the credential, including URLs whose query holds it.
// Resolved.Redactions lists the forms in which a credential can come back
// from an upstream (raw, URL- and JSON-escaped, the whole injected header
// value, and the longer variable values it is built from), so a proxy can
// strip them from what it returns.
//
// Configuration follows the repository's one rule: the zero value of every
// field of Config is the safe one (a required field left empty is refused),
// and a protection is turned off only by a field that says so: a negative
// number, an explicit off value, or an Insecure… switch.
package credvault
