package fleet_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idnhq/idn/approval/approvaltest"
	"github.com/idnhq/idn/credvault"
	"github.com/idnhq/idn/credvault/pgstore"
	"github.com/idnhq/idn/gateway"
	"github.com/idnhq/idn/identity"
	"github.com/idnhq/idn/pairing"
)

// approvalAcrossReplicas pins the owner's passkey for the fleet (as
// pairing does, in the shared database), adds a connection whose payments
// wait for the owner, and holds a payment on replica a. The owner
// approves it once; the agent's retry on b is paid, and one more on a is
// held again: the fleet counts the use in PostgreSQL.
func (f *fleet) approvalAcrossReplicas(t *testing.T) {
	owner := approvaltest.NewPasskey("idn.example", "https://idn.example")
	f.pinOwnerKeys(t, owner)
	f.addConnection(t, "a", `{"id":"bank","service":"shop","base_url":"`+f.up+`","auth_mode":"bearer","auth_secret_key":"t",`+
		`"secrets":{"t":"upstream-token"},"approval_routes":["POST /pay"]}`)
	f.awaitServed("b", "bank", 5*time.Second)

	client := &http.Client{Timeout: 10 * time.Second}
	pay := func(replica string) (int, string) {
		body := []byte(`{"id":"pay-1","to":"bob","amount":"12.50"}`)
		req, _ := http.NewRequest("POST", "http://"+f.lb+"/proxy/bank/pay", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if err := f.agent.Sign(req, identity.SignOptions{}); err != nil {
			t.Fatal(err)
		}
		return send(client, f.replica[replica], order{id: "pay-1", path: "/proxy/bank/pay", header: req.Header, body: body})
	}
	if status, code := pay("a"); code != "AUTH_ACTION_APPROVAL_REQUIRED" {
		t.Fatalf("the payment on a answered %d %s", status, code)
	}
	filed := f.desk.Filed()
	if len(filed) != 1 {
		t.Fatalf("%d action requests filed, want 1", len(filed))
	}
	f.desk.Approve(filed[0], 1, time.Time{}, owner)
	if status, code := pay("b"); status != http.StatusOK {
		t.Fatalf("the approved payment's retry on b answered %d %s", status, code)
	}
	if status, code := pay("a"); code != "AUTH_ACTION_APPROVAL_REQUIRED" {
		t.Fatalf("the payment sent again on a answered %d %s", status, code)
	}
	if n := f.taken("pay-1"); n != 1 {
		t.Fatalf("the upstream took the payment %d times", n)
	}
}

// pinOwnerKeys writes the owner's passkey where a paired fleet keeps it:
// a blob of the shared store, sealed with the fleet's master key.
func (f *fleet) pinOwnerKeys(t *testing.T, owner *approvaltest.Passkey) {
	t.Helper()
	db, err := os.ReadFile(filepath.Join(f.dir, "database.url"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	st, err := pgstore.Open(ctx, pgstore.Config{URL: strings.TrimSpace(string(db))})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	v, err := credvault.New(ctx, credvault.Config{Store: st, MasterKey: f.key, PollInterval: -1, Extensions: gateway.VaultExtensions()})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	pinned, _ := json.Marshal(approvaltest.Keys("alice", owner))
	if err := gateway.SharedPairingFiles(v).WriteFile(pairing.OwnerKeysFile, pinned); err != nil {
		t.Fatal(err)
	}
}
