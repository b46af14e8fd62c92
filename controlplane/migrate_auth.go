package controlplane

// authMigration holds the passkey account tables (issue 7).
var authMigration = migration{version: 3, name: "auth: passkeys, challenges, rate limits"}
