package controlplane

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// fakeRegistry is an in-memory registry contract: namespaces, claims and
// the authorised tuples, with injectable write failures.
type fakeRegistry struct {
	mu         sync.Mutex
	fail       int // the next fail writes return an error
	txs        int
	writes     []string    // "op namespace/service" of successful writes
	notify     chan string // when set, receives each successful write
	namespaces map[string]string
	claims     map[string]string // chain claim id → tuple
	authorized map[string]bool   // tuple → authorised
}

var _ Registry = (*fakeRegistry)(nil)

func newFakeRegistry() *fakeRegistry {
	return &fakeRegistry{namespaces: map[string]string{}, claims: map[string]string{}, authorized: map[string]bool{}}
}

func tuple(ns, pub, svc string) string { return ns + "|" + pub + "|" + svc }

// tx makes a write: fails when asked to, else applies fn and returns a hash.
func (f *fakeRegistry) tx(op string, fn func()) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail > 0 {
		f.fail--
		return "", errors.New("fake registry: rpc unavailable")
	}
	fn()
	f.txs++
	f.writes = append(f.writes, op)
	if f.notify != nil {
		f.notify <- op
	}
	return fmt.Sprintf("0x%064x", f.txs), nil
}

func (f *fakeRegistry) RegisterNamespace(_ context.Context, name string) (string, error) {
	return f.tx("registerNamespace "+name, func() { f.namespaces[name] = "owner" })
}

func (f *fakeRegistry) TransferNamespace(_ context.Context, name, newOwner string) (string, error) {
	return f.tx("transferNamespace "+name, func() { f.namespaces[name] = newOwner })
}

func (f *fakeRegistry) SubmitClaim(_ context.Context, ns, pub, svc string) (string, string, error) {
	id := fmt.Sprintf("chain-%d", len(f.claims)+1)
	h, err := f.tx("submitClaim "+ns+"/"+svc, func() { f.claims[id] = tuple(ns, pub, svc) })
	return id, h, err
}

func (f *fakeRegistry) ApproveClaim(_ context.Context, id string) (string, error) {
	return f.tx("approveClaim "+id, func() { f.authorized[f.claims[id]] = true })
}

func (f *fakeRegistry) RejectClaim(_ context.Context, id string) (string, error) {
	return f.tx("rejectClaim "+id, func() { delete(f.claims, id) })
}

func (f *fakeRegistry) RevokeClaim(_ context.Context, id string) (string, error) {
	return f.tx("revokeClaim "+id, func() { f.authorized[f.claims[id]] = false })
}

func (f *fakeRegistry) ApproveClaimDirect(_ context.Context, ns, pub, svc string) (string, error) {
	return f.tx("approve "+ns+"/"+svc, func() { f.authorized[tuple(ns, pub, svc)] = true })
}

func (f *fakeRegistry) RevokeClaimDirect(_ context.Context, ns, pub, svc string) (string, error) {
	return f.tx("revoke "+ns+"/"+svc, func() { f.authorized[tuple(ns, pub, svc)] = false })
}

func (f *fakeRegistry) IsAuthorized(_ context.Context, ns, pub, svc string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.authorized[tuple(ns, pub, svc)], nil
}

func (f *fakeRegistry) failNext(n int) {
	f.mu.Lock()
	f.fail = n
	f.mu.Unlock()
}

// written returns the claim writes made (namespace registrations aside).
func (f *fakeRegistry) written() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, w := range f.writes {
		if !strings.HasPrefix(w, "registerNamespace ") {
			out = append(out, w)
		}
	}
	return out
}

// registered reports whether name was registered on the fake chain.
func (f *fakeRegistry) registered(name string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.namespaces[name]
	return ok
}

func withRegistry(mode string, backend Registry) func(*Config) {
	return func(c *Config) { c.Registry = RegistryConfig{Mode: mode, Backend: backend} }
}

// claimHashes reads a claim's hashes from the owner listing.
func (e *env) claimHashes(owner reqOpt, id string) (approval, revocation string) {
	e.t.Helper()
	list := e.do("GET", "/v1/namespaces/acme/claims", nil, owner).want(e.t, 200, "").json(e.t)["claims"].([]any)
	for _, c := range list {
		m := c.(map[string]any)
		if m["claim_id"] == id {
			a, _ := m["approval_tx_hash"].(string)
			r, _ := m["revocation_tx_hash"].(string)
			return a, r
		}
	}
	e.t.Fatalf("claim %s not listed", id)
	return "", ""
}

