package sqldb

// sessionsMigration adds what step-up and session management need.
//
// A credential change (a passkey added or removed) bumps the account's
// credential_version; a session's verification records the version it saw
// and the passkey that made it, so one verification authorises at most one
// change, and a passkey younger than its trusted_from cannot authorise any.
// Sessions also keep the passkey that started them and a coarse client
// description for the owner's session list.
var sessionsMigration = migration{
	version: 5,
	name:    "auth: step-up by established passkeys, session details, per-address login limits",
	stmts: []string{
		`ALTER TABLE accounts ADD COLUMN credential_version BIGINT NOT NULL DEFAULT 0`,
		// Passkeys registered before this migration are all trusted.
		`ALTER TABLE passkeys ADD COLUMN trusted_from BIGINT NOT NULL DEFAULT 0`,
		`ALTER TABLE sessions ADD COLUMN passkey_id TEXT NOT NULL DEFAULT ''`,
		`ALTER TABLE sessions ADD COLUMN verified_passkey TEXT NOT NULL DEFAULT ''`,
		`ALTER TABLE sessions ADD COLUMN verified_version BIGINT NOT NULL DEFAULT -1`,
		`ALTER TABLE sessions ADD COLUMN user_agent TEXT NOT NULL DEFAULT ''`,
		`ALTER TABLE sessions ADD COLUMN client_addr TEXT NOT NULL DEFAULT ''`,
		`CREATE INDEX sessions_passkey ON sessions(passkey_id)`,
		// Per-namespace login counters let strangers lock owners out; the
		// keys that replace them are per client address.
		`DELETE FROM auth_limits WHERE limit_key LIKE 'login:%'`,
	},
}
