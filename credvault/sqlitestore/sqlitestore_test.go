package sqlitestore_test

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/idnhq/idn/credvault"
	"github.com/idnhq/idn/credvault/sqlitestore"
	"github.com/idnhq/idn/credvault/storetest"
)

func testKey(t testing.TB) credvault.MasterKey {
	t.Helper()
	k, err := credvault.ParseMasterKey("AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=")
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func httpConn(id string) *credvault.Connection {
	return &credvault.Connection{ID: id, Name: "GitHub", BaseURL: "https://api.github.com", AuthMode: credvault.AuthBearer, AuthSecretKey: "token"}
}

// openVault opens a store handle of its own on path and a Vault on it,
// as each process sharing the file does.
func openVault(t testing.TB, path string, poll time.Duration) *credvault.Vault {
	t.Helper()
	st, err := sqlitestore.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	v, err := credvault.New(context.Background(), credvault.Config{Store: st, MasterKey: testKey(t), PollInterval: poll,
		Extensions: credvault.Extensions{Check: func(*credvault.Connection) error { return nil }}})
	if err != nil {
		st.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		v.Close()
		st.Close()
	})
	return v
}

func TestOpenRefusesNewerSchema(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), sqlitestore.DefaultFileName)
	st, err := sqlitestore.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	db, _ := sql.Open("sqlite", path)
	db.Exec("PRAGMA user_version = 99")
	db.Close()
	if _, err := sqlitestore.Open(context.Background(), path); err == nil {
		t.Fatal("opened a store from a newer schema")
	}
}

func TestFilesArePrivate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	v := openVault(t, filepath.Join(dir, sqlitestore.DefaultFileName), -1)
	if _, err := v.Create(context.Background(), httpConn("x"), map[string]string{"token": "tok-secret-1"}); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		fi, _ := e.Info()
		if fi.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s has mode %v; want no group or other access", e.Name(), fi.Mode().Perm())
		}
	}
}

// TestCiphertextSwappedInFile moves one connection's sealed secrets onto
// another record in the database file: the swapped record must become
// unresolved, never yield the other connection's secret.
func TestCiphertextSwappedInFile(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), sqlitestore.DefaultFileName)
	v := openVault(t, path, -1)
	v.Create(ctx, httpConn("victim"), map[string]string{"token": "victim-secret"})
	v.Create(ctx, httpConn("attacker"), map[string]string{"token": "attacker-secret"})
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`UPDATE connections SET sealed_secrets = (SELECT sealed_secrets FROM connections WHERE id = 'victim') WHERE id = 'attacker'`); err != nil {
		t.Fatal(err)
	}
	r, _ := openVault(t, path, -1).Lookup("attacker")
	if s, err := r.Secret(); !errors.Is(err, credvault.ErrCredentialUnresolved) {
		t.Fatalf("swapped ciphertext opened: %q, %v", s, err)
	}
}

// TestContract runs the store contract on a file that every handle opens.
func TestContract(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) func(*testing.T) credvault.Store {
		path := filepath.Join(t.TempDir(), sqlitestore.DefaultFileName)
		return func(t *testing.T) credvault.Store {
			st, err := sqlitestore.Open(context.Background(), path)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			return st
		}
	})
}