// claimRecord reads a claim from the owner listing.
func (e *env) claimRecord(owner reqOpt, id string) map[string]any {
	e.t.Helper()
	list := e.do("GET", "/v1/namespaces/acme/claims", nil, owner).want(e.t, 200, "").json(e.t)["claims"].([]any)
	for _, c := range list {
		if m := c.(map[string]any); m["claim_id"] == id {
			return m
		}
	}
	e.t.Fatalf("claim %s not listed", id)
	return nil
}

// submitted submits a fresh claim of acme for github and returns its id.
func (e *env) submitted(key string) string {
	e.t.Helper()
	return e.signed("POST", "/v1/claims", submitBody("acme", pubKey(newAgent(e.t, "acme")), "github"), withKey(key)).
		want(e.t, 201, "").json(e.t)["claim_id"].(string)
}

func (e *env) runRegistry() {
	e.t.Helper()
	if err := e.srv.registry.RunDue(context.Background()); err != nil {
		e.t.Fatal(err)
	}
}

func TestRegistryModeNeedsBackend(t *testing.T) {
	t.Parallel()
	st := openStore(t, storeConfig(t, ProviderSQLite))
	for _, mode := range []string{RegistrySync, RegistryMemory, RegistryQueue} {
		_, err := New(Config{Store: st, JWTSecret: testSecret, Registry: RegistryConfig{Mode: mode}})
		if err == nil || !strings.Contains(err.Error(), "needs a registry backend") {
			t.Fatalf("mode %s without backend: %v", mode, err)
		}
	}
	if _, err := New(Config{Store: st, JWTSecret: testSecret, Registry: RegistryConfig{Mode: "chain", Backend: newFakeRegistry()}}); err == nil {
		t.Fatal("unknown mode accepted")
	}
	for _, mode := range []string{"", RegistryDisabled} {
		if _, err := New(Config{Store: st, JWTSecret: testSecret, Registry: RegistryConfig{Mode: mode}}); err != nil {
			t.Fatalf("mode %q: %v", mode, err)
		}
	}
}

func TestRegistrySync(t *testing.T) {
	t.Parallel()
	forEachEngineWith(t, nil, func(t *testing.T, _ *env, sc StoreConfig) {
		reg := newFakeRegistry()
		e := newEnv(t, openStore(t, sc), withRegistry(RegistrySync, reg))
		owner, key := claimWorld(e)
		id := e.submitted(key)
		approved := e.do("POST", "/v1/claims/"+id+"/approve", nil, owner).want(t, 200, "").json(t)
		if a, _ := e.claimHashes(owner, id); !strings.HasPrefix(a, "0x") || approved["approval_tx_hash"] != a {
			t.Fatalf("approval_tx_hash = %q right after the approval answered, %v in the answer", a, approved["approval_tx_hash"])
		}
		revoked := e.do("POST", "/v1/claims/"+id+"/revoke", nil, owner).want(t, 200, "").json(t)
		if _, r := e.claimHashes(owner, id); revoked["revocation_tx_hash"] != r {
			t.Fatalf("revocation answer carries %v, stored %q", revoked["revocation_tx_hash"], r)
		}
		if _, r := e.claimHashes(owner, id); !strings.HasPrefix(r, "0x") {
			t.Fatalf("revocation_tx_hash = %q right after the revocation answered", r)
		}
		if w := reg.written(); len(w) != 2 || w[0] != "approve acme/github" || w[1] != "revoke acme/github" {
			t.Fatalf("writes = %v", w)
		}

		t.Run("failed write answers 502 and leaves the claim pending", func(t *testing.T) {
			id := e.submitted(key)
			reg.failNext(1)
			e.do("POST", "/v1/claims/"+id+"/approve", nil, owner).want(t, 502, "REGISTRY_WRITE_FAILED")
			c := e.claimRecord(owner, id)
			if c["status"] != StatusPending || c["approval_tx_hash"] != nil || c["registry_error"] != nil {
				t.Fatalf("claim after the failed write: %v", c)
			}
			e.runRegistry() // nothing is owed: the claim did not move
			if w := reg.written(); len(w) != 2 {
				t.Fatalf("writes = %v", w)
			}
			approved := e.do("POST", "/v1/claims/"+id+"/approve", nil, owner).want(t, 200, "").json(t)
			if approved["status"] != StatusApproved || !strings.HasPrefix(approved["approval_tx_hash"].(string), "0x") {
				t.Fatalf("second approval: %v", approved)
			}
		})
		t.Run("an expired claim is not written", func(t *testing.T) {
			id := e.submitted(key)
			e.advanceTo(e.srv.now().Add(25 * time.Hour))
			e.do("POST", "/v1/claims/"+id+"/approve", nil, owner).want(t, 409, "CLAIM_STATE_CONFLICT")
			if w := reg.written(); len(w) != 3 {
				t.Fatalf("writes = %v", w)
			}
		})
	})
}

