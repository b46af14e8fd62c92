package sqldb

// ownerKeysMigration holds each owner's latest passkey-set change, signed
// by a passkey paired gateways pinned (package actions), so a gateway that
// was offline gets it when it reconnects.
var ownerKeysMigration = migration{
	version: 22,
	name:    "owner_key_updates: the owner's signed passkey-set changes",
	stmts: []string{
		`CREATE TABLE owner_key_updates (
			namespace TEXT PRIMARY KEY REFERENCES namespaces(namespace),
			version BIGINT NOT NULL,
			body TEXT NOT NULL,
			created_at BIGINT NOT NULL
		)`,
	},
}
