package gateway_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idnhq/idn/credvault"
	"github.com/idnhq/idn/credvault/storetest"
	"github.com/idnhq/idn/gateway"
	"github.com/idnhq/idn/kit/openapicheck"
	"github.com/idnhq/idn/pairing"
)

// outageStore is a shared store whose backend can be taken out of reach,
// as a fleet's PostgreSQL stopping is seen by each replica.
type outageStore struct {
	credvault.MemoryStore
	down atomic.Bool
}

func (s *outageStore) Load(ctx context.Context) (*credvault.Records, error) {
	if s.down.Load() {
		return nil, credvault.ErrStoreUnavailable
	}
	return s.MemoryStore.Load(ctx)
}

func (s *outageStore) Update(ctx context.Context, fn func(*credvault.Records) error) error {
	if s.down.Load() {
		return credvault.ErrStoreUnavailable
	}
	return s.MemoryStore.Update(ctx, fn)
}

func (s *outageStore) Generation(ctx context.Context) (uint64, error) {
	if s.down.Load() {
		return 0, credvault.ErrStoreUnavailable
	}
	return s.MemoryStore.Generation(ctx)
}

// replica starts a gateway of its own data directory on the shared store
// and returns its server and admin token.
func replica(t *testing.T, st credvault.Store, key credvault.MasterKey) (*gateway.Gateway, *httptest.Server, string) {
	t.Helper()
	cfg := gateway.Config{DataDir: t.TempDir(), MasterKey: key, ControlPlaneURL: "http://127.0.0.1:1", Store: st}
	gw, err := gateway.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gw.Close() })
	srv := httptest.NewServer(openapicheck.Watch(t, gw))
	t.Cleanup(srv.Close)
	tok, err := gateway.AdminToken(cfg.DataDir)
	if err != nil {
		t.Fatal(err)
	}
	return gw, srv, tok
}

func adminPost(t *testing.T, srv *httptest.Server, token, path, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, srv.URL+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var env struct {
		Code string `json:"code"`
	}
	json.NewDecoder(resp.Body).Decode(&env)
	return resp.StatusCode, env.Code
}

// TestFleetSharesOneStore: a variable set through one replica's admin API
// is served by the other within a second. With the shared store out of
// reach, both keep serving what they loaded and stay ready; admin
// changes are refused with 503 DATABASE_UNAVAILABLE.
func TestFleetSharesOneStore(t *testing.T) {
	t.Parallel()
	key, _ := credvault.GenerateMasterKey()
	st := &outageStore{}
	a, srvA, tokA := replica(t, st, key)
	b, _, _ := replica(t, st, key)
	if status, code := adminPost(t, srvA, tokA, "/api/admin/credential-variables", `{"key":"SHARED","value":"shared-value-1"}`); status != http.StatusCreated {
		t.Fatalf("set variable on a: %d %s", status, code)
	}
	if !storetest.Eventually(time.Second, func() bool { return len(b.Vault().Variables()) == 1 }) {
		t.Fatal("replica b does not see a's variable within one second")
	}

	st.down.Store(true)
	status, code := adminPost(t, srvA, tokA, "/api/admin/credential-variables", `{"key":"LATER","value":"later-value-1"}`)
	if status != http.StatusServiceUnavailable || code != "DATABASE_UNAVAILABLE" {
		t.Fatalf("admin change with the store out of reach: %d %s, want 503 DATABASE_UNAVAILABLE", status, code)
	}
	for name, gw := range map[string]*gateway.Gateway{"a": a, "b": b} {
		if vars := gw.Vault().Variables(); len(vars) != 1 {
			t.Errorf("replica %s lost what it loaded: %+v", name, vars)
		}
	}
	if store := readyCheck(t, srvA.URL, "store"); store != "ok" {
		t.Errorf("readiness check store with the shared store out of reach = %q, want ok", store)
	}
}

// readyCheck returns one check's verdict in /health/ready.
func readyCheck(t *testing.T, base, name string) string {
	t.Helper()
	resp, err := http.Get(base + "/health/ready")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var ready struct {
		Checks map[string]string `json:"checks"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&ready); err != nil {
		t.Fatal(err)
	}
	return ready.Checks[name]
}

// TestFleetPairsOnce: replicas on one store, started together, share one
// identity (the first stored) and one pairing key; a pairing written
// through one replica shows on the others.
func TestFleetPairsOnce(t *testing.T) {
	t.Parallel()
	key, _ := credvault.GenerateMasterKey()
	st := &credvault.MemoryStore{}
	replicas := make([]*gateway.Gateway, 4)
	var wg sync.WaitGroup
	for i := range replicas {
		wg.Go(func() { replicas[i], _, _ = replica(t, st, key) })
	}
	wg.Wait()
	a := replicas[0]
	for i, r := range replicas {
		if r.Identity().KeyID() != a.Identity().KeyID() {
			t.Fatalf("replica %d signs as %s, replica 0 as %s", i, r.Identity().KeyID(), a.Identity().KeyID())
		}
	}
	clients := make([]*pairing.Client, 2)
	for i, r := range replicas[:2] {
		c, err := pairing.New(pairing.Config{ControlPlaneURL: "http://127.0.0.1:1", Identity: r.Identity(), Admin: r.Admin(),
			Files: r.PairingFiles(), MasterKey: key})
		if err != nil {
			t.Fatal(err)
		}
		clients[i] = c
	}
	if clients[0].Fingerprint() != clients[1].Fingerprint() {
		t.Fatalf("replicas' pairing keys differ: %s, %s", clients[0].Fingerprint(), clients[1].Fingerprint())
	}
	state, _ := json.Marshal(pairing.State{GatewayID: "gw_1", Namespace: "acme", ControlPlaneURL: "http://127.0.0.1:1", PairedAt: time.Now()})
	if err := replicas[1].PairingFiles().WriteFile("pairing.json", state); err != nil {
		t.Fatal(err)
	}
	if !storetest.Eventually(time.Second, func() bool {
		s, paired, _, _ := pairing.StatusOf(replicas[3].PairingFiles())
		return paired && s.GatewayID == "gw_1"
	}) {
		t.Fatal("a pairing written through one replica does not show on another within a second")
	}
	// The pairing lives in the store, not in a replica's data directory.
	if _, paired, _, _ := pairing.Status(t.TempDir()); paired {
		t.Fatal("an empty data directory reads as paired")
	}
}

// TestFleetIdentityNamespaceChecked: a replica configured for another
// namespace than the fleet's identity is refused at start.
func TestFleetIdentityNamespaceChecked(t *testing.T) {
	t.Parallel()
	key, _ := credvault.GenerateMasterKey()
	st := &credvault.MemoryStore{}
	replica(t, st, key)
	_, err := gateway.New(gateway.Config{DataDir: t.TempDir(), MasterKey: key, ControlPlaneURL: "http://127.0.0.1:1", Store: st, Namespace: "other"})
	if err == nil || !strings.Contains(err.Error(), "namespace") {
		t.Fatalf("replica of another namespace: %v", err)
	}
}
