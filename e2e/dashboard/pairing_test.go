package dashboard_test

import (
	"bytes"
	"context"
	"crypto/ecdh"
	"crypto/hpke"
	"crypto/rand"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/idnhq/idn/controlplane"
	"github.com/idnhq/idn/credvault"
	"github.com/idnhq/idn/identity"
	"github.com/idnhq/idn/kit/testlog"
)

// vectors are the RFC 9180 test vectors of testdata/rfc9180-x25519.json.
type vectors struct {
	A1     map[string]string `json:"a1"`
	AES256 struct {
		Info, IkmE, IkmR, SkRm, PkRm, Enc string
	} `json:"aes256gcm"`
}

func loadVectors(t *testing.T) vectors {
	t.Helper()
	b, err := os.ReadFile("testdata/rfc9180-x25519.json")
	if err != nil {
		t.Fatal(err)
	}
	var v vectors
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func unhex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

var x25519KEM = hpke.DHKEM(ecdh.X25519())

// TestRFC9180VectorsInGo checks the vectors of testdata against Go's
// crypto/hpke, so the browser test below compares with true values.
func TestRFC9180VectorsInGo(t *testing.T) {
	v := loadVectors(t)
	a := v.A1
	for _, pair := range [][2]string{{a["ikmR"], a["pkRm"]}, {a["ikmE"], a["pkEm"]}, {v.AES256.IkmR, v.AES256.PkRm}, {v.AES256.IkmE, v.AES256.Enc}} {
		k, err := x25519KEM.DeriveKeyPair(unhex(t, pair[0]))
		if err != nil || hex.EncodeToString(k.PublicKey().Bytes()) != pair[1] {
			t.Fatalf("DeriveKeyPair(%s) = %x, %v; want %s", pair[0], k.PublicKey().Bytes(), err, pair[1])
		}
	}
	sk, err := x25519KEM.NewPrivateKey(unhex(t, a["skRm"]))
	if err != nil {
		t.Fatal(err)
	}
	r, err := hpke.NewRecipient(unhex(t, a["enc"]), sk, hpke.HKDFSHA256(), hpke.AES128GCM(), unhex(t, a["info"]))
	if err != nil {
		t.Fatal(err)
	}
	if pt, err := r.Open(unhex(t, a["aad"]), unhex(t, a["ct"])); err != nil || hex.EncodeToString(pt) != a["pt"] {
		t.Fatalf("A.1 sequence 0 opens to %x, %v", pt, err)
	}
}

// TestHPKEInChromium runs the dashboard's hpke.js in Chromium: RFC 9180's
// appendix A.1 value by value, the AES-256-GCM suite's encapsulation, and
// seals that Go's crypto/hpke opens.
func TestHPKEInChromium(t *testing.T) {
	chromium(t)
	v := loadVectors(t)
	cp := startPairingWorld(t, controlplane.ProviderSQLite)
	b := newBrowser(t, cp.base)
	b.open("/login")
	load := `const m = await import(document.querySelector('script[src$="/app.js"]').src.replace(/app\.js$/, "hpke.js"));
		const hex = (s) => Uint8Array.from(s.match(/../g) ?? [], (h) => parseInt(h, 16));
		const tohex = (b) => [...b].map((x) => x.toString(16).padStart(2, "0")).join("");`
	run := func(body string) map[string]string {
		t.Helper()
		out, err := chromedp.Run(b.ctx, chromedp.Evaluate[map[string]string]("(async () => {"+load+body+"})()", chromedp.EvalAwaitPromise))
		if err != nil {
			t.Fatal(err)
		}
		return out
	}

	a := v.A1
	in, _ := json.Marshal(a)
	got := run(`const v = ` + string(in) + `;
		const ctx = await m.setupBaseS(hex(v.pkRm), hex(v.info), m.AES_128_GCM, hex(v.skEm));
		const ct = await m.seal(hex(v.pkRm), hex(v.info), hex(v.pt), {aad: hex(v.aad), aead: m.AES_128_GCM, ephemeralPrivateKey: hex(v.skEm)});
		return {enc: tohex(ctx.enc), shared_secret: tohex(ctx.sharedSecret), key_schedule_context: tohex(ctx.keyScheduleContext),
			secret: tohex(ctx.secret), key: tohex(ctx.key), base_nonce: tohex(ctx.baseNonce), ct: tohex(ct.subarray(32)), sealed_enc: tohex(ct.subarray(0, 32))};`)
	for _, k := range []string{"enc", "shared_secret", "key_schedule_context", "secret", "key", "base_nonce", "ct"} {
		if got[k] != a[k] {
			t.Errorf("A.1 %s = %s, want %s", k, got[k], a[k])
		}
	}
	if got["sealed_enc"] != a["enc"] {
		t.Errorf("A.1 seal's enc = %s", got["sealed_enc"])
	}

	// The suite the dashboard uses: the vector's ephemeral key (derived by
	// Go from ikmE) gives the vector's enc, and a message sealed with a
	// fresh ephemeral key opens with the vector's recipient key.
	eph, err := x25519KEM.DeriveKeyPair(unhex(t, v.AES256.IkmE))
	if err != nil {
		t.Fatal(err)
	}
	skE, _ := eph.Bytes()
	got = run(fmt.Sprintf(`const ctx = await m.setupBaseS(hex(%q), hex(%q), m.AES_256_GCM, hex(%q));
		const sealed = await m.seal(hex(%[1]q), hex(%[2]q), new TextEncoder().encode("sealed in chromium"));
		return {enc: tohex(ctx.enc), key_length: String(ctx.key.length), sealed: tohex(sealed)};`, v.AES256.PkRm, v.AES256.Info, hex.EncodeToString(skE)))
	if got["enc"] != v.AES256.Enc || got["key_length"] != "32" {
		t.Errorf("AES-256-GCM suite: enc %s (want %s), key length %s", got["enc"], v.AES256.Enc, got["key_length"])
	}
	skR, err := x25519KEM.NewPrivateKey(unhex(t, v.AES256.SkRm))
	if err != nil {
		t.Fatal(err)
	}
	if pt, err := hpke.Open(skR, hpke.HKDFSHA256(), hpke.AES256GCM(), unhex(t, v.AES256.Info), unhex(t, got["sealed"])); err != nil || string(pt) != "sealed in chromium" {
		t.Fatalf("Go opened the browser's seal to %q, %v", pt, err)
	}

	// sealSecrets, as the gateway pages call it, opens with crypto/hpke
	// under the gateway's info only.
	gk, _ := ecdh.X25519().GenerateKey(rand.Reader)
	got = run(fmt.Sprintf(`return {sealed: await m.sealSecrets("gw_e2e", %q, {"token": "s3cret"})};`,
		base64.RawURLEncoding.EncodeToString(gk.PublicKey().Bytes())))
	sealed, err := base64.RawURLEncoding.DecodeString(got["sealed"])
	if err != nil {
		t.Fatal(err)
	}
	priv, _ := hpke.NewDHKEMPrivateKey(gk)
	if pt, err := hpke.Open(priv, hpke.HKDFSHA256(), hpke.AES256GCM(), []byte("idn-pairing-v1gw_e2e"), sealed); err != nil || string(pt) != `{"token":"s3cret"}` {
		t.Fatalf("sealSecrets opens to %q, %v", pt, err)
	}
	if _, err := hpke.Open(priv, hpke.HKDFSHA256(), hpke.AES256GCM(), []byte("idn-pairing-v1gw_other"), sealed); err == nil {
		t.Fatal("a secret sealed for one gateway opened with another's info")
	}
}

// pairingWorld is a control plane whose database file, logs and relayed
// RPCs the test can read.
type pairingWorld struct {
	base, cpURL string
	dbDir       string // SQLite
	pgSchema    string // PostgreSQL: the test's schema in IDN_TEST_POSTGRES_URL
	logs        *testlog.Buffer
	relayed     *testlog.Buffer // bodies of the RPC route, both ways
}

// recorder copies what a handler answers.
type recorder struct {
	http.ResponseWriter
	to io.Writer
}

func (r recorder) Write(p []byte) (int, error) { r.to.Write(p); return r.ResponseWriter.Write(p) }

func (r recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

func startPairingWorld(t *testing.T, engine string) *pairingWorld {
	t.Helper()
	w := &pairingWorld{dbDir: t.TempDir(), logs: &testlog.Buffer{}, relayed: &testlog.Buffer{}}
	ln := freePort(t)
	port := ln.Addr().(*net.TCPAddr).Port
	w.base, w.cpURL = fmt.Sprintf("http://localhost:%d", port), fmt.Sprintf("http://127.0.0.1:%d", port)
	cfg := controlplane.StoreConfig{SQLitePath: filepath.Join(w.dbDir, "cp.db")}
	if engine == controlplane.ProviderPostgres {
		var url string
		url, w.pgSchema = postgresSchema(t)
		cfg = controlplane.StoreConfig{Provider: controlplane.ProviderPostgres, DatabaseURL: url}
	}
	st, err := controlplane.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	logger := slog.New(slog.NewJSONHandler(w.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	cp, err := controlplane.New(controlplane.Config{
		Store: st, JWTSecret: bytes.Repeat([]byte("j"), 32), AllowedOrigins: []string{w.base}, InsecureLocalhostCookie: true,
		TestSeedToken: seedToken, Logger: logger, AccessLog: logger,
	})
	if err != nil {
		t.Fatal(err)
	}
	rpc := regexp.MustCompile(`^/v1/gateways/[^/]+/rpc$`)
	h := http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if rpc.MatchString(r.URL.Path) {
			body, _ := io.ReadAll(r.Body)
			w.relayed.Write(body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			rw = recorder{rw, w.relayed}
		}
		cp.ServeHTTP(rw, r)
	})
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	srv.RegisterOnShutdown(func() { cp.Close() })
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { cp.Close(); _ = srv.Close() })
	return w
}

func (w *pairingWorld) post(t *testing.T, path, body string, out any) {
	t.Helper()
	req, _ := http.NewRequest("POST", w.cpURL+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-IDN-Test-Seed-Token", seedToken)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode >= 300 {
		t.Fatalf("%s: %d %s", path, res.StatusCode, b)
	}
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatal(err)
	}
}

// gatewayProcess runs the gateway binary with env, output to a file.
func gatewayProcess(t *testing.T, bin string, env []string, args ...string) (*exec.Cmd, string) {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), "out.log")
	f, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env, cmd.Stdout, cmd.Stderr = env, f, f
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Signal(os.Interrupt); cmd.Wait(); f.Close() })
	return cmd, logPath
}

