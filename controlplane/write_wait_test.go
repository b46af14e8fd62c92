package controlplane

import (
	"context"
	"database/sql"
	"errors"
	"github.com/idnhq/idn/controlplane/internal/sqldb"
	"net/http"
	"path/filepath"
	"testing"
	"time"
)

// TestSQLiteWriteWaitIsBounded: SQLite has one writer. A request that
// cannot have it within WriteWait, because another transaction of this
// instance or another process holds it, is answered at once with 503
// DATABASE_BUSY and a Retry-After, instead of stalling; once the writer is
// free the same request succeeds.
func TestSQLiteWriteWaitIsBounded(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "cp.db")
	st := openStore(t, StoreConfig{SQLitePath: path, WriteWait: 50 * time.Millisecond})
	e := newEnv(t, st, nil)
	_, key := claimWorld(e)
	submit := func() resp {
		return e.signed("POST", "/v1/claims", submitBody("acme", pubKey(newAgent(t, "acme")), "github"), withKey(key))
	}
	busy := func(t *testing.T) {
		t.Helper()
		r := submit().want(t, http.StatusServiceUnavailable, "DATABASE_BUSY")
		if r.header.Get("Retry-After") != "1" {
			t.Fatalf("Retry-After = %q, want 1", r.header.Get("Retry-After"))
		}
		// Every other write (a nonce, here) waits its turn the same way.
		_, err := st.db.Exec(context.Background(), `INSERT INTO nonces (scope, nonce, expires_at) VALUES ('acme', 'n-1', 0)`)
		if err = sqldb.Err("insert nonce", err); !errors.Is(err, ErrBusy) {
			t.Fatalf("nonce while the writer is held: %v, want ErrBusy", err)
		}
	}

	t.Run("a transaction of this instance holds the writer", func(t *testing.T) {
		held, release, done := make(chan struct{}), make(chan struct{}), make(chan error)
		go func() {
			done <- st.db.Tx(context.Background(), func(*sql.Tx) error {
				close(held)
				<-release
				return nil
			})
		}()
		<-held
		busy(t)
		close(release)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		submit().want(t, http.StatusCreated, "")
	})
	t.Run("another process holds the writer", func(t *testing.T) {
		other, err := sql.Open("sqlite", "file:"+path)
		if err != nil {
			t.Fatal(err)
		}
		defer other.Close()
		conn, err := other.Conn(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if _, err := conn.ExecContext(context.Background(), `BEGIN IMMEDIATE`); err != nil {
			t.Fatal(err)
		}
		busy(t)
		if _, err := conn.ExecContext(context.Background(), `ROLLBACK`); err != nil {
			t.Fatal(err)
		}
		submit().want(t, http.StatusCreated, "")
	})
}
