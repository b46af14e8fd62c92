package pgstore_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idnhq/idn/approval/approvaltest"
	"github.com/idnhq/idn/claimcache"
	"github.com/idnhq/idn/claimcache/claimcachetest"
	"github.com/idnhq/idn/credvault"
	"github.com/idnhq/idn/gateway"
	"github.com/idnhq/idn/identity"
	"github.com/idnhq/idn/pairing"
	"github.com/jackc/pgx/v5"
)

// fleet is what replicas share: one database, a control plane that
// approved one agent and takes its action requests, the owner's passkey,
// and a bank that counts the payments it makes.
type fleet struct {
	db    string
	cfg   gateway.Config
	agent *identity.Identity
	desk  *approvaltest.Desk
	owner *approvaltest.Passkey
	bank  string
	paid  atomic.Int64
}

const authority = "gateway.test"

func newFleet(t *testing.T) *fleet {
	t.Helper()
	f := &fleet{db: testDatabase(t), desk: &approvaltest.Desk{}, owner: approvaltest.NewPasskey("idn.example", "https://idn.example")}
	f.agent, _ = identity.New("alice")
	claims := claimcachetest.NewServer()
	t.Cleanup(claims.Close)
	claims.Approve(claimcache.Claim{Namespace: "alice", Service: "bank", PublicKey: f.agent.PublicKeyString()})
	mux := http.NewServeMux()
	mux.Handle("/v1/gateways/actions", f.desk)
	mux.Handle("/v1/gateways/actions/", f.desk)
	mux.Handle("/", claims)
	cp := httptest.NewServer(mux)
	t.Cleanup(cp.Close)
	bank := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		f.paid.Add(1)
	}))
	t.Cleanup(bank.Close)
	f.bank = bank.URL
	key, _ := credvault.GenerateMasterKey()
	f.cfg = gateway.Config{MasterKey: key, ControlPlaneURL: cp.URL, ServiceAPIKey: claims.APIKey("bank")}
	f.cfg.Proxy.PublicAuthority = authority
	return f
}

type replica struct {
	*gateway.Gateway
	url string
}