// buildGateway builds the gateway binary into a temporary folder.
func buildGateway(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "gateway")
	build := exec.Command("go", "build", "-o", bin, "./cmd/gateway")
	build.Dir = "../.." // the root module's folder: builds with or without go.work
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the gateway: %v\n%s", err, out)
	}
	return bin
}

// serveGateway runs gateway serve with env on a free loopback port and
// waits until it is live; it returns the process, its address and its
// log file.
func serveGateway(t *testing.T, bin string, env []string) (cmd *exec.Cmd, addr, logPath string) {
	t.Helper()
	ln := freePort(t)
	addr = ln.Addr().String()
	ln.Close()
	cmd, logPath = gatewayProcess(t, bin, append(slices.Clip(env), "GATEWAY_ADDR="+addr), "serve")
	eventually(t, 20*time.Second, "gateway serve", func() bool {
		res, err := http.Get("http://" + addr + "/health/live")
		if err == nil {
			res.Body.Close()
		}
		return err == nil && res.StatusCode == 200
	})
	return cmd, addr, logPath
}

func runGateway(t *testing.T, bin string, env []string, args ...string) string {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("gateway %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestGatewayPairingEndToEnd pairs a real gateway process from the
// dashboard, adds a connection with a secret there, and has a signed agent
// request go through the gateway with the secret injected upstream; the
// secret appears nowhere on the control plane's side.
func TestGatewayPairingEndToEnd(t *testing.T) {
	chromium(t)
	bin := buildGateway(t)
	for _, engine := range []string{controlplane.ProviderSQLite, controlplane.ProviderPostgres} {
		t.Run(engine, func(t *testing.T) { gatewayPairingEndToEnd(t, bin, engine) })
	}
}

func gatewayPairingEndToEnd(t *testing.T, bin, engine string) {
	const secret, rotated = "sk-e2e-4d1f0c2b9a87e6d5", "sk-e2e-rotated-77c1e0"
	upstream := newUpstream(t, secret, rotated)
	w := startPairingWorld(t, engine)
	agent, err := identity.New("agent-e2e")
	if err != nil {
		t.Fatal(err)
	}
	var seeded struct {
		APIKeys  map[string]string `json:"api_keys"`
		Sessions map[string]string `json:"sessions"`
	}
	w.post(t, "/v1/test/seed", fmt.Sprintf(`{"namespaces":["alice","agent-e2e"],"services":[{"slug":"weather","name":"Weather","owner":"alice"}],
		"claims":[{"namespace":"agent-e2e","service":"weather","public_key":%q,"status":"approved"}]}`, identity.FormatPublicKey(agent.PublicKey)), &seeded)

	key, _ := credvault.GenerateMasterKey()
	dataDir := t.TempDir()
	env := append(os.Environ(), "GATEWAY_DATA_DIR="+dataDir, "GATEWAY_MASTER_KEY="+key.Encode(), "GATEWAY_ADMIN_ACCESS_MODE=loopback",
		"IDN_REGISTRY_URL="+w.cpURL, "IDN_SERVICE_API_KEY="+seeded.APIKeys["weather"],
		"GATEWAY_CLAIMS_CACHE_TTL_SECONDS=2", "GATEWAY_CLAIMS_CACHE_REFRESH_SECONDS=1", "LOG_LEVEL=debug")
	_, gwAddr, serveLog := serveGateway(t, bin, env)

	b := newBrowser(t, w.base)
	// The gateway pages' accessibility checks (a11y_test.go) run once,
	// with the SQLite engine, where axe-core is installed.
	audit := func(string) {}
	if engine == controlplane.ProviderSQLite && (os.Getenv("IDN_NODE_MODULES") != "" || os.Getenv("CI") == "true") {
		axe := axeSource(t)
		audit = func(name string) { b.audit(name, axe) }
	}
	if _, err := chromedp.Call(b.ctx, network.SetCookie, network.SetCookieParams{Name: controlplane.SessionCookie,
		Value: seeded.Sessions["alice"], URL: w.base, HTTPOnly: new(true)}); err != nil {
		t.Fatal(err)
	}
	step(t, "pair a gateway from the dashboard")
	b.open("/gateways")
	b.press("button", "Pair gateway")
	b.waitFor(`document.getElementById("pairing-command").value !== ""`, 5*time.Second)
	command := eval[string](b, `document.getElementById("pairing-command").value`)
	m := regexp.MustCompile(`^IDN_REGISTRY_URL=(\S+) gateway pair --session-id (gps_[0-9a-f]+) --pair-code ([0-9A-Z]{8}) --namespace alice$`).FindStringSubmatch(command)
	if m == nil || m[1] != w.base {
		t.Fatalf("the command shown is %q", command)
	}
	b.shot("gateways-pairing")
	audit("a11y-gateways-pairing")
	// The registry is reached by address here; the command's origin is the
	// dashboard's own.
	out := runGateway(t, bin, env, "pair", "--session-id", m[2], "--pair-code", m[3], "--namespace", "alice", "--daemon", "--name", "e2e-laptop")
	if !strings.Contains(out, "running in the background") {
		t.Fatalf("pair --daemon said %q", out)
	}
	t.Cleanup(func() { runGateway(t, bin, env, "pair", "--stop") })
	b.waitFor(`[...document.querySelectorAll("tr[data-gateway]")].some(r => r.textContent.includes("e2e-laptop") && r.textContent.includes("online"))`, 20*time.Second)
	fingerprint := eval[string](b, `document.querySelector("tr[data-gateway] code").textContent`)
	status := runGateway(t, bin, env, "pair", "--status")
	if !strings.Contains(status, "hpke key fingerprint: "+fingerprint) || !strings.Contains(status, "running: yes") ||
		!strings.Contains(status, "namespace alice") {
		t.Fatalf("pair --status:\n%s\n(the dashboard shows %s)", status, fingerprint)
	}
	b.shot("gateways")
	audit("a11y-gateways")

	step(t, "add a connection with a secret, sealed in the browser")
	b.press("link", "Manage e2e-laptop")
	b.waitFor(`location.pathname.startsWith("/gateways/gw_") && document.querySelector("#connections .summary")?.textContent.startsWith("No connections")`, 10*time.Second)
	// The service must exist: the field says so and offers the owner's.
	if hint := eval[string](b, `document.getElementById("conn-service-hint").textContent`); !strings.Contains(hint, "must exist") {
		t.Errorf("the Service field's hint reads %q", hint)
	}
	if got := eval[[]string](b, `[...document.querySelectorAll("#conn-services option")].map(o => o.value)`); fmt.Sprint(got) != "[weather]" {
		t.Errorf("the Service field offers %q, want the owner's one service", got)
	}
	b.fill("Connection id", "weather")
	b.fill("Name", "Weather")
	b.fill("Service", "weather")
	b.fill("Base URL", upstream)
	b.fill("Secret", secret)
	b.press("button", "Add connection")
	b.waitFor(`document.querySelector("tr[data-connection=weather]")`, 10*time.Second)
	b.shot("gateway")
	if href := eval[string](b, `document.querySelector("tr[data-connection=weather] a[aria-label='Activity of Weather']")?.getAttribute("href") ?? ""`); href != "/activity?connection=weather" {
		t.Errorf("the connection's activity link goes to %q", href)
	}

	step(t, "a signed agent request goes through the gateway with the secret injected")
	eventually(t, 20*time.Second, "the agent's request through the paired gateway", func() bool {
		status, body := agentThrough(t, gwAddr, agent)
		return status == 200 && strings.Contains(body, "sunny")
	})
	step(t, "gateway serve reports the agent's requests to the owner's Activity page")
	gatewayPage := b.path()
	// The page counts the chart before it lists the rows, so a report that
	// lands between the two shows in the table of a page without a chart:
	// the next page has both.
	eventually(t, 30*time.Second, "the agent's request on the Activity page, and its chart", func() bool {
		agentThrough(t, gwAddr, agent)
		b.open("/activity?connection=weather")
		return eval[bool](b, `[...document.querySelectorAll("tr[data-activity]")].some(r => r.textContent.includes("/forecast") &&
			r.textContent.includes("allowed") && r.querySelector("code.key")?.title === `+jsString(identity.FormatPublicKey(agent.PublicKey))+`) &&
			(document.querySelector("#activity-chart .summary")?.textContent ?? "") !== ""`)
	})
	b.shot("activity-paired")
	b.open(gatewayPage)
	b.waitFor(`document.querySelector("tr[data-connection=weather]")`, 10*time.Second)
	b.press("button", "Test Weather")
	b.waitFor(`[...document.querySelectorAll("p.done")].some(p => p.textContent.startsWith("Test passed"))`, 10*time.Second)

	step(t, "set and delete a credential variable")
	b.fill("Key", "SPARE_TOKEN")
	b.fill("Value", secret+"-spare")
	b.press("button", "Set variable")
	b.waitFor(`document.querySelector("tr[data-variable=SPARE_TOKEN]")`, 10*time.Second)
	audit("a11y-gateway")

	step(t, "rotate, edit, discover and delete from the gateway page")
	b.press("button", "Rotate Weather")
	b.fill("New secret", rotated)
	b.fill("Reason", "drill")
	b.press("button", "Rotate secret")
	b.waitFor(`!document.getElementById("rotate-connection").open`, 10*time.Second)
	if status, _ := agentThrough(t, gwAddr, agent); status != 200 {
		t.Fatalf("after rotation the agent's request answered %d", status)
	}
	b.press("button", "Edit Weather")
	b.fill("Name", "Weather API")
	b.press("button", "Save connection")
	b.waitFor(`document.querySelector("tr[data-connection=weather]")?.textContent.includes("Weather API")`, 10*time.Second)
	if n := len(b.named("button", "Discover")); n != 0 {
		t.Errorf("%d Discover buttons offered for an HTTP connection, which has no tools to discover", n)
	}
	// The deletions by keyboard: each says what it did, and the focus
	// goes to its section's heading once the list is empty.
	b.tabTo("Delete variable SPARE_TOKEN")
	b.do(chromedp.KeyEvent(kb.Enter))
	b.confirmByKeyboard("Delete variable")
	b.said("Variable SPARE_TOKEN deleted.")
	b.wantHeading("the last Delete variable", "Credential variables")
	b.waitFor(`!document.querySelector("tr[data-variable=SPARE_TOKEN]")`, 10*time.Second)
	b.tabTo("Delete connection Weather API")
	b.do(chromedp.KeyEvent(kb.Enter))
	b.confirmByKeyboard("Delete connection")
	b.said("Connection Weather API deleted.")
	b.wantHeading("the last Delete connection", "Connections")
	b.waitFor(`!document.querySelector("tr[data-connection=weather]")`, 10*time.Second)
	b.shot("gateway-emptied")

	step(t, "Escape cancels Unpair and returns the focus to it")
	b.tabTo("Unpair")
	b.do(chromedp.KeyEvent(kb.Enter))
	b.waitFor(`document.getElementById("confirm").open`, 5*time.Second)
	b.do(chromedp.KeyEvent(kb.Escape))
	b.waitFor(`!document.getElementById("confirm").open`, 5*time.Second)
	b.wantFocus("Escape", "Unpair")

	step(t, "unpair from the list by keyboard: the pair process ends by itself")
	b.open("/gateways")
	b.tabTo("Unpair e2e-laptop")
	b.do(chromedp.KeyEvent(kb.Enter))
	b.confirmByKeyboard("Unpair")
	b.said("Gateway e2e-laptop unpaired.")
	b.wantHeading("the last Unpair", "Your gateways")
	b.waitFor(`!document.querySelector("tr[data-gateway]")`, 10*time.Second)
	eventually(t, 15*time.Second, "the pair process to exit after unpairing", func() bool {
		return strings.Contains(runGateway(t, bin, env, "pair", "--status"), "running: no")
	})

	step(t, "the secret appears nowhere on the control plane's side")
	stored := map[string][]byte{}
	for name, path := range map[string]string{"database": "cp.db", "WAL": "cp.db-wal"} {
		stored[name], _ = os.ReadFile(filepath.Join(w.dbDir, path))
	}
	if w.pgSchema != "" {
		stored["PostgreSQL dump"] = pgDump(t, w.pgSchema)
	}
	for name, b := range stored {
		if bytes.Contains(b, []byte(secret)) || bytes.Contains(b, []byte(rotated)) {
			t.Errorf("a secret is in the control plane's %s", name)
		}
	}
	if bytes.Contains(w.logs.Bytes(), []byte(secret)) {
		t.Error("the secret is in the control plane's logs")
	}
	relayed := w.relayed.Bytes()
	if !bytes.Contains(relayed, []byte("sealed_secrets")) {
		t.Errorf("relayed RPCs (%d bytes) carry no sealed secret", len(relayed))
	}
	for _, s := range []string{secret, rotated} {
		if bytes.Contains(relayed, []byte(s)) || bytes.Contains(w.logs.Bytes(), []byte(s)) {
			t.Errorf("a secret is in the relayed RPCs or the control plane's logs")
		}
		for _, p := range []string{serveLog, filepath.Join(dataDir, "pair.log")} {
			b, _ := os.ReadFile(p)
			if bytes.Contains(b, []byte(s)) {
				t.Errorf("a secret is in the gateway's log %s", filepath.Base(p))
			}
		}
	}
}

// agentThrough sends the agent's signed request through the gateway.
func agentThrough(t *testing.T, gwAddr string, agent *identity.Identity) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", "http://"+gwAddr+"/proxy/weather/forecast", nil)
	if err := agent.Sign(req, identity.SignOptions{}); err != nil {
		t.Fatal(err)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(body)
}

// postgresSchema is a fresh schema in IDN_TEST_POSTGRES_URL, dropped at
// cleanup, and the URL that uses it; without the variable the test is
// skipped (failed when CI=true).
func postgresSchema(t *testing.T) (url, schema string) {
	t.Helper()
	base := os.Getenv("IDN_TEST_POSTGRES_URL")
	if base == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("IDN_TEST_POSTGRES_URL is unset but CI=true")
		}
		t.Skip("PostgreSQL run skipped: IDN_TEST_POSTGRES_URL is unset")
	}
	var b [6]byte
	rand.Read(b[:])
	schema = "e2e_" + hex.EncodeToString(b[:])
	db, err := sql.Open("pgx", base)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`CREATE SCHEMA ` + schema); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Exec(`DROP SCHEMA ` + schema + ` CASCADE`); db.Close() })
	sep := "?"
	if strings.Contains(base, "?") {
		sep = "&"
	}
	return base + sep + "search_path=" + schema, schema
}

// pgDump is pg_dump of schema with its data; empty (logged) without
// pg_dump.
func pgDump(t *testing.T, schema string) []byte {
	t.Helper()
	if _, err := exec.LookPath("pg_dump"); err != nil {
		t.Log("pg_dump not installed: the database is not dumped")
		return nil
	}
	out, err := exec.Command("pg_dump", "--schema="+schema, os.Getenv("IDN_TEST_POSTGRES_URL")).Output()
	if err != nil {
		t.Fatalf("pg_dump: %v", err)
	}
	if !bytes.Contains(out, []byte("gateway_pairings")) {
		t.Fatalf("pg_dump of %s holds no gateway tables", schema)
	}
	return out
}

// newUpstream is an API that answers only with one of the bearer tokens.
func newUpstream(t *testing.T, tokens ...string) string {
	t.Helper()
	ln := freePort(t)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !slices.Contains(tokens, strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")) {
			http.Error(w, "no token", http.StatusUnauthorized)
			return
		}
		fmt.Fprintln(w, `{"forecast":"sunny"}`)
	}), ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String()
}
