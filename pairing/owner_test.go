package pairing_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/idnhq/idn/approval"
	"github.com/idnhq/idn/approval/approvaltest"
	"github.com/idnhq/idn/pairing"
	"github.com/idnhq/idn/pairing/pairwire"
)

// TestOwnerKeysUpdate: the owner's passkeys pinned at pairing change only
// by an update a pinned passkey signed, live (owner_keys.update) or at a
// reconnect (ready's owner_keys_update); a forged or replayed update and a
// control plane's own owner_keys after pairing leave them as they are.
func TestOwnerKeysUpdate(t *testing.T) {
	const rp, origin = "idn.example", "https://idn.example"
	old, added, forger := approvaltest.NewPasskey(rp, origin), approvaltest.NewPasskey(rp, origin), approvaltest.NewPasskey(rp, origin)
	update := func(signer *approvaltest.Passkey, version int64, keys ...*approvaltest.Passkey) json.RawMessage {
		next := approvaltest.Keys("alice", keys...)
		next.Version = version
		u := &approval.KeysUpdate{Keys: *next, Gateways: []string{"gw_fake"}, ExpiresAt: time.Now().Add(5 * time.Minute)}
		u.Assertion = signer.Assert(approval.KeysChallenge(u), approvaltest.Flags)
		b, _ := json.Marshal(u)
		return b
	}
	addKey := update(old, 1, old, added)
	removeOld := update(added, 2, added)
	forged, _ := json.Marshal(approvaltest.Keys("alice", forger))

	type answer struct {
		ID    string              `json:"id"`
		Error *struct{ Code int } `json:"error"`
	}
	answers := make(chan answer, 10)
	gate := make(chan struct{}) // the test checks each answer before the next RPC
	var conns atomic.Int32
	fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer conn.CloseNow()
		ctx := r.Context()
		first := conns.Add(1) == 1
		ready := pairwire.Control{Type: pairwire.ControlReady, GatewayID: "gw_fake", Namespace: "alice"}
		var rpcs []string
		if first {
			if _, _, err := conn.Read(ctx); err != nil { // the pairing message
				return
			}
			ready.OwnerKeys, _ = json.Marshal(approvaltest.Keys("alice", old))
			rpcs = []string{
				`{"jsonrpc":"2.0","id":"by-added-only","method":"owner_keys.update","params":{"update":` + string(update(added, 1, old, added)) + `}}`,
				`{"jsonrpc":"2.0","id":"by-forger","method":"owner_keys.update","params":{"update":` + string(update(forger, 1, forger)) + `}}`,
				`{"jsonrpc":"2.0","id":"add","method":"owner_keys.update","params":{"update":` + string(addKey) + `}}`,
				`{"jsonrpc":"2.0","id":"replay","method":"owner_keys.update","params":{"update":` + string(addKey) + `}}`,
			}
		} else {
			ready.OwnerKeys, ready.OwnerKeysUpdate = forged, removeOld
			rpcs = []string{`{"jsonrpc":"2.0","id":"sync","method":"variables.list"}`}
		}
		b, _ := json.Marshal(ready)
		if conn.Write(ctx, websocket.MessageText, b) != nil {
			return
		}
		for _, m := range rpcs {
			select {
			case <-gate:
			case <-ctx.Done():
				return
			}
			if conn.Write(ctx, websocket.MessageText, []byte(m)) != nil {
				return
			}
			_, b, err := conn.Read(ctx)
			if err != nil {
				return
			}
			var a answer
			json.Unmarshal(b, &a)
			answers <- a
		}
		if first {
			return // the gateway reconnects
		}
		conn.Read(ctx)
	}))
	defer fake.Close()
	g := newLocalGateway(t, fake.URL)
	g.run(&pairing.Pairing{SessionID: "gps_fake", Code: "ABCDEFGH"})
	defer g.cancel()

	pinned := func() *approval.Keys {
		k, err := pairing.OwnerKeys(pairing.DirFiles(g.dir))
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	next := func(id string) answer {
		select {
		case gate <- struct{}{}:
		case <-time.After(10 * time.Second):
			t.Fatalf("the control plane is not ready to send %s", id)
		}
		select {
		case a := <-answers:
			if a.ID != id {
				t.Fatalf("answer %+v, want %s", a, id)
			}
			return a
		case <-time.After(10 * time.Second):
			t.Fatalf("no answer %s", id)
		}
		return answer{}
	}
	for _, id := range []string{"by-added-only", "by-forger"} {
		if a := next(id); a.Error == nil || a.Error.Code != pairwire.CodeInvalidParams {
			t.Fatalf("%s: %+v", id, a)
		}
		if k := pinned(); len(k.Keys) != 1 || k.Version != 0 {
			t.Fatalf("after %s the gateway pins %+v", id, k)
		}
	}
	if a := next("add"); a.Error != nil {
		t.Fatalf("the owner's update: %+v", a.Error)
	}
	if k := pinned(); len(k.Keys) != 2 || k.Version != 1 {
		t.Fatalf("after the owner's update the gateway pins %+v", k)
	}
	if a := next("replay"); a.Error == nil {
		t.Fatal("a replayed update was accepted")
	}
	next("sync")
	k := pinned()
	if len(k.Keys) != 1 || k.Version != 2 || string(k.Keys[0].CredentialID) != string(added.ID) {
		t.Fatalf("after the reconnect the gateway pins %+v", k)
	}
	c := []byte("challenge")
	if err := k.Verify(old.Assert(c, approvaltest.Flags), c); err == nil {
		t.Fatal("the removed passkey still approves")
	}
	if err := k.Verify(added.Assert(c, approvaltest.Flags), c); err != nil {
		t.Fatalf("the added passkey does not approve: %v", err)
	}
}