func TestRegistryMemory(t *testing.T) {
	t.Parallel()
	reg := newFakeRegistry()
	e := newEnv(t, openStore(t, storeConfig(t, ProviderSQLite)), withRegistry(RegistryMemory, reg))
	owner, key := claimWorld(e)
	id := e.submitted(key)
	quick := e.submitted(key) // signed now: the clock moves below
	e.do("POST", "/v1/claims/"+id+"/approve", nil, owner).want(t, 200, "")
	if a, _ := e.claimHashes(owner, id); a != "" || len(reg.written()) != 0 {
		t.Fatal("memory mode wrote inline")
	}
	reg.failNext(1)
	e.runRegistry()
	if a, _ := e.claimHashes(owner, id); a != "" {
		t.Fatal("hash despite the failure")
	}
	e.advanceTo(e.srv.now().Add(time.Hour))
	e.runRegistry()
	if a, _ := e.claimHashes(owner, id); a == "" {
		t.Fatal("memory queue did not retry")
	}

	// Approved and revoked before the worker ran: nothing reaches the chain.
	e.do("POST", "/v1/claims/"+quick+"/approve", nil, owner).want(t, 200, "")
	e.do("POST", "/v1/claims/"+quick+"/revoke", nil, owner).want(t, 200, "")
	e.do("POST", "/v1/claims/"+id+"/revoke", nil, owner).want(t, 200, "")
	e.runRegistry()
	if w := reg.written(); len(w) != 2 || w[1] != "revoke acme/github" {
		t.Fatalf("writes = %v, want the first claim's approval and revocation only", w)
	}
	if a, r := e.claimHashes(owner, quick); a != "" || r != "" {
		t.Fatalf("coalesced claim has hashes %q %q", a, r)
	}
}

// TestRegistryQueue: writes are found in the database, so approvals made
// before a restart are written after it, and a failing backend is retried
// with backoff until it gives up.
func TestRegistryQueue(t *testing.T) {
	t.Parallel()
	forEachEngineWith(t, nil, func(t *testing.T, _ *env, sc StoreConfig) {
		reg := newFakeRegistry()
		e := newEnv(t, openStore(t, sc), withRegistry(RegistryQueue, reg))
		owner, key := claimWorld(e)
		e.runRegistry()
		if !reg.registered("acme") || !reg.registered("bob") {
			t.Fatal("the queue did not register the existing namespaces")
		}
		id := e.submitted(key)
		e.do("POST", "/v1/claims/"+id+"/approve", nil, owner).want(t, 200, "")
		reg.failNext(2)
		e.runRegistry()
		if a, _ := e.claimHashes(owner, id); a != "" || len(reg.written()) != 0 {
			t.Fatal("written despite the failure")
		}

		// Restart: a new Store and Server on the same database.
		e2 := newEnv(t, openStore(t, sc), withRegistry(RegistryQueue, reg))
		e2.runRegistry()
		if a, _ := e2.claimHashes(owner, id); a != "" {
			t.Fatal("retried before the backoff")
		}
		for i := 0; i < 2; i++ {
			e2.advanceTo(e2.srv.now().Add(2 * time.Hour))
			e2.runRegistry()
		}
		a, _ := e2.claimHashes(owner, id)
		if !strings.HasPrefix(a, "0x") {
			t.Fatalf("approval_tx_hash = %q after recovery", a)
		}
		var jobs int
		e2.st.db.QueryRowContext(context.Background(), `SELECT COUNT(*) FROM registry_jobs`).Scan(&jobs)
		if jobs != 0 {
			t.Fatalf("%d registry jobs left after success", jobs)
		}
		if ok, _ := reg.IsAuthorized(context.Background(), "acme", "", "github"); ok {
			t.Fatal("fake registry authorises an unknown key")
		}

		e2.do("POST", "/v1/claims/"+id+"/revoke", nil, owner).want(t, 200, "")
		e2.runRegistry()
		if _, r := e2.claimHashes(owner, id); !strings.HasPrefix(r, "0x") {
			t.Fatalf("revocation_tx_hash = %q", r)
		}
		e2.runRegistry()
		if w := reg.written(); len(w) != 2 {
			t.Fatalf("writes = %v, want one approval and one revocation", w)
		}

		t.Run("given up after MaxAttempts", func(t *testing.T) {
			e3 := newEnv(t, openStore(t, sc), func(c *Config) {
				c.Registry = RegistryConfig{Mode: RegistryQueue, Backend: reg, MaxAttempts: 2, RetryWindow: time.Hour}
			})
			id := e3.submitted(e.apiKeys["github"])
			e3.do("POST", "/v1/claims/"+id+"/approve", nil, owner).want(t, 200, "")
			reg.failNext(10)
			for i := 0; i < 4; i++ {
				e3.runRegistry()
				e3.advanceTo(e3.srv.now().Add(time.Hour))
			}
			var attempts int
			var failed *int64
			e3.st.db.QueryRowContext(context.Background(), `SELECT attempts, failed_at FROM registry_jobs WHERE claim_id = $1`, id).Scan(&attempts, &failed)
			if attempts != 2 || failed == nil {
				t.Fatalf("attempts %d, failed_at %v", attempts, failed)
			}
			reg.failNext(0)
		})
	})
}

