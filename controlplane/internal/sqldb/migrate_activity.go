package sqldb

// activityMigration holds the decisions paired gateways report (package
// activity): one row per decision, in the namespace of the owner the
// reporting gateway is paired with, and a row count per namespace that
// the insert keeps under the namespace's bound in the same transaction.
var activityMigration = migration{
	version: 15,
	name:    "activity: decisions reported by paired gateways, counted per namespace",
	stmts: []string{
		`CREATE TABLE activity (
			id TEXT PRIMARY KEY,
			namespace TEXT NOT NULL REFERENCES namespaces(namespace),
			gateway_id TEXT NOT NULL,
			at BIGINT NOT NULL,
			agent_name TEXT NOT NULL,
			agent_key TEXT NOT NULL,
			connection_id TEXT NOT NULL,
			service TEXT NOT NULL,
			protocol TEXT NOT NULL,
			method TEXT NOT NULL,
			route TEXT NOT NULL,
			tool TEXT NOT NULL,
			decision TEXT NOT NULL,
			reason TEXT NOT NULL,
			status INTEGER NOT NULL,
			latency_us BIGINT NOT NULL
		)`,
		`CREATE INDEX activity_namespace_at ON activity(namespace, at, id)`,
		`CREATE INDEX activity_at ON activity(at)`,
		`CREATE TABLE activity_counts (
			namespace TEXT PRIMARY KEY REFERENCES namespaces(namespace),
			n BIGINT NOT NULL
		)`,
	},
}
