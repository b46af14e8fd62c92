package sqldb

// authMigration holds the passkey account tables (issue 7). Everything a
// ceremony or a rate limit needs lives in the database, so instances
// sharing one PostgreSQL see each other's challenges and counters.
var authMigration = migration{
	version: 3,
	name:    "auth: passkeys, challenges, rate limits",
	stmts: []string{
		// Account settings (0/1: portable across both engines).
		`ALTER TABLE accounts ADD COLUMN email_notifications INTEGER NOT NULL DEFAULT 1`,
		`ALTER TABLE accounts ADD COLUMN webhook_failures_notify INTEGER NOT NULL DEFAULT 1`,
		// A passkey is a WebAuthn credential record of a namespace's owner.
		// credential holds the library's credential record as JSON (public
		// key, flags, raw attestation); sign_count is its own column so a
		// counter regression is refused by one conditional UPDATE.
		`CREATE TABLE passkeys (
			id TEXT PRIMARY KEY,
			namespace TEXT NOT NULL REFERENCES namespaces(namespace),
			credential_id TEXT NOT NULL UNIQUE,
			name TEXT NOT NULL,
			algorithm INTEGER NOT NULL,
			sign_count BIGINT NOT NULL,
			credential TEXT NOT NULL,
			created_at BIGINT NOT NULL,
			last_used_at BIGINT
		)`,
		`CREATE INDEX passkeys_namespace ON passkeys(namespace, created_at)`,
		// A challenge is single-use (consumed by DELETE … RETURNING) and
		// bound to its ceremony kind, namespace and, for ceremonies run
		// inside a session, the session id ('' otherwise).
		`CREATE TABLE webauthn_challenges (
			challenge TEXT PRIMARY KEY,
			kind TEXT NOT NULL,
			namespace TEXT NOT NULL,
			session_id TEXT NOT NULL,
			data TEXT NOT NULL,
			expires_at BIGINT NOT NULL
		)`,
		`CREATE INDEX webauthn_challenges_expires ON webauthn_challenges(expires_at)`,
		// One row per rate-limited key ("signup:<ip>", "login:<namespace>"):
		// attempts in the current fixed window, and the consecutive failures
		// that set the exponential backoff.
		`CREATE TABLE auth_limits (
			limit_key TEXT PRIMARY KEY,
			window_start BIGINT NOT NULL,
			attempts INTEGER NOT NULL,
			failures INTEGER NOT NULL,
			blocked_until BIGINT NOT NULL
		)`,
		`CREATE INDEX auth_limits_window ON auth_limits(window_start)`,
	},
}
