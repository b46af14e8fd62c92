package pairing

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/idnhq/idn/admin"
	"github.com/idnhq/idn/credvault"
	"github.com/idnhq/idn/identity"
)

// FuzzHandle feeds the control plane's messages to a gateway: whatever
// arrives, the answer is one JSON-RPC 2.0 response.
func FuzzHandle(f *testing.F) {
	for _, seed := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"connections.list"}`,
		`{"jsonrpc":"2.0","id":"a","method":"connections.get","params":{"id":"gh"}}`,
		`{"jsonrpc":"2.0","id":2,"method":"variables.set","params":{"key":"K","sealed_secrets":"AAAA"}}`,
		`{"jsonrpc":"2.0","id":3,"method":"variables.set","params":{"key":"K","value":"plain"}}`,
		`{"jsonrpc":"2.0","id":4,"method":"connections.create","params":{"id":"x","secrets":{"a":"b"}}}`,
		`{"jsonrpc":"2.0","id":5,"method":"connections.discover","params":{"id":"x","refresh":"auto","extra":1}}`,
		`{"jsonrpc":"2.0","id":6,"method":"variables.delete","params":{"key":"K","force":"yes"}}`,
		`{"jsonrpc":"2.0","id":null}`, `[]`, `{}`, `not json`, ``,
	} {
		f.Add([]byte(seed))
	}
	key, _ := credvault.GenerateMasterKey()
	dir := f.TempDir()
	ctx := context.Background()
	v, err := credvault.New(ctx, credvault.Config{Store: &credvault.MemoryStore{}, MasterKey: key, PollInterval: -1})
	if err != nil {
		f.Fatal(err)
	}
	defer v.Close()
	access, _ := admin.NewAccess(admin.AccessConfig{AccessOptions: admin.AccessOptions{Mode: admin.AccessLoopback}})
	h, _ := admin.New(admin.Config{Vault: v, Access: access})
	id, _ := identity.New("fuzz-gw")
	c, err := New(Config{ControlPlaneURL: "http://127.0.0.1:1", Identity: id, Admin: h, DataDir: dir, MasterKey: key})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, msg []byte) {
		var res struct {
			JSONRPC string          `json:"jsonrpc"`
			ID      json.RawMessage `json:"id"`
			Result  json.RawMessage `json:"result"`
			Error   *rpcError       `json:"error"`
		}
		out := c.handle(ctx, "gw_fuzz", msg)
		if err := json.Unmarshal(out, &res); err != nil || res.JSONRPC != "2.0" || (res.Result == nil) == (res.Error == nil) {
			t.Fatalf("answer %s to %q", out, msg)
		}
	})
}
