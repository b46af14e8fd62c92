package redisstore_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idnhq/idn/claimcache"
	"github.com/idnhq/idn/claimcache/claimcachetest"
	"github.com/idnhq/idn/credvault"
	"github.com/idnhq/idn/gateway"
	"github.com/idnhq/idn/identity"
	"github.com/idnhq/idn/replay/redisstore"
	"github.com/idnhq/idn/replay/redisstore/redistest"
)

// fleet is a control plane that approved one agent, an upstream that
// counts the orders it takes, and Redis: what replicas share.
type fleet struct {
	agent       *identity.Identity
	cfg         gateway.Config
	redis       *redistest.Server
	upstreamURL string
	orders      atomic.Int64
}

const authority = "gateway.test"

func newFleet(t *testing.T) *fleet {
	t.Helper()
	f := &fleet{}
	f.agent, _ = identity.New("alice")
	cp := claimcachetest.NewServer()
	t.Cleanup(cp.Close)
	cp.Approve(claimcache.Claim{Namespace: "alice", Service: "shop", PublicKey: f.agent.PublicKeyString()})
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		f.orders.Add(1)
	}))
	t.Cleanup(upstream.Close)
	key, _ := credvault.GenerateMasterKey()
	f.cfg = gateway.Config{MasterKey: key, ControlPlaneURL: cp.URL, ServiceAPIKey: cp.APIKey("shop")}
	f.cfg.Proxy.PublicAuthority = authority
	// Redis keeps every write on disk, as a fleet's should.
	f.redis = redistest.Start(t, "--appendonly", "yes", "--appendfsync", "always")
	f.upstreamURL = upstream.URL
	return f
}

// replica starts a gateway on dataDir with its own connection to Redis.
func (f *fleet) replica(t *testing.T, dataDir string) *replica {
	t.Helper()
	return f.replicaWith(t, dataDir, redisstore.Config{URL: f.redis.URL(), Timeout: 300 * time.Millisecond}, true)
}

