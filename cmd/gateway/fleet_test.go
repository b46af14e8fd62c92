package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

// fleetDatabase creates a database of the test's own in the server named
// by IDN_TEST_POSTGRES_URL, dropped when the test ends.
func fleetDatabase(t *testing.T) string {
	t.Helper()
	base := os.Getenv("IDN_TEST_POSTGRES_URL")
	if base == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("IDN_TEST_POSTGRES_URL is unset but CI=true: PostgreSQL tests must run in CI (see .ci/run)")
		}
		t.Skip("PostgreSQL tests skipped: IDN_TEST_POSTGRES_URL is unset (bash .ci/run starts a server)")
	}
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	var b [6]byte
	rand.Read(b[:])
	name := "gateway_" + hex.EncodeToString(b[:])
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		admin.Close(ctx)
		t.Fatal(err)
	}
	t.Cleanup(func() {
		admin.Exec(ctx, "DROP DATABASE "+name+" WITH (FORCE)")
		admin.Close(ctx)
	})
	u, _ := url.Parse(base)
	u.Path = "/" + name
	return u.String()
}

// TestFleetCommandLine: with GATEWAY_DATABASE_URL, the command-line tool
// of any host works on the fleet's store, not on its data directory.
func TestFleetCommandLine(t *testing.T) {
	t.Parallel()
	dbURL := fleetDatabase(t)
	a, b := newCLIRunner(t), newCLIRunner(t)
	a.env["GATEWAY_DATABASE_URL"], b.env["GATEWAY_DATABASE_URL"] = dbURL, dbURL
	if r := a.run("add", "--id", "gh", "--base-url", "https://api.github.com", "--auth-mode", "bearer",
		"--auth-secret-key", "token", "--secret", "token=ghp_fleet_secret_1"); r.code != 0 {
		t.Fatalf("add on host a: %+v", r)
	}
	if r := b.run("list"); r.code != 0 || !strings.Contains(r.stdout, "gh") {
		t.Fatalf("list on host b: %+v", r)
	}
	if _, err := os.Stat(filepath.Join(a.env["GATEWAY_DATA_DIR"], "gateway.db")); err == nil {
		t.Error("the tool wrote gateway.db in the data directory instead of the fleet's store")
	}
	if r := b.run("pair", "--status"); r.code != 0 || !strings.Contains(r.stdout, "paired: no") || !strings.Contains(r.stdout, "running: no") {
		t.Fatalf("pair --status of the fleet: %+v", r)
	}
	other := newCLIRunner(t)
	other.env["GATEWAY_DATABASE_URL"] = dbURL
	other.env["GATEWAY_MASTER_KEY"] = "AQECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="
	if r := other.run("list"); r.code == 0 || !strings.Contains(r.stderr, "master key") {
		t.Fatalf("list with another master key: %+v", r)
	}
	a.assertNoSecrets("ghp_fleet_secret_1")
	b.assertNoSecrets("ghp_fleet_secret_1")
}
