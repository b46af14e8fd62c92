package sqldb

// registryMigration adds what registry writes show and need beyond the
// claim hashes of version 4 (issue 19): the reason of a claim's failed
// write, shown to its owner, and the registration hash of a namespace,
// whose absence puts the namespace on the registry's to-do list.
var registryMigration = migration{
	version: 8,
	name:    "registry: claim write errors, namespace registration hashes",
	stmts: []string{
		`ALTER TABLE claims ADD COLUMN registry_error TEXT`,
		`ALTER TABLE namespaces ADD COLUMN registration_tx_hash TEXT`,
		`CREATE INDEX namespaces_registry_todo ON namespaces(created_at)
			WHERE registration_tx_hash IS NULL AND deactivated_at IS NULL`,
	},
}
