package sqlitestore_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idnhq/idn/approval/holdtest"
	"github.com/idnhq/idn/credvault"
	"github.com/idnhq/idn/credvault/sqlitestore"
)

// Tool pins are kept beside their connection: another handle on the file
// reads them, writing them leaves the connection's record as it was, and
// deleting the connection deletes them.
func TestToolPinsBesideTheConnection(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), sqlitestore.DefaultFileName)
	v := openVault(t, path, -1)
	if _, err := v.Create(ctx, httpConn("x"), map[string]string{"token": "tok-secret-1"}); err != nil {
		t.Fatal(err)
	}
	before, _ := v.Connection("x")
	pins := []byte(`{"tools":{"search":{"sha256":"sha256:00"}}}`)
	if err := v.UpdateToolPins(ctx, "x", func(old []byte) ([]byte, error) {
		if old != nil {
			t.Errorf("pins of a new connection: %s", old)
		}
		return pins, nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := v.UpdateToolPins(ctx, "nobody", func([]byte) ([]byte, error) { return pins, nil }); err != credvault.ErrNotFound {
		t.Errorf("pins of a connection that does not exist: %v", err)
	}
	again := openVault(t, path, -1)
	if got := string(again.ToolPins("x")); got != string(pins) {
		t.Errorf("reopened pins %q", got)
	}
	if after, _ := again.Connection("x"); !after.UpdatedAt.Equal(before.UpdatedAt) {
		t.Error("writing the pins rewrote the connection")
	}
	if err := again.Delete(ctx, "x"); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRow("SELECT count(*) FROM tool_pins").Scan(&n); err != nil || n != 0 {
		t.Errorf("%d pin rows after the connection's deletion (%v)", n, err)
	}
}

// A file of the first schema, written before tool pins and holds existed,
// opens with its connections and takes pins and holds.
func TestMigratesAFileWithoutToolPins(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), sqlitestore.DefaultFileName)
	v := openVault(t, path, -1)
	if _, err := v.Create(ctx, httpConn("x"), map[string]string{"token": "tok-secret-1"}); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"DROP TABLE tool_pins", "DROP TABLE approval_holds", "PRAGMA user_version = 1"} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	old := openVault(t, path, -1)
	if _, ok := old.Lookup("x"); !ok {
		t.Fatal("the connection is lost")
	}
	if err := old.UpdateToolPins(ctx, "x", func([]byte) ([]byte, error) { return []byte(`{}`), nil }); err != nil {
		t.Fatal(err)
	}
	st, err := sqlitestore.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.Holds().Add(ctx, holdtest.NewHold(strings.Repeat("0", 64)), holdtest.Now); err != nil {
		t.Fatal(err)
	}
}
