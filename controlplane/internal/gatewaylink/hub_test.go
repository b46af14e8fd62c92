package gatewaylink

import (
	"context"
	"encoding/json"
	"github.com/idnhq/idn/controlplane/internal/sqldb/sqldbtest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/idnhq/idn/controlplane/internal/sqldb"
	"github.com/idnhq/idn/pairing/pairwire"
)

// twoLinks is two instances' links on one PostgreSQL database, each with
// its own connection pool, as two processes behind a load balancer have;
// A holds a socket of a gateway of acme.
func twoLinks(t *testing.T) (a, b *Link, g gatewayRecord, held *heldGateway) {
	t.Helper()
	cfg := sqldbtest.Config(t, sqldb.ProviderPostgres)
	a, b = newTestLink(t, openDB(t, cfg), Config{}), newTestLink(t, openDB(t, cfg), Config{})
	seedNamespace(t, a.store.db, "acme")
	g = pairGateway(t, a, "acme", "gateway-key")
	held = holdSocket(t, a, g)
	// The row as it names its holder now.
	g, err := b.store.gateway(context.Background(), "acme", g.ID)
	if err != nil {
		t.Fatal(err)
	}
	if g.Instance != a.hub.instance {
		t.Fatalf("the gateways row names instance %q, not A's %q", g.Instance, a.hub.instance)
	}
	return a, b, g, held
}

func rpcBody(t *testing.T, rid, method string, params any) []byte {
	t.Helper()
	p, _ := json.Marshal(params)
	b, err := json.Marshal(rpcRequest{JSONRPC: "2.0", ID: json.RawMessage(`"` + rid + `"`), Method: method, Params: p})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestHubRelaysAcrossInstances: an RPC sent through B reaches the socket A
// holds and B gets the answer, through a relay row when it is larger
// than a notification; B's close reaches A's socket too.
func TestHubRelaysAcrossInstances(t *testing.T) {
	_, b, g, held := twoLinks(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	answer, err := b.hub.call(ctx, g, "rpc_small", rpcBody(t, "rpc_small", "connections.list", nil))
	if err != nil || !strings.Contains(string(answer), `"method":"connections.list"`) || !strings.Contains(string(answer), `"id":"rpc_small"`) {
		t.Fatalf("answer through A: %s, %v", answer, err)
	}
	big := strings.Repeat("x", 100_000)
	answer, err = b.hub.call(ctx, g, "rpc_big", rpcBody(t, "rpc_big", "variables.set", map[string]string{"sealed_secrets": big}))
	if err != nil || !strings.Contains(string(answer), big) {
		t.Fatalf("large answer through A lost its body (%d bytes): %v", len(answer), err)
	}
	var rows int
	if err := b.store.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM gateway_relay`).Scan(&rows); err != nil || rows != 0 {
		t.Fatalf("%d relay rows left behind (%v)", rows, err)
	}
	b.hub.close(ctx, g, websocketStatusUnpaired, "unpaired by the owner")
	select {
	case err := <-held.closed:
		if code := websocket.CloseStatus(err); code != pairwire.CloseUnpaired {
			t.Fatalf("close status = %d, want %d", code, pairwire.CloseUnpaired)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("A's socket still open after B's close")
	}
}

// TestRelayAttackStaleConnectionAnswered: a request relayed to the
// instance holding a gateway's socket names the connection the sender's
// row named; the holder runs it only on that connection, as the sender's
// own instance does, never on another socket it holds for the gateway.
func TestRelayAttackStaleConnectionAnswered(t *testing.T) {
	_, b, g, held := twoLinks(t)
	g.ConnID = "wsc_gone" // a connection the gateway had before
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := b.hub.call(ctx, g, "rpc_stale", rpcBody(t, "rpc_stale", "connections.list", nil)); err != errGatewayOffline {
		t.Fatalf("relayed to a stale connection: %v, want %v", err, errGatewayOffline)
	}
	if n := held.received.Load(); n != 0 {
		t.Fatalf("the gateway's current socket received %d requests meant for another connection", n)
	}
}
