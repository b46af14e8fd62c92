package evm_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/descope/virtualwebauthn"
	"github.com/ethereum/go-ethereum/common"

	"github.com/idnhq/idn/controlplane"
	"github.com/idnhq/idn/identity"
	"github.com/idnhq/idn/registry/evm"
)

// plane is one control-plane instance writing to the chain through its
// own Backend, served over HTTP.
type plane struct {
	t       testing.TB
	chain   *chain
	backend *evm.Backend
	store   *controlplane.Store
	api     *controlplane.Server
	url     string
	clock   *clock
}

// clock is the control plane's time, movable forward.
type clock struct{ offset atomic.Int64 }

func (c *clock) now() time.Time          { return time.Now().Add(time.Duration(c.offset.Load())) }
func (c *clock) advance(d time.Duration) { c.offset.Add(int64(d)) }
func sqliteStore(t testing.TB) controlplane.StoreConfig {
	return controlplane.StoreConfig{Provider: controlplane.ProviderSQLite, SQLitePath: filepath.Join(t.TempDir(), "cp.db")}
}

// newPlane starts a control plane on sc with registry mode and a backend
// of its own for contract. Its workers do not run until run.
func newPlane(t testing.TB, c *chain, sc controlplane.StoreConfig, mode string, contract common.Address, clk *clock, extra ...func(*controlplane.Config)) *plane {
	t.Helper()
	p := &plane{t: t, chain: c, clock: clk}
	var err error
	if p.store, err = controlplane.Open(context.Background(), sc); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.store.Close() })
	p.backend = c.backend(contract)
	cfg := controlplane.Config{
		Store:         p.store,
		JWTSecret:     []byte("registry-test-secret-of-32-bytes!!"),
		TestSeedToken: "seed",
		Clock:         clk.now,
		Webhooks:      controlplane.WebhookConfig{PollInterval: 20 * time.Millisecond},
		Registry:      controlplane.RegistryConfig{Mode: mode, Backend: p.backend, Timeout: 30 * time.Second},
	}
	for _, f := range extra {
		f(&cfg)
	}
	if p.api, err = controlplane.New(cfg); err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(p.api)
	t.Cleanup(ts.Close)
	p.url = ts.URL
	return p
}

// run starts the control plane's background work; stopWorkers ends it.
func (p *plane) run() {
	if err := p.api.Start(context.Background()); err != nil {
		p.t.Fatal(err)
	}
	p.t.Cleanup(p.stopWorkers)
}

func (p *plane) stopWorkers() {
	if err := p.api.Close(); err != nil {
		p.t.Errorf("Close: %v", err)
	}
}

// world is a seeded namespace "acme" with a service and pending claims.
type world struct {
	session string
	claims  []seededClaim
}

type seededClaim struct {
	ID        string `json:"claim_id"`
	PublicKey string `json:"public_key"`
}

// seed creates acme, its service github and n pending claims.
func (p *plane) seed(n int) world {
	p.t.Helper()
	claims := make([]map[string]string, n)
	for i := range claims {
		pub, _, _ := ed25519.GenerateKey(rand.Reader)
		claims[i] = map[string]string{"namespace": "acme", "service": "github", "status": "pending",
			"public_key": "ed25519:" + base64.StdEncoding.EncodeToString(pub)}
	}
	body, _ := json.Marshal(map[string]any{"namespaces": []string{"acme"},
		"services": []map[string]string{{"slug": "github", "name": "GitHub", "owner": "acme"}}, "claims": claims})
	req, _ := http.NewRequest("POST", p.url+"/v1/test/seed", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-IDN-Test-Seed-Token", "seed")
	var out struct {
		Sessions map[string]string `json:"sessions"`
		Claims   []seededClaim     `json:"claims"`
	}
	if status := p.call(req, &out); status != 200 {
		p.t.Fatalf("seed: %d", status)
	}
	return world{session: out.Sessions["acme"], claims: out.Claims}
}

func (p *plane) call(req *http.Request, out any) int {
	p.t.Helper()
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		p.t.Fatal(err)
	}
	defer res.Body.Close()
	if out != nil {
		json.NewDecoder(res.Body).Decode(out)
	}
	return res.StatusCode
}

