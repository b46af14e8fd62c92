package sqldb

// activityClassesMigration bounds the records with no verified agent
// (agent_key empty) apart from the signed ones, so that the first can
// never evict the second, and adds the per-minute counts of requests
// refused before a signature verified, which are never records.
var activityClassesMigration = migration{
	version: 18,
	name:    "activity: unsigned records bounded apart, unverified refusals counted",
	stmts: []string{
		`ALTER TABLE activity_counts ADD COLUMN unsigned_n BIGINT NOT NULL DEFAULT 0`,
		`UPDATE activity_counts SET
			unsigned_n = (SELECT COUNT(*) FROM activity a WHERE a.namespace = activity_counts.namespace AND a.agent_key = ''),
			n = n - (SELECT COUNT(*) FROM activity a WHERE a.namespace = activity_counts.namespace AND a.agent_key = '')`,
		`CREATE INDEX activity_unsigned_at ON activity(namespace, at, id) WHERE agent_key = ''`,
		`CREATE TABLE activity_unverified (
			namespace TEXT NOT NULL REFERENCES namespaces(namespace),
			gateway_id TEXT NOT NULL,
			minute BIGINT NOT NULL,
			protocol TEXT NOT NULL,
			reason TEXT NOT NULL,
			n BIGINT NOT NULL,
			PRIMARY KEY (namespace, minute, gateway_id, protocol, reason)
		)`,
		`CREATE INDEX activity_unverified_minute ON activity_unverified(minute)`,
	},
}