// TestRunWorkersWritesRegistry: RunWorkers is woken by an approval and
// writes it in queue mode without waiting for a poll.
func TestRunWorkersWritesRegistry(t *testing.T) {
	t.Parallel()
	reg := newFakeRegistry()
	reg.notify = make(chan string, 8)
	e := newEnv(t, openStore(t, storeConfig(t, ProviderSQLite)), func(c *Config) {
		withRegistry(RegistryQueue, reg)(c)
		c.Webhooks.PollInterval = time.Hour
	})
	owner, key := claimWorld(e)
	id := e.submitted(key)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- e.srv.runWorkers(ctx) }()
	e.do("POST", "/v1/claims/"+id+"/approve", nil, owner).want(t, 200, "")
	for op := ""; op != "approve acme/github"; {
		select {
		case op = <-reg.notify:
			if op != "approve acme/github" && !strings.HasPrefix(op, "registerNamespace ") {
				t.Fatalf("write = %s", op)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("RunWorkers did not write the approval")
		}
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("RunWorkers returned %v", err)
	}
	if a, _ := e.claimHashes(owner, id); !strings.HasPrefix(a, "0x") {
		t.Fatalf("approval_tx_hash = %q", a)
	}
}

// TestRegistrySignupRegistersNamespace: a namespace made by sign-up is
// registered, inline in sync mode, by RunWorkers in the queued modes.
func TestRegistrySignupRegistersNamespace(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{RegistrySync, RegistryMemory, RegistryQueue} {
		t.Run(mode, func(t *testing.T) {
			reg := newFakeRegistry()
			e := newEnv(t, openStore(t, storeConfig(t, ProviderSQLite)), func(c *Config) {
				c.Auth = AuthConfig{Origins: []string{testOrigin}}
				c.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}
				withRegistry(mode, reg)(c)
			})
			e.signup("carol", newDevice(t, "ES256")).want(t, 201, "")
			if mode != RegistrySync {
				if reg.registered("carol") {
					t.Fatal("registered before RunWorkers ran")
				}
				e.runRegistry()
			}
			if !reg.registered("carol") {
				t.Fatal("namespace not registered")
			}
			var hash string
			e.st.db.QueryRowContext(context.Background(), `SELECT registration_tx_hash FROM namespaces WHERE namespace = 'carol'`).Scan(&hash)
			if !strings.HasPrefix(hash, "0x") {
				t.Fatalf("registration_tx_hash = %q", hash)
			}
		})
	}
}

