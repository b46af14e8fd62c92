package sqldb

// revokedTupleMigration indexes the revoked claims by tuple, so a
// submission of a tuple the owner revoked finds the revocation (and
// answers it instead of filing a new claim) with one index probe, which
// mostly finds nothing.
var revokedTupleMigration = migration{
	version: 17,
	name:    "revoked tuples: an index of the revoked claims by tuple",
	stmts: []string{
		`CREATE INDEX claims_revoked_tuple ON claims(namespace, public_key, service) WHERE status = 'revoked'`,
	},
}
