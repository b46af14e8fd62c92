package gatewaylink

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/idnhq/idn/internal/pairwire"
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
