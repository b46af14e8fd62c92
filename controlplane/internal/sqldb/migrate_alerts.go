package sqldb

// alertsMigration gives an account the address its alerts are mailed to:
// the owner's own, set in the account settings (empty = none; accounts
// start without one, since sign-up asks for a passkey only).
var alertsMigration = migration{
	version: 10,
	name:    "alerts: the owner's e-mail address",
	stmts: []string{
		`ALTER TABLE accounts ADD COLUMN alert_email TEXT NOT NULL DEFAULT ''`,
	},
}