// move is the owner's approve, reject or revoke; it returns the status and
// the answer.
func (p *plane) move(w world, id, action string) (int, map[string]any) {
	p.t.Helper()
	req, _ := http.NewRequest("POST", p.url+"/v1/claims/"+id+"/"+action, nil)
	req.AddCookie(&http.Cookie{Name: controlplane.SessionCookie, Value: w.session})
	var out map[string]any
	return p.call(req, &out), out
}

// claims lists acme's claims by id, as the owner sees them.
func (p *plane) claims(w world) map[string]map[string]any {
	p.t.Helper()
	req, _ := http.NewRequest("GET", p.url+"/v1/namespaces/acme/claims?limit=200", nil)
	req.AddCookie(&http.Cookie{Name: controlplane.SessionCookie, Value: w.session})
	var out struct{ Claims []map[string]any }
	if status := p.call(req, &out); status != 200 {
		p.t.Fatalf("claims listing: %d", status)
	}
	byID := map[string]map[string]any{}
	for _, c := range out.Claims {
		byID[c["claim_id"].(string)] = c
	}
	return byID
}

// approvedOnce checks that every claim's approval is on chain exactly
// once, from the transaction the claim records.
func (p *plane) approvedOnce(contract common.Address, w world) {
	p.t.Helper()
	listed := p.claims(w)
	for _, c := range w.claims {
		logs := p.chain.events(contract, "ClaimApprovedDirect", evm.TupleKey("acme", c.PublicKey, "github"))
		if len(logs) != 1 {
			p.t.Fatalf("claim %s: %d approvals on chain", c.ID, len(logs))
		}
		if got := listed[c.ID]["approval_tx_hash"]; got != logs[0].TxHash.Hex() {
			p.t.Fatalf("claim %s records %v, chain has %s", c.ID, got, logs[0].TxHash.Hex())
		}
		if ok, _ := p.backend.IsAuthorized(context.Background(), "acme", c.PublicKey, "github"); !ok {
			p.t.Fatalf("claim %s not authorised on chain", c.ID)
		}
	}
}

// TestSyncMode: the owner's approval waits for the receipt and answers
// with its hash; the revocation likewise; a failed write answers 502 and
// leaves the claim pending.
func TestSyncMode(t *testing.T) {
	c := newChain(t)
	contract := c.deploy()
	p := newPlane(t, c, sqliteStore(t), controlplane.RegistrySync, contract, &clock{})
	w := p.seed(2)
	first := w.claims[0]

	status, approved := p.move(w, first.ID, "approve")
	logs := c.events(contract, "ClaimApprovedDirect", evm.TupleKey("acme", first.PublicKey, "github"))
	if status != 200 || len(logs) != 1 || approved["approval_tx_hash"] != logs[0].TxHash.Hex() {
		t.Fatalf("approve: %d %v; chain logs %v", status, approved, logs)
	}
	status, revoked := p.move(w, first.ID, "revoke")
	logs = c.events(contract, "ClaimRevokedDirect", evm.TupleKey("acme", first.PublicKey, "github"))
	if status != 200 || len(logs) != 1 || revoked["revocation_tx_hash"] != logs[0].TxHash.Hex() {
		t.Fatalf("revoke: %d %v; chain logs %v", status, revoked, logs)
	}
	if ok, _ := p.backend.IsAuthorized(context.Background(), "acme", first.PublicKey, "github"); ok {
		t.Fatal("authorised after the revocation")
	}

	second := w.claims[1]
	c.SetDown(true)
	status, failed := p.move(w, second.ID, "approve")
	c.SetDown(false)
	if status != http.StatusBadGateway || failed["code"] != "REGISTRY_WRITE_FAILED" {
		t.Fatalf("approve with the RPC down: %d %v", status, failed)
	}
	if reason := failed["details"].(map[string]any)["reason"].(string); !strings.Contains(reason, evm.ReasonRPC) {
		t.Fatalf("reason %q", reason)
	}
	if got := p.claims(w)[second.ID]; got["status"] != "pending" || got["approval_tx_hash"] != nil {
		t.Fatalf("claim after the failed write: %v", got)
	}
	if status, _ := p.move(w, second.ID, "approve"); status != 200 {
		t.Fatalf("approve once the RPC is back: %d", status)
	}
}

