package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idnhq/idn/claimcache"
	"github.com/idnhq/idn/claimcache/claimcachetest"
	"github.com/idnhq/idn/credvault"
	"github.com/idnhq/idn/gateway"
	"github.com/idnhq/idn/identity"
)

// restartWorld is a control plane that approved one agent, an upstream
// that counts the orders it takes, and a gateway configuration whose
// DataDir holds a connection to it. Signatures are checked against a
// public authority, so captured bytes verify at any gateway address.
type restartWorld struct {
	agent    *identity.Identity
	cfg      gateway.Config
	orders   atomic.Int64
	upstream *httptest.Server
}

const publicAuthority = "gateway.test"

func newRestartWorld(t *testing.T) *restartWorld {
	t.Helper()
	w := &restartWorld{}
	w.agent, _ = identity.New("alice")
	cp := claimcachetest.NewServer()
	t.Cleanup(cp.Close)
	cp.Approve(claimcache.Claim{Namespace: "alice", Service: "shop", PublicKey: w.agent.PublicKeyString()})
	w.upstream = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.orders.Add(1)
	}))
	t.Cleanup(w.upstream.Close)
	w.cfg = minimalConfig(t)
	w.cfg.ControlPlaneURL, w.cfg.ServiceAPIKey = cp.URL, cp.APIKey("shop")
	w.cfg.Proxy.PublicAuthority = publicAuthority
	gw := w.start(t, w.cfg.DataDir)
	if _, err := gw.Vault().Create(t.Context(), &credvault.Connection{ID: "shop", BaseURL: w.upstream.URL,
		AuthMode: credvault.AuthBearer, AuthSecretKey: "token"}, map[string]string{"token": "upstream-token"}); err != nil {
		t.Fatal(err)
	}
	if err := gw.Close(); err != nil {
		t.Fatal(err)
	}
	return w
}

// start runs a gateway on dataDir until its claims are loaded, and
// returns it with its address; the test's end closes both.
func (w *restartWorld) start(t *testing.T, dataDir string) *gatewayUnderTest {
	t.Helper()
	cfg := w.cfg
	cfg.DataDir, cfg.IdentityHome, cfg.CatalogFile = dataDir, "", ""
	gw, err := gateway.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gw.Close() })
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
	return &gatewayUnderTest{Gateway: gw, url: srv.URL}
}

type gatewayUnderTest struct {
	*gateway.Gateway
	url string
}

// order is a signed POST, kept as bytes to send to any gateway.
type order struct {
	header http.Header
	body   []byte
}

// sign signs an order created at the given offset from now.
func (w *restartWorld) sign(t *testing.T, ahead time.Duration) order {
	t.Helper()
	body := []byte(`{"item":"book","qty":1}`)
	req, _ := http.NewRequest("POST", "http://"+publicAuthority+"/proxy/shop/orders", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if err := w.agent.Sign(req, identity.SignOptions{Created: time.Now().Add(ahead)}); err != nil {
		t.Fatal(err)
	}
	return order{req.Header, body}
}

// send sends o's bytes to gw and returns the status and error code.
func (gw *gatewayUnderTest) send(t *testing.T, o order) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", gw.url+"/proxy/shop/orders", bytes.NewReader(o.body))
	req.Header = o.header.Clone()
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var env struct{ Code string }
	_ = json.NewDecoder(res.Body).Decode(&env)
	return res.StatusCode, env.Code
}

func want(t *testing.T, what string, status int, code string, wantStatus int, wantCode string) {
	t.Helper()
	if status != wantStatus || code != wantCode {
		t.Fatalf("%s: %d %s, want %d %s", what, status, code, wantStatus, wantCode)
	}
}

// crashImage copies dir as a crash would leave it: the files of a
// running gateway, nothing Close writes.
func crashImage(t *testing.T, dir string) string {
	t.Helper()
	image := t.TempDir()
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(image, rel), 0o700)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(image, rel), b, 0o600)
	})
	if err != nil {
		t.Fatal(err)
	}
	return image
}