// replicaWith starts a gateway on a store of its own configuration,
// waiting for it to be ready when up.
func (f *fleet) replicaWith(t *testing.T, dataDir string, store redisstore.Config, up bool) *replica {
	t.Helper()
	nonces := open(t, store)
	cfg := f.cfg
	cfg.DataDir, cfg.NonceStore = dataDir, nonces
	gw, err := gateway.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gw.Close() })
	if _, ok := gw.Vault().Lookup("shop"); !ok {
		if _, err := gw.Vault().Create(t.Context(), &credvault.Connection{ID: "shop", BaseURL: f.upstreamURL,
			AuthMode: credvault.AuthBearer, AuthSecretKey: "token"}, map[string]string{"token": "upstream-token"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := gw.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gw)
	t.Cleanup(srv.Close)
	r := &replica{Gateway: gw, url: srv.URL}
	if !up {
		// Not ready for want of its nonce store: wait for its claims.
		awaitTrue(t, "the replica's claims", func() bool { _, body := r.get(t, "/health/ready"); return strings.Contains(body, `"claims":"ok"`) })
		return r
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := gw.Up(ctx); err != nil {
		t.Fatal(err)
	}
	return r
}

type replica struct {
	*gateway.Gateway
	url string
}

type order struct {
	header http.Header
	body   []byte
}

func (f *fleet) sign(t testing.TB) order {
	body := []byte(`{"item":"book"}`)
	req, _ := http.NewRequest("POST", "http://"+authority+"/proxy/shop/orders", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if err := f.agent.Sign(req, identity.SignOptions{}); err != nil {
		t.Error(err)
	}
	return order{req.Header, body}
}

// send sends o to r and returns the status and error code.
func (r *replica) send(t testing.TB, o order) (int, string) {
	req, _ := http.NewRequest("POST", r.url+"/proxy/shop/orders", bytes.NewReader(o.body))
	req.Header = o.header.Clone()
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

func (r *replica) get(t testing.TB, path string) (int, string) {
	res, err := http.Get(r.url + path)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// Attack rows: a signed order served by replica A is replayed to B, and
// to A after a restart. Both are refused; the upstream takes it once.
func TestFleetRefusesReplays(t *testing.T) {
	f := newFleet(t)
	dirA := t.TempDir()
	a, b := f.replica(t, dirA), f.replica(t, t.TempDir())
	o := f.sign(t)
	if status, code := a.send(t, o); status != 200 {
		t.Fatalf("order on A: %d %s", status, code)
	}
	if status, code := b.send(t, o); status != 403 || code != "AUTH_REPLAY_DETECTED" {
		t.Fatalf("replay to B: %d %s, want 403 AUTH_REPLAY_DETECTED", status, code)
	}
	a.Close()
	restarted := f.replica(t, dirA)
	if status, code := restarted.send(t, o); status != 403 || code != "AUTH_REPLAY_DETECTED" {
		t.Fatalf("replay to A restarted: %d %s, want 403 AUTH_REPLAY_DETECTED", status, code)
	}
	if status, code := restarted.send(t, f.sign(t)); status != 200 {
		t.Fatalf("a fresh order on A restarted: %d %s", status, code)
	}
	if n := f.orders.Load(); n != 2 {
		t.Fatalf("the upstream took %d orders, want 2", n)
	}
}

// Fault row: Redis stops under load. Every request sent while it is
// down is refused 503 NONCE_STORE_UNAVAILABLE (never served from a
// local memory), readiness fails, the metrics say so; once Redis is
// back the replica serves again by itself.
func TestFleetFailsClosedWithoutRedis(t *testing.T) {
	f := newFleet(t)
	a := f.replica(t, t.TempDir())
	var down atomic.Bool
	var servedWhileDown, refused atomic.Int64
	ctx, stop := context.WithCancel(t.Context())
	var load sync.WaitGroup
	for range 4 {
		load.Go(func() {
			for ctx.Err() == nil {
				wasDown := down.Load()
				status, code := a.send(t, f.sign(t))
				switch {
				case status == 200 && wasDown:
					servedWhileDown.Add(1)
				case status == 503 && code == "NONCE_STORE_UNAVAILABLE":
					refused.Add(1)
				case status != 200:
					t.Errorf("under load: %d %s", status, code)
				}
			}
		})
	}
	defer func() { stop(); load.Wait() }()
	awaitOrders(t, &f.orders, 20)

	f.redis.Stop()
	down.Store(true)
	awaitCount(t, "refusals", &refused, 20)
	if status, body := a.get(t, "/health/ready"); status != 503 || !strings.Contains(body, `"nonces":`) {
		t.Fatalf("readiness with Redis down: %d %s", status, body)
	}
	metrics := func() string { _, m := a.get(t, "/metrics"); return m }
	if m := metrics(); !strings.Contains(m, "idn_gateway_nonce_store_up 0") || strings.Contains(m, "idn_gateway_nonce_store_unavailable_total 0") {
		t.Fatalf("metrics with Redis down:\n%s", grepLines(m, "nonce_store"))
	}
	if n := servedWhileDown.Load(); n != 0 {
		t.Fatalf("%d orders sent while Redis was down were served", n)
	}

	down.Store(false)
	f.redis.Start()
	before := f.orders.Load()
	awaitOrders(t, &f.orders, before+20)
	if status, body := a.get(t, "/health/ready"); status != 200 {
		t.Fatalf("readiness once Redis is back: %d %s", status, body)
	}
	if m := metrics(); !strings.Contains(m, "idn_gateway_nonce_store_up 1") {
		t.Fatalf("metrics once Redis is back:\n%s", grepLines(m, "nonce_store"))
	}
}

// Fault row: one replica's clock runs 10 s ahead of Redis's. It refuses
// every signed request and is not ready, rather than keep nonces for a
// window the other replicas' clocks do not share; the others serve.
func TestFleetSkewedReplicaFailsClosed(t *testing.T) {
	f := newFleet(t)
	good := f.replica(t, t.TempDir())
	ahead := func() time.Time { return time.Now().Add(10 * time.Second) }
	skewed := f.replicaWith(t, t.TempDir(), redisstore.Config{URL: f.redis.URL(), Clock: ahead}, false)
	if status, code := skewed.send(t, f.sign(t)); status != 503 || code != "NONCE_STORE_UNAVAILABLE" {
		t.Fatalf("order on the skewed replica: %d %s, want 503 NONCE_STORE_UNAVAILABLE", status, code)
	}
	if status, body := skewed.get(t, "/health/ready"); status != 503 || !strings.Contains(body, `"nonces":`) {
		t.Fatalf("the skewed replica's readiness: %d %s", status, body)
	}
	if status, code := good.send(t, f.sign(t)); status != 200 {
		t.Fatalf("order on the replica in time: %d %s", status, code)
	}
}

func awaitOrders(t *testing.T, n *atomic.Int64, atLeast int64) {
	t.Helper()
	awaitCount(t, "orders", n, atLeast)
}

// awaitCount waits until n reaches atLeast, for the load to get there.
func awaitCount(t *testing.T, what string, n *atomic.Int64, atLeast int64) {
	t.Helper()
	awaitTrue(t, what, func() bool { return n.Load() >= atLeast })
}

// awaitTrue polls cond until it holds, for up to 20 s.
func awaitTrue(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
