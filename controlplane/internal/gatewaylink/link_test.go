package gatewaylink

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/idnhq/idn/controlplane/internal/sqldb"
	"github.com/idnhq/idn/controlplane/internal/sqldb/sqldbtest"
	"github.com/idnhq/idn/pairing/pairwire"
)

// TestUnpairNamespace: account deletion, served by one instance, unpairs
// the namespace's gateways in its own transaction and, once committed,
// closes the socket another instance holds, at once rather than at its
// next heartbeat.
func TestUnpairNamespace(t *testing.T) {
	_, b, g, held := twoLinks(t)
	ctx := context.Background()
	var closeSockets func(context.Context)
	err := b.store.db.Tx(ctx, func(tx *sql.Tx) (err error) {
		closeSockets, err = b.UnpairNamespace(ctx, tx, "acme")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Gateway(ctx, "acme", g.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("gateway after unpairing: %v, want ErrNotFound", err)
	}
	closeSockets(ctx)
	select {
	case err := <-held.closed:
		if code := websocket.CloseStatus(err); code != pairwire.CloseUnpaired {
			t.Fatalf("close status = %d, want %d", code, pairwire.CloseUnpaired)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the socket is still open after the namespace was unpaired")
	}
}

// TestPairedOwner: a paired key names its owner's namespace from the
// moment it pairs, and nobody's once it is unpaired; another key, even
// under the same key namespace, names nobody.
func TestPairedOwner(t *testing.T) {
	db := openDB(t, sqldbtest.Config(t, sqldb.ProviderSQLite))
	seedNamespace(t, db, "acme")
	l := newTestLink(t, db, Config{})
	ctx := context.Background()
	owner := func(keyNS, pub string) string {
		t.Helper()
		ns, err := l.PairedOwner(ctx, keyNS, pub)
		if err != nil {
			t.Fatal(err)
		}
		return ns
	}
	const pub, other = "ed25519:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=", "ed25519:BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBA="
	if ns := owner("gw-host", pub); ns != "" {
		t.Fatalf("before pairing: %q", ns)
	}
	g := pairGateway(t, l, "acme", pub)
	if ns := owner("acme", pub); ns != "acme" {
		t.Fatalf("paired key: %q, want acme", ns)
	}
	if ns := owner("acme", other); ns != "" {
		t.Fatalf("another key of the same key namespace: %q", ns)
	}
	if _, err := l.store.deleteGateway(ctx, "acme", g.ID); err != nil {
		t.Fatal(err)
	}
	if ns := owner("acme", pub); ns != "" {
		t.Fatalf("unpaired key: %q", ns)
	}
}
