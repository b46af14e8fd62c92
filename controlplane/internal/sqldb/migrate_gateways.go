package sqldb

// gatewaysMigration holds gateway pairing (gateways.go): pairing sessions,
// whose code is stored only as a SHA-256, the paired gateways with the
// instance that holds each one's socket, and the rows that carry relay
// messages too large for a PostgreSQL notification.
var gatewaysMigration = migration{
	version: 9,
	name:    "gateways: pairing sessions, paired gateways, relay rows",
	stmts: []string{
		`CREATE TABLE gateway_pairings (
			id TEXT PRIMARY KEY,
			namespace TEXT NOT NULL REFERENCES namespaces(namespace),
			code_hash TEXT NOT NULL,
			failures INTEGER NOT NULL,
			created_at BIGINT NOT NULL,
			expires_at BIGINT NOT NULL,
			ended_at BIGINT
		)`,
		`CREATE INDEX gateway_pairings_namespace ON gateway_pairings(namespace, created_at)`,
		`CREATE INDEX gateway_pairings_expires ON gateway_pairings(expires_at)`,
		// A gateway is its signing key: one row per (identity namespace,
		// public key). Unpairing deletes the row, so the key is unknown
		// from then on. instance and conn_id name the socket that holds
		// the gateway now (NULL when none), last_seen its last heartbeat.
		`CREATE TABLE gateways (
			id TEXT PRIMARY KEY,
			namespace TEXT NOT NULL REFERENCES namespaces(namespace),
			key_namespace TEXT NOT NULL,
			public_key TEXT NOT NULL,
			name TEXT NOT NULL,
			version TEXT NOT NULL,
			hpke_public_key TEXT NOT NULL,
			created_at BIGINT NOT NULL,
			updated_at BIGINT NOT NULL,
			last_seen BIGINT,
			instance TEXT,
			conn_id TEXT
		)`,
		`CREATE UNIQUE INDEX gateways_key ON gateways(key_namespace, public_key)`,
		`CREATE INDEX gateways_namespace ON gateways(namespace, created_at)`,
		`CREATE TABLE gateway_relay (
			id TEXT PRIMARY KEY,
			payload TEXT NOT NULL,
			created_at BIGINT NOT NULL
		)`,
		`CREATE INDEX gateway_relay_created ON gateway_relay(created_at)`,
	},
}