// replica starts a gateway of its own data directory and database pool,
// as `gateway serve` with GATEWAY_DATABASE_URL does. The first pins the
// owner's passkey for the fleet and adds the bank connection.
func (f *fleet) replica(t *testing.T) *replica {
	t.Helper()
	st := open(t, f.db)
	cfg := f.cfg
	cfg.DataDir, cfg.Store, cfg.Holds = t.TempDir(), st, st.Holds()
	gw, err := gateway.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gw.Close() })
	if _, ok := gw.Vault().Lookup("bank"); !ok {
		pinned, _ := json.Marshal(approvaltest.Keys("acme", f.owner))
		if err := gw.PairingFiles().WriteFile(pairing.OwnerKeysFile, pinned); err != nil {
			t.Fatal(err)
		}
		if _, err := gw.Vault().Create(t.Context(), &credvault.Connection{ID: "bank", Service: "bank", BaseURL: f.bank,
			AuthMode: credvault.AuthBearer, AuthSecretKey: "token", ApprovalRoutes: []string{"POST /pay"}},
			map[string]string{"token": "bank-token"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := gw.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := gw.Up(ctx); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gw)
	t.Cleanup(srv.Close)
	return &replica{Gateway: gw, url: srv.URL}
}

// pay sends the agent's signed payment to r; it returns the status and
// error code.
func (f *fleet) pay(t testing.TB, r *replica) (int, string) {
	body := []byte(`{"to":"bob","amount":"12.50"}`)
	req, _ := http.NewRequest("POST", "http://"+authority+"/proxy/bank/pay", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if err := f.agent.Sign(req, identity.SignOptions{}); err != nil {
		t.Error(err)
		return 0, ""
	}
	req.URL, _ = req.URL.Parse(r.url + "/proxy/bank/pay")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Error(err)
		return 0, ""
	}
	defer res.Body.Close()
	var env struct{ Code string }
	_ = json.NewDecoder(res.Body).Decode(&env)
	return res.StatusCode, env.Code
}

func (f *fleet) want(t *testing.T, r *replica, status int, code, what string) {
	t.Helper()
	if s, c := f.pay(t, r); s != status || c != code {
		t.Fatalf("%s answered %d %s, want %d %s", what, s, c, status, code)
	}
}

const held = "AUTH_ACTION_APPROVAL_REQUIRED"

// TestApprovalCountsAcrossTheFleet: a payment held on replica A and
// approved for two uses is paid on B, then on a restarted A, and a third
// is held again; one request was filed for the two.
func TestApprovalCountsAcrossTheFleet(t *testing.T) {
	f := newFleet(t)
	a, b := f.replica(t), f.replica(t)
	f.want(t, a, http.StatusForbidden, held, "the first payment, on A")
	f.want(t, b, http.StatusForbidden, held, "its retry on B, before the owner approved")
	if n := len(f.desk.Filed()); n != 1 {
		t.Fatalf("%d requests filed, want one for both replicas", n)
	}
	f.desk.Approve(f.desk.Filed()[0], 2, time.Time{}, f.owner)
	f.want(t, b, http.StatusOK, "", "the retry on B after the approval")
	a.Close()
	restarted := f.replica(t)
	f.want(t, restarted, http.StatusOK, "", "the second use, on A restarted")
	f.want(t, b, http.StatusForbidden, held, "a third payment, on B")
	if n, paid := len(f.desk.Filed()), f.paid.Load(); n != 2 || paid != 2 {
		t.Fatalf("%d requests filed and %d payments made, want 2 and 2", n, paid)
	}
}

// TestConcurrentRetriesAcrossReplicas is the attack of an agent sending 16
// copies of a payment approved once, at once, spread over two replicas:
// the bank pays one.
func TestConcurrentRetriesAcrossReplicas(t *testing.T) {
	f := newFleet(t)
	replicas := []*replica{f.replica(t), f.replica(t)}
	f.want(t, replicas[0], http.StatusForbidden, held, "the first payment")
	f.desk.Approve(f.desk.Filed()[0], 1, time.Time{}, f.owner)
	var passed atomic.Int64
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			status, code := f.pay(t, replicas[i%2])
			switch {
			case status == http.StatusOK:
				passed.Add(1)
			case code != held:
				t.Errorf("a concurrent retry answered %d %s", status, code)
			}
		})
	}
	wg.Wait()
	if passed.Load() != 1 || f.paid.Load() != 1 {
		t.Fatalf("%d of 16 concurrent retries passed and %d were paid, want 1", passed.Load(), f.paid.Load())
	}
}

// TestTamperedHoldRowRefused: a writer of the fleet's database raises a
// spent approval's uses; the replicas check the owner's assertion, which
// says one, and pay nothing more.
func TestTamperedHoldRowRefused(t *testing.T) {
	f := newFleet(t)
	a, b := f.replica(t), f.replica(t)
	f.want(t, a, http.StatusForbidden, held, "the first payment")
	f.desk.Approve(f.desk.Filed()[0], 1, time.Time{}, f.owner)
	f.want(t, a, http.StatusOK, "", "the approved payment")
	conn, err := pgx.Connect(t.Context(), f.db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	tag, err := conn.Exec(t.Context(), "UPDATE credvault_approval_holds SET uses = 50, ends_ns = ends_ns + 3600000000000")
	if err != nil || tag.RowsAffected() != 1 {
		t.Fatalf("tampering: %v, %d rows", err, tag.RowsAffected())
	}
	f.want(t, b, http.StatusForbidden, held, "a payment on the tampered row")
	f.want(t, a, http.StatusForbidden, held, "another payment on the tampered row")
	if f.paid.Load() != 1 {
		t.Fatalf("%d payments made, want 1", f.paid.Load())
	}
}