// TestRegistryErrorShownOnClaim: the owner sees why a queued write failed
// until a retry succeeds.
func TestRegistryErrorShownOnClaim(t *testing.T) {
	t.Parallel()
	forEachEngineWith(t, nil, func(t *testing.T, _ *env, sc StoreConfig) {
		reg := newFakeRegistry()
		e := newEnv(t, openStore(t, sc), withRegistry(RegistryQueue, reg))
		owner, key := claimWorld(e)
		e.runRegistry()
		id := e.submitted(key)
		e.do("POST", "/v1/claims/"+id+"/approve", nil, owner).want(t, 200, "")
		reg.failNext(1)
		e.runRegistry()
		c := e.claimRecord(owner, id)
		if msg, _ := c["registry_error"].(string); msg != "registry approve: fake registry: rpc unavailable" {
			t.Fatalf("registry_error = %q", msg)
		}
		backlog, err := e.st.RegistryBacklog(context.Background())
		if err != nil || backlog.Owed != 1 || backlog.Retrying != 1 || len(backlog.LastErrors) != 1 {
			t.Fatalf("backlog = %+v, %v", backlog, err)
		}
		e.advanceTo(e.srv.now().Add(time.Hour))
		e.runRegistry()
		c = e.claimRecord(owner, id)
		if c["registry_error"] != nil || !strings.HasPrefix(c["approval_tx_hash"].(string), "0x") {
			t.Fatalf("claim after the retry: %v", c)
		}
		if backlog, _ := e.st.RegistryBacklog(context.Background()); backlog.Owed != 0 {
			t.Fatalf("backlog after the retry = %+v", backlog)
		}
	})
}

// TestRegistryTupleOrder: a tuple's writes reach the registry in the order
// of its claims' changes, so a later approval never lands before an
// earlier revocation that is still being retried.
func TestRegistryTupleOrder(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{RegistryMemory, RegistryQueue} {
		t.Run(mode, func(t *testing.T) {
			reg := newFakeRegistry()
			e := newEnv(t, openStore(t, storeConfig(t, ProviderSQLite)), withRegistry(mode, reg))
			owner, key := claimWorld(e)
			e.runRegistry()
			agent := newAgent(t, "acme")
			submit := func() string {
				return e.signed("POST", "/v1/claims", submitBody("acme", pubKey(agent), "github"), withKey(key)).
					want(t, 201, "").json(t)["claim_id"].(string)
			}
			first := submit()
			e.do("POST", "/v1/claims/"+first+"/approve", nil, owner).want(t, 200, "")
			e.runRegistry()
			e.do("POST", "/v1/claims/"+first+"/revoke", nil, owner).want(t, 200, "")
			// The agent's submission answers the revocation; the owner
			// approves the tuple again, under a new claim.
			e.signed("POST", "/v1/claims", submitBody("acme", pubKey(agent), "github"), withKey(key)).want(t, 200, "")
			e.do("POST", "/v1/claims/"+first+"/approve", nil, owner).want(t, 200, "")
			reg.failNext(1)
			e.runRegistry() // the revocation fails; the approval must wait for it
			if w := reg.written(); len(w) != 1 {
				t.Fatalf("writes = %v, want only the first approval", w)
			}
			e.advanceTo(e.srv.now().Add(time.Hour))
			e.runRegistry()
			if w := reg.written(); len(w) != 3 || w[1] != "revoke acme/github" || w[2] != "approve acme/github" {
				t.Fatalf("writes = %v, want approve, revoke, approve", w)
			}
			if ok, _ := reg.IsAuthorized(context.Background(), "acme", pubKey(agent), "github"); !ok {
				t.Fatal("the tuple ends unauthorised")
			}
		})
	}
}

// TestRegistryQueueMetrics: the queue depth is exported with the control
// plane's metrics.
func TestRegistryQueueMetrics(t *testing.T) {
	t.Parallel()
	reg := newFakeRegistry()
	metrics := prometheus.NewRegistry()
	e := newEnv(t, openStore(t, storeConfig(t, ProviderSQLite)), func(c *Config) {
		withRegistry(RegistryQueue, reg)(c)
		c.Metrics = metrics
	})
	owner, key := claimWorld(e)
	e.runRegistry()
	id := e.submitted(key)
	e.do("POST", "/v1/claims/"+id+"/approve", nil, owner).want(t, 200, "")
	depth := func(state string) float64 {
		families, err := metrics.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range families {
			if f.GetName() != "idn_registry_queue_depth" {
				continue
			}
			for _, m := range f.GetMetric() {
				if m.GetLabel()[0].GetValue() == state {
					return m.GetGauge().GetValue()
				}
			}
		}
		t.Fatal("idn_registry_queue_depth not exported")
		return 0
	}
	if d := depth("due"); d != 1 {
		t.Fatalf("due = %v before the write", d)
	}
	e.runRegistry()
	if d := depth("due"); d != 0 {
		t.Fatalf("due = %v after the write", d)
	}
}

// TestNoChainClientDependency: a program that imports this package does not
// link go-ethereum; only registry/evm does.
func TestNoChainClientDependency(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Skipf("go list: %v", err)
	}
	if strings.Contains(string(out), "github.com/ethereum/go-ethereum") {
		t.Fatal("controlplane depends on go-ethereum")
	}
}
