package sqlitestore_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/idnhq/idn/credvault"
	"github.com/idnhq/idn/credvault/sqlitestore"
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

// A connection reads back from the file as it was written: its fields, its
// extensions in their order, its switches.
func TestRecordsSurviveReopening(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), sqlitestore.DefaultFileName)
	v := openVault(t, path, -1)
	c := httpConn("x")
	c.AllowUpstreamCookies = true
	c.Extensions = map[string]json.RawMessage{"z_list": json.RawMessage(`["a","b"]`), "a_obj": json.RawMessage(`{"k":1}`)}
	if _, err := v.Create(context.Background(), c, map[string]string{"token": "tok-secret-1"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := v.PutVariable(context.Background(), "K", "variable-value", "alice"); err != nil {
		t.Fatal(err)
	}
	again := openVault(t, path, -1)
	got, ok := again.Lookup("x")
	if !ok {
		t.Fatal("connection lost on reopening")
	}
	if !got.Connection.AllowUpstreamCookies || !reflect.DeepEqual(got.Connection.Extensions, c.Extensions) {
		t.Errorf("reopened connection = %+v", got.Connection)
	}
	if s, err := got.Secret(); err != nil || s != "tok-secret-1" {
		t.Errorf("reopened secret = %q, %v", s, err)
	}
	if vars := again.Variables(); len(vars) != 1 || vars[0].Key != "K" || vars[0].CreatedBySubject != "alice" {
		t.Errorf("reopened variables = %+v", vars)
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

// TestHandlesSeeEachOtherWithinOneSecond writes through one handle on the
// file and waits for a polling Vault on another to see it, as a running
// gateway sees the command-line tool's writes.
func TestHandlesSeeEachOtherWithinOneSecond(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), sqlitestore.DefaultFileName)
	reader := openVault(t, path, 0)
	writer := openVault(t, path, -1)
	start := time.Now()
	if _, err := writer.Create(context.Background(), httpConn("fresh"), map[string]string{"token": "tok-secret-1"}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Second)
	for {
		if _, ok := reader.Lookup("fresh"); ok {
			t.Logf("visible after %v", time.Since(start))
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("write by another handle not visible within one second")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestConcurrentWritersShareOneFile writes from two handles at once (as
// the CLI and a running gateway do): every write lands.
func TestConcurrentWritersShareOneFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), sqlitestore.DefaultFileName)
	a := openVault(t, path, -1)
	b := openVault(t, path, -1)
	const n = 25
	errs := make(chan error, 2*n)
	for _, w := range []struct {
		v      *credvault.Vault
		prefix string
	}{{a, "a"}, {b, "b"}} {
		go func() {
			for i := 0; i < n; i++ {
				_, err := w.v.Create(context.Background(), httpConn(fmt.Sprintf("%s-%d", w.prefix, i)), map[string]string{"token": "tok-secret-1"})
				errs <- err
			}
		}()
	}
	for i := 0; i < 2*n; i++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if got := len(openVault(t, path, -1).Connections()); got != 2*n {
		t.Fatalf("%d connections stored, want %d", got, 2*n)
	}
}