// TestSignupRegistersNamespace: a passkey sign-up in sync mode registers
// the namespace on chain before it answers.
func TestSignupRegistersNamespace(t *testing.T) {
	c := newChain(t)
	contract := c.deploy()
	const origin = "http://localhost:8787"
	p := newPlane(t, c, sqliteStore(t), controlplane.RegistrySync, contract, &clock{}, func(cfg *controlplane.Config) {
		cfg.AllowedOrigins = []string{origin}
		cfg.Auth = controlplane.AuthConfig{Origins: []string{origin}}
	})
	if status := signup(t, p.url, origin, "carol"); status != http.StatusCreated {
		t.Fatalf("signup: %d", status)
	}
	logs := c.events(contract, "NamespaceRegistered")
	if len(logs) != 1 {
		t.Fatalf("NamespaceRegistered logs: %v", logs)
	}
	ev, err := binding.UnpackNamespaceRegisteredEvent(&logs[0])
	if err != nil || ev.Name != "carol" || ev.Owner != p.backend.Relayer() {
		t.Fatalf("registered %+v, %v", ev, err)
	}
}

// TestQueueCrashBetweenSendAndRecord: the worker is stopped after its
// transactions reached the chain but before it heard back or recorded
// anything (its database gone, its lease left behind). Another instance,
// once the lease has run out, finds every write on chain and records its
// hash: each write landed exactly once.
func TestQueueCrashBetweenSendAndRecord(t *testing.T) {
	c := newChain(t)
	contract := c.deploy()
	sc := sqliteStore(t)
	clk := &clock{}
	first := newPlane(t, c, sc, controlplane.RegistryQueue, contract, clk)
	w := first.seed(5)
	for _, cl := range w.claims {
		if status, _ := first.move(w, cl.ID, "approve"); status != 200 {
			t.Fatalf("approve: %d", status)
		}
	}
	start := c.nonce()
	c.HoldSends()
	first.run()
	// Sends are ordered by nonce: the first holds the others back.
	eventually(t, 30*time.Second, "a write sent", func() bool { return c.Sent() == 2 }) // deploy, then it
	eventually(t, 10*time.Second, "the sent write mined", func() bool { return c.nonce() == start+1 })
	first.store.Close() // the crash: nothing more is recorded
	first.stopWorkers()
	c.Release()

	clk.advance(10 * time.Minute) // past the dead worker's leases
	second := newPlane(t, c, sc, controlplane.RegistryQueue, contract, clk)
	second.run()
	eventually(t, 30*time.Second, "every hash recorded", func() bool {
		for _, cl := range second.claims(w) {
			if cl["approval_tx_hash"] == nil {
				return false
			}
		}
		return true
	})
	second.approvedOnce(contract, w)
	if got := c.nonce(); got != start+6 {
		t.Fatalf("relayer sent %d transactions for 6 writes", got-start)
	}
	if logs := c.events(contract, "NamespaceRegistered"); len(logs) != 1 {
		t.Fatalf("%d namespace registrations", len(logs))
	}
}

