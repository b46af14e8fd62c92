package sqldb

// dashboardMigration holds the one-time sign-in links of local and test
// deployments (dashboard_signin.go) and an index for the claims page.
// Only a link's SHA-256 is stored, so the table never holds a usable
// credential.
var dashboardMigration = migration{
	version: 7,
	name:    "dashboard: one-time sign-in links",
	stmts: []string{
		`CREATE TABLE signin_links (
			token_hash TEXT PRIMARY KEY,
			namespace TEXT NOT NULL REFERENCES namespaces(namespace),
			created_at BIGINT NOT NULL,
			expires_at BIGINT NOT NULL
		)`,
		`CREATE INDEX signin_links_expires ON signin_links(expires_at)`,
		// The claims page filtered by service (its rows, its tab counts)
		// and its list of services read this index alone.
		`CREATE INDEX claims_owner_service ON claims(namespace, service, status, created_at)`,
	},
}
