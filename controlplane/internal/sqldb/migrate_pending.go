package sqldb

// pendingBudgetMigration supports the pending budgets of claim submission:
// pending claims are counted per namespace and service, and within that
// per agent network (agent_net: the agent's IPv4 address, or its IPv6 /64),
// so one service, or one address, cannot spend a namespace's whole budget.
// Pending claims submitted before it get the IPv4 address as their network;
// an older IPv6 one simply does not count towards its network's share
// until it expires.
var pendingBudgetMigration = migration{
	version: 6,
	name:    "claims: pending budgets per namespace and service, and per agent network",
	stmts: []string{
		`ALTER TABLE claims ADD COLUMN agent_net TEXT NOT NULL DEFAULT ''`,
		`UPDATE claims SET agent_net = agent_ip WHERE status = 'pending' AND agent_ip NOT LIKE '%:%'`,
		`CREATE INDEX claims_pending_budget ON claims(namespace, service, agent_net) WHERE status = 'pending'`,
	},
}