// TestQueueRPCOutage: while the endpoint is down, writes fail and the
// owner sees why; once it is back, the queue drains.
func TestQueueRPCOutage(t *testing.T) {
	c := newChain(t)
	contract := c.deploy()
	clk := &clock{}
	p := newPlane(t, c, sqliteStore(t), controlplane.RegistryQueue, contract, clk)
	w := p.seed(3)
	c.SetDown(true)
	p.run()
	for _, cl := range w.claims {
		if status, _ := p.move(w, cl.ID, "approve"); status != 200 {
			t.Fatalf("approve: %d", status)
		}
	}
	eventually(t, 30*time.Second, "the failures shown on the claims", func() bool {
		for _, cl := range p.claims(w) {
			if msg, _ := cl["registry_error"].(string); !strings.Contains(msg, evm.ReasonRPC) {
				return false
			}
		}
		return true
	})
	c.SetDown(false)
	clk.advance(time.Hour) // past the retry backoff
	eventually(t, 30*time.Second, "the queue drained", func() bool {
		for _, cl := range p.claims(w) {
			if cl["approval_tx_hash"] == nil || cl["registry_error"] != nil {
				return false
			}
		}
		return true
	})
	p.approvedOnce(contract, w)
}

// TestQueueRevertRecorded: a write the contract refuses is recorded as
// failed, with the decoded reason on the claim.
func TestQueueRevertRecorded(t *testing.T) {
	c := newChain(t)
	contract := c.deploy()
	p := newPlane(t, c, sqliteStore(t), controlplane.RegistryQueue, contract, &clock{})
	w := p.seed(1)
	c.asOwner(contract, binding.PackSetRelayer(common.HexToAddress("0x00000000000000000000000000000000000000bb")))
	p.run()
	p.move(w, w.claims[0].ID, "approve")
	eventually(t, 30*time.Second, "the revert recorded", func() bool {
		msg, _ := p.claims(w)[w.claims[0].ID]["registry_error"].(string)
		return strings.Contains(msg, "reverted: NotRelayer("+p.backend.Relayer().Hex()+")")
	})
}

// TestQueuePostgresTwoInstances: two control-plane instances share one
// PostgreSQL database and one relayer key, both running workers; every
// write lands exactly once.
func TestQueuePostgresTwoInstances(t *testing.T) {
	sc := postgresStore(t)
	c := newChain(t)
	contract := c.deploy()
	clk := &clock{}
	a := newPlane(t, c, sc, controlplane.RegistryQueue, contract, clk)
	b := newPlane(t, c, sc, controlplane.RegistryQueue, contract, clk)
	w := a.seed(20)
	start := c.nonce()
	a.run()
	b.run()
	for i, cl := range w.claims {
		via := a
		if i%2 == 1 {
			via = b
		}
		if status, _ := via.move(w, cl.ID, "approve"); status != 200 {
			t.Fatalf("approve: %d", status)
		}
	}
	eventually(t, 60*time.Second, "every hash recorded", func() bool {
		for _, cl := range a.claims(w) {
			if cl["approval_tx_hash"] == nil {
				return false
			}
		}
		return true
	})
	a.approvedOnce(contract, w)
	if got := c.nonce() - start; got != 21 {
		t.Fatalf("relayer sent %d transactions for 21 writes", got)
	}
}

// postgresStore is a fresh schema of IDN_TEST_POSTGRES_URL, dropped at
// cleanup; the test is skipped without it, and fails under CI=true.
func postgresStore(t testing.TB) controlplane.StoreConfig {
	t.Helper()
	base := os.Getenv("IDN_TEST_POSTGRES_URL")
	if base == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("IDN_TEST_POSTGRES_URL is unset but CI=true: PostgreSQL tests must run in CI")
		}
		t.Skip("PostgreSQL tests skipped: IDN_TEST_POSTGRES_URL is unset")
	}
	var b [6]byte
	rand.Read(b[:])
	schema := "t_" + hex.EncodeToString(b[:])
	admin, err := sql.Open("pgx", base)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Exec(`CREATE SCHEMA ` + schema); err != nil {
		admin.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		admin.Exec(`DROP SCHEMA ` + schema + ` CASCADE`)
		admin.Close()
	})
	sep := "?"
	if strings.Contains(base, "?") {
		sep = "&"
	}
	return controlplane.StoreConfig{Provider: controlplane.ProviderPostgres, DatabaseURL: base + sep + "search_path=" + schema}
}

