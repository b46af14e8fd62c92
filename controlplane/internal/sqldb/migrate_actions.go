package sqldb

// actionsMigration holds the action requests paired gateways file for
// calls that wait for their owner's passkey approval (package actions):
// the call's canonical document, its digest, and once decided, the
// owner's assertion that the gateway checks itself.
var actionsMigration = migration{
	version: 21,
	name:    "actions: calls waiting for the owner's passkey approval",
	stmts: []string{
		`CREATE TABLE actions (
			id TEXT PRIMARY KEY,
			namespace TEXT NOT NULL REFERENCES namespaces(namespace),
			gateway_id TEXT NOT NULL,
			gateway_key TEXT NOT NULL,
			connection_id TEXT NOT NULL,
			service TEXT NOT NULL,
			agent_namespace TEXT NOT NULL,
			agent_key TEXT NOT NULL,
			agent_name TEXT NOT NULL,
			subject TEXT NOT NULL,
			target TEXT NOT NULL,
			document TEXT NOT NULL,
			digest TEXT NOT NULL,
			status TEXT NOT NULL,
			created_at BIGINT NOT NULL,
			expires_at BIGINT NOT NULL,
			decided_at BIGINT,
			uses INTEGER NOT NULL,
			until_at BIGINT NOT NULL,
			assertion TEXT NOT NULL
		)`,
		`CREATE INDEX actions_namespace ON actions(namespace, status, created_at)`,
		`CREATE INDEX actions_expires ON actions(expires_at)`,
	},
}
