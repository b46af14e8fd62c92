package sqldb

// connectFlowsMigration holds what the control plane keeps of OAuth
// accounts: the owner's connect flows in progress (package gatewaylink:
// which gateway, connection and subject a state belongs to, the state
// hashed), the account that served each activity record (NULL: none),
// and the accounts an owner was told need reconnecting, so that each
// refusal is told once (package activity).
var connectFlowsMigration = migration{
	version: 23,
	name:    "OAuth accounts: connect flows, the activity's account, reconnect alerts",
	stmts: []string{
		`CREATE TABLE gateway_connect_flows (
			state_hash TEXT PRIMARY KEY,
			namespace TEXT NOT NULL,
			gateway_id TEXT NOT NULL,
			connection_id TEXT NOT NULL,
			subject TEXT NOT NULL,
			expires_at BIGINT NOT NULL
		)`,
		`CREATE INDEX gateway_connect_flows_expires ON gateway_connect_flows(expires_at)`,
		`CREATE INDEX gateway_connect_flows_namespace ON gateway_connect_flows(namespace, expires_at)`,
		`ALTER TABLE activity ADD COLUMN account TEXT`,
		`CREATE TABLE account_alerts (
			namespace TEXT NOT NULL,
			gateway_id TEXT NOT NULL,
			connection_id TEXT NOT NULL,
			account TEXT NOT NULL,
			alerted_at BIGINT NOT NULL,
			PRIMARY KEY (namespace, gateway_id, connection_id, account)
		)`,
	},
}