// signup runs the passkey sign-up of ns against the control plane at base
// with a software authenticator, and returns the answer's status.
func signup(t *testing.T, base, origin, ns string) int {
	t.Helper()
	res, err := http.Get(base + "/v1/auth/signup/options?namespace=" + ns)
	if err != nil {
		t.Fatal(err)
	}
	options, _ := io.ReadAll(res.Body)
	res.Body.Close()
	opts, err := virtualwebauthn.ParseAttestationOptions(string(options))
	if err != nil {
		t.Fatalf("signup options %s: %v", options, err)
	}
	var cred virtualwebauthn.Credential
	for {
		// Verifiers refuse P-256 coordinates shorter than 32 bytes, which
		// virtualwebauthn would send: keep to keys that fill them.
		cred = virtualwebauthn.NewCredential(virtualwebauthn.KeyTypeEC2)
		k, err := x509.ParsePKCS8PrivateKey(cred.Key.Data)
		if err != nil {
			t.Fatal(err)
		}
		point, _ := k.(*ecdsa.PrivateKey).PublicKey.Bytes()
		if point[1] != 0 && point[33] != 0 {
			break
		}
	}
	rp := virtualwebauthn.RelyingParty{ID: "localhost", Name: "idn", Origin: origin}
	credential := virtualwebauthn.CreateAttestationResponse(rp, virtualwebauthn.NewAuthenticator(), cred, *opts)
	body, _ := json.Marshal(map[string]any{"namespace": ns, "credential": json.RawMessage(credential)})
	req, _ := http.NewRequest("POST", base+"/v1/auth/signup", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Origin", origin)
	res, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode
}

// TestNoPersonalDataOnChain: what a claim puts on chain is public for
// ever, so its approval writes the namespace, public key and service and
// nothing of what the service reported about the agent (its address,
// subject or name): neither in the transaction's input nor in its logs.
func TestNoPersonalDataOnChain(t *testing.T) {
	c := newChain(t)
	contract := c.deploy()
	p := newPlane(t, c, sqliteStore(t), controlplane.RegistrySync, contract, &clock{})
	body, _ := json.Marshal(map[string]any{"namespaces": []string{"acme"},
		"services": []map[string]string{{"slug": "github", "name": "GitHub", "owner": "acme"}}})
	req, _ := http.NewRequest("POST", p.url+"/v1/test/seed", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-IDN-Test-Seed-Token", "seed")
	var seeded struct {
		Sessions map[string]string `json:"sessions"`
		APIKeys  map[string]string `json:"api_keys"`
	}
	if status := p.call(req, &seeded); status != 200 {
		t.Fatalf("seed: %d", status)
	}
	agent, err := identity.New("acme")
	if err != nil {
		t.Fatal(err)
	}
	personal := map[string]string{"agent_ip": "203.0.113.77", "subject": "jane.doe@example.com", "agent_name": "Jane's laptop"}
	submit := map[string]any{"namespace": "acme", "public_key": identity.FormatPublicKey(agent.PublicKey), "service": "github"}
	for k, v := range personal {
		submit[k] = v
	}
	body, _ = json.Marshal(submit)
	req, _ = http.NewRequest("POST", p.url+"/v1/claims", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+seeded.APIKeys["github"])
	if err := agent.Sign(req, identity.SignOptions{}); err != nil {
		t.Fatal(err)
	}
	var claim seededClaim
	if status := p.call(req, &claim); status != http.StatusCreated {
		t.Fatalf("claim submission: %d", status)
	}
	w := world{session: seeded.Sessions["acme"], claims: []seededClaim{claim}}
	status, approved := p.move(w, claim.ID, "approve")
	if status != 200 {
		t.Fatalf("approve: %d %v", status, approved)
	}
	hash := common.HexToHash(approved["approval_tx_hash"].(string))
	ctx := context.Background()
	tx, _, err := c.Sim.Client().TransactionByHash(ctx, hash)
	if err != nil {
		t.Fatal(err)
	}
	receipt, err := c.Sim.Client().TransactionReceipt(ctx, hash)
	if err != nil {
		t.Fatal(err)
	}
	written := [][]byte{tx.Data()}
	for _, l := range receipt.Logs {
		written = append(written, l.Data)
	}
	for _, b := range written {
		for field, v := range personal {
			if bytes.Contains(b, []byte(v)) {
				t.Errorf("the approval's transaction carries the claim's %s %q on chain", field, v)
			}
		}
	}
	if !bytes.Contains(tx.Data(), []byte(claim.PublicKey)) {
		t.Errorf("the approval does not carry the public key it authorises")
	}
}

// failingHashRecord wraps a backend: after its first mined approval it
// makes the database refuse to record approval hashes, the failure
// between a write reaching the chain and its hash being recorded.
type failingHashRecord struct {
	controlplane.Registry
	db       *sql.DB
	calls    atomic.Int32
	firstTx  atomic.Pointer[string]
	injected chan struct{}
}

func (f *failingHashRecord) ApproveClaimDirect(ctx context.Context, namespace, publicKey, service string) (string, error) {
	h, err := f.Registry.ApproveClaimDirect(ctx, namespace, publicKey, service)
	if f.calls.Add(1) == 1 && err == nil {
		f.firstTx.Store(&h)
		if _, err := f.db.Exec(`CREATE TRIGGER refuse_hash BEFORE UPDATE OF approval_tx_hash ON claims
			BEGIN SELECT RAISE(ABORT, 'injected: the hash cannot be recorded'); END`); err != nil {
			panic(err)
		}
		close(f.injected)
	}
	return h, err
}

// TestQueueHashRecordFailsAfterMinedWrite: the approval is mined but its
// hash cannot be recorded; the queue retries the job, and the retry finds
// the write on chain and records its hash without sending it again.
func TestQueueHashRecordFailsAfterMinedWrite(t *testing.T) {
	c := newChain(t)
	contract := c.deploy()
	sc := sqliteStore(t)
	clk := &clock{}
	side, err := sql.Open("sqlite", "file:"+sc.SQLitePath)
	if err != nil {
		t.Fatal(err)
	}
	defer side.Close()
	f := &failingHashRecord{db: side, injected: make(chan struct{})}
	p := newPlane(t, c, sc, controlplane.RegistryQueue, contract, clk, func(cfg *controlplane.Config) {
		f.Registry = cfg.Registry.Backend
		cfg.Registry.Backend = f
	})
	w := p.seed(1)
	cl := w.claims[0]
	if status, _ := p.move(w, cl.ID, "approve"); status != 200 {
		t.Fatalf("approve: %d", status)
	}
	start := c.nonce()
	p.run()
	<-f.injected
	eventually(t, 30*time.Second, "the failed record shown on the claim", func() bool {
		msg, _ := p.claims(w)[cl.ID]["registry_error"].(string)
		return strings.Contains(msg, "injected")
	})
	if _, err := side.Exec(`DROP TRIGGER refuse_hash`); err != nil {
		t.Fatal(err)
	}
	clk.advance(time.Hour) // past the retry's backoff
	eventually(t, 30*time.Second, "the hash recorded", func() bool { return p.claims(w)[cl.ID]["approval_tx_hash"] != nil })
	p.stopWorkers()

	if got := p.claims(w)[cl.ID]["approval_tx_hash"]; got != *f.firstTx.Load() {
		t.Fatalf("recorded %v, the mined write was %s", got, *f.firstTx.Load())
	}
	if n := f.calls.Load(); n < 2 {
		t.Fatalf("the backend was called %d times: the job was not retried", n)
	}
	p.approvedOnce(contract, w)
	// The namespace's registration and the approval, nothing sent twice.
	if sent := c.nonce() - start; sent != 2 {
		t.Fatalf("relayer sent %d transactions for 2 writes", sent)
	}
}
