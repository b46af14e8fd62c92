package gatewaylink

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/idnhq/idn/controlplane/internal/sqldb"
)

// TestRelayAttackStaleConnectionAnswered: a request relayed to the
// instance holding a gateway's socket names the connection the sender's
// row named; the holder runs it only on that connection, as the sender's
// own instance does, never on another socket it holds for the gateway.
func TestRelayAttackStaleConnectionAnswered(t *testing.T) {
	cfg := dbConfig(t, sqldb.ProviderPostgres)
	a, b := newTestLink(t, openDB(t, cfg), Config{}), newTestLink(t, openDB(t, cfg), Config{})
	seedNamespace(t, a.store.db, "acme")
	g := pairGateway(t, a, "acme", "gateway-key")
	received := holdSocket(t, a, g)
	rec, err := b.store.gateway(context.Background(), "acme", g.ID)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Instance != a.hub.instance {
		t.Fatalf("the gateways row names instance %q, not A's %q", rec.Instance, a.hub.instance)
	}
	rec.ConnID = "wsc_gone" // a connection the gateway had before
	body, _ := json.Marshal(rpcRequest{JSONRPC: "2.0", ID: json.RawMessage(`"rpc_stale"`), Method: "connections.list"})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := b.hub.call(ctx, rec, "rpc_stale", body); err != errGatewayOffline {
		t.Fatalf("relayed to a stale connection: %v, want %v", err, errGatewayOffline)
	}
	if n := received.Load(); n != 0 {
		t.Fatalf("the gateway's current socket received %d requests meant for another connection", n)
	}
}