// TestRestartReopensNoReplay: a signed order accepted before a restart is
// refused as a replay after it, and the upstream takes it once, however
// the gateway stopped. A clean stop costs clients nothing; a crash costs
// them the requests signed up to the horizon's lease (2 s) after it.
func TestRestartReopensNoReplay(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// ahead is how far the client's clock runs ahead of the gateway's.
		ahead time.Duration
		// stop ends the first gateway and returns the DataDir the second
		// starts on.
		stop func(t *testing.T, gw *gatewayUnderTest, dataDir string) string
		// freshRefused: an order signed at once after the restart is
		// refused (the crash's cost); served is the least ahead a fresh
		// order is served.
		freshRefused bool
		served       time.Duration
	}{
		{"replay after a clean stop", 0, func(t *testing.T, gw *gatewayUnderTest, dir string) string {
			if err := gw.Close(); err != nil {
				t.Fatal(err)
			}
			return dir
		}, false, 0},
		{"replay after a crash", 0, func(t *testing.T, gw *gatewayUnderTest, dir string) string {
			return crashImage(t, dir)
		}, true, 5 * time.Second},
		{"replay after a crash, signed by a clock 20 s ahead", 20 * time.Second, func(t *testing.T, gw *gatewayUnderTest, dir string) string {
			return crashImage(t, dir)
		}, true, 25 * time.Second},
		{"replay after a clean stop whose snapshot was damaged", 0, func(t *testing.T, gw *gatewayUnderTest, dir string) string {
			if err := gw.Close(); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, gateway.NonceSnapshotFile)
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			b[len(b)/2] ^= 1
			if err := os.WriteFile(path, b, 0o600); err != nil {
				t.Fatal(err)
			}
			return dir
		}, true, 5 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			w := newRestartWorld(t)
			first := w.start(t, w.cfg.DataDir)
			captured := w.sign(t, tt.ahead)
			status, code := first.send(t, captured)
			want(t, "the order", status, code, http.StatusOK, "")
			status, code = first.send(t, captured)
			want(t, "its replay", status, code, http.StatusForbidden, "AUTH_REPLAY_DETECTED")

			second := w.start(t, tt.stop(t, first, w.cfg.DataDir))
			status, code = second.send(t, captured)
			want(t, "its replay after the restart", status, code, http.StatusForbidden, "AUTH_REPLAY_DETECTED")
			if n := w.orders.Load(); n != 1 {
				t.Fatalf("the upstream took the order %d times", n)
			}
			status, code = second.send(t, w.sign(t, 0))
			if tt.freshRefused {
				want(t, "an order signed at once after the crash", status, code, http.StatusForbidden, "AUTH_REPLAY_DETECTED")
			} else {
				want(t, "an order signed at once after the restart", status, code, http.StatusOK, "")
			}
			status, code = second.send(t, w.sign(t, tt.served))
			want(t, "an order signed past the horizon", status, code, http.StatusOK, "")
		})
	}
}

// TestSecondGatewayOnOneDataDirIsRefused: two gateways sharing a DataDir
// would each take the other's nonces for its own, so the second fails to
// start.
func TestSecondGatewayOnOneDataDirIsRefused(t *testing.T) {
	t.Parallel()
	cfg := minimalConfig(t)
	gw, err := gateway.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer gw.Close()
	if second, err := gateway.New(cfg); err == nil {
		second.Close()
		t.Fatal("a second gateway started on the DataDir of a running one")
	}
	gw.Close()
	again, err := gateway.New(cfg)
	if err != nil {
		t.Fatalf("after the first closed: %v", err)
	}
	again.Close()
}

// TestUnwritableHorizonRefusesSignedRequests: a request the horizon must
// move for is refused 503 NONCE_STORE_UNAVAILABLE while the horizon
// cannot be written, and readiness says so; once it can, both recover.
func TestUnwritableHorizonRefusesSignedRequests(t *testing.T) {
	t.Parallel()
	w := newRestartWorld(t)
	gw := w.start(t, w.cfg.DataDir)
	// A directory where the horizon is written aside: even root cannot
	// open it as a file.
	blocker := filepath.Join(w.cfg.DataDir, gateway.NonceHorizonFile+".tmp")
	if err := os.Mkdir(blocker, 0o700); err != nil {
		t.Fatal(err)
	}
	status, code := gw.send(t, w.sign(t, 10*time.Second)) // ahead: the horizon must move first
	want(t, "a request the horizon must move for", status, code, http.StatusServiceUnavailable, "NONCE_STORE_UNAVAILABLE")
	if n := w.orders.Load(); n != 0 {
		t.Fatalf("the upstream took %d orders", n)
	}
	ready := func() int {
		res, err := http.Get(gw.url + "/health/ready")
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	if got := ready(); got != http.StatusServiceUnavailable {
		t.Fatalf("/health/ready while the horizon cannot be written: %d", got)
	}
	if err := os.Remove(blocker); err != nil {
		t.Fatal(err)
	}
	status, code = gw.send(t, w.sign(t, 10*time.Second))
	want(t, "the same once the horizon can be written", status, code, http.StatusOK, "")
	if got := ready(); got != http.StatusOK {
		t.Fatalf("/health/ready once the horizon is written: %d", got)
	}
}
