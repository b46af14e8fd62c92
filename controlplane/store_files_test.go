package controlplane

import (
	"context"
	"github.com/idnhq/idn/controlplane/internal/claims"
	"os"
	"path/filepath"
	"testing"
)

// TestSQLiteFilesArePrivate checks that the database and its WAL companions,
// which hold sessions, passkeys and claims, are readable by their owner only,
// both when Open creates them and when an older deployment left them 0644.
func TestSQLiteFilesArePrivate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		prepare func(t *testing.T, path string)
	}{
		{"fresh data directory", func(*testing.T, string) {}},
		{"world-readable database left by an older version", func(t *testing.T, path string) {
			st := openStore(t, StoreConfig{Provider: ProviderSQLite, SQLitePath: path})
			st.Close()
			for _, p := range []string{path, path + "-wal", path + "-shm"} {
				if err := os.Chmod(p, 0o644); err != nil && !os.IsNotExist(err) {
					t.Fatal(err)
				}
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "data")
			path := filepath.Join(dir, "controlplane.db")
			tc.prepare(t, path)
			st := openStore(t, StoreConfig{Provider: ProviderSQLite, SQLitePath: path})
			if _, err := claimsAPI(st).Provision(context.Background(), "acme", claims.ServiceSpec{}); err != nil {
				t.Fatal(err)
			}
			if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
				t.Errorf("data directory: %v, %v; want 0700", fi.Mode().Perm(), err)
			}
			for _, p := range []string{path, path + "-wal", path + "-shm"} {
				fi, err := os.Stat(p)
				if err != nil {
					t.Fatalf("%s: %v", filepath.Base(p), err)
				}
				if fi.Mode().Perm() != 0o600 {
					t.Errorf("%s mode %v, want 0600", filepath.Base(p), fi.Mode().Perm())
				}
			}
		})
	}
}
