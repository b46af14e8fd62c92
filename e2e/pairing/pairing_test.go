// Package pairing_test pairs a gateway (package pairing, a vault and its
// admin API) with a real control plane on SQLite and PostgreSQL: sealed
// secrets, RPCs, a control plane that crashes and comes back, unpairing.
// It lives in the e2e module, not beside package pairing, so that the
// module a gateway user imports does not require the control plane's
// database drivers; pairing's own tests drive fake control planes.
package pairing_test

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
	"errors"
	"fmt"
	"github.com/idnhq/idn/errcode"
	"github.com/idnhq/idn/gateway"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idnhq/idn/controlplane"
	"github.com/idnhq/idn/credvault"
	"github.com/idnhq/idn/kit/openapicheck"
	"github.com/idnhq/idn/kit/testlog"
	"github.com/idnhq/idn/pairing"
	"github.com/idnhq/idn/pairing/pairwire"
)

const seedToken = "pairing-test-seed-token"

// postgresSchema makes a fresh schema in IDN_TEST_POSTGRES_URL, dropped
// at cleanup, and returns the URL that uses it. Without the variable the
// test is skipped (failed when CI=true).
func postgresSchema(t *testing.T) (string, string) {
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
	schema := "pair_" + hex.EncodeToString(b[:])
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

// pgDump is pg_dump of the test schema (data included), or nothing when
// pg_dump is not installed.
func (cp *controlPlane) pgDump() []byte {
	cp.t.Helper()
	if _, err := exec.LookPath("pg_dump"); err != nil {
		cp.t.Log("pg_dump not installed: the database is not dumped")
		return nil
	}
	out, err := exec.Command("pg_dump", "--schema="+cp.pgSchema, os.Getenv("IDN_TEST_POSTGRES_URL")).Output()
	if err != nil {
		cp.t.Fatalf("pg_dump: %v", err)
	}
	if !bytes.Contains(out, []byte("gateway_pairings")) {
		cp.t.Fatalf("pg_dump of %s holds no gateway tables", cp.pgSchema)
	}
	return out
}

// controlPlane is a control plane on a fixed address that can die (every
// connection cut, as a crashed process leaves them) and come back on the
// same address and database.
type controlPlane struct {
	t        *testing.T
	addr     string
	store    *controlplane.Store
	dbDir    string // SQLite: the database's folder
	pgURL    string // PostgreSQL: the database, with its test schema as search_path
	pgSchema string
	logs     *testlog.Buffer
	srv      *http.Server
	mu       sync.Mutex
	conns    map[net.Conn]bool
}

func startControlPlane(t *testing.T, engine string) *controlPlane {
	t.Helper()
	cp := &controlPlane{t: t, dbDir: t.TempDir(), logs: &testlog.Buffer{}}
	cfg := controlplane.StoreConfig{SQLitePath: filepath.Join(cp.dbDir, "cp.db")}
	if engine == controlplane.ProviderPostgres {
		cp.pgURL, cp.pgSchema = postgresSchema(t)
		cfg = controlplane.StoreConfig{Provider: controlplane.ProviderPostgres, DatabaseURL: cp.pgURL}
	}
	st, err := controlplane.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	cp.store = st
	cp.start("127.0.0.1:0")
	t.Cleanup(cp.crash)
	return cp
}

func (cp *controlPlane) start(addr string) {
	cp.t.Helper()
	var ln net.Listener
	var err error
	for range 100 { // the crashed instance's port may take a moment to free
		if ln, err = net.Listen("tcp", addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		cp.t.Fatal(err)
	}
	cp.addr = ln.Addr().String()
	logger := slog.New(slog.NewTextHandler(cp.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	srv, err := controlplane.New(controlplane.Config{Store: cp.store, JWTSecret: bytes.Repeat([]byte("j"), 32),
		TestSeedToken: seedToken, Logger: logger, AccessLog: logger})
	if err != nil {
		cp.t.Fatal(err)
	}
	cp.mu.Lock()
	cp.conns = map[net.Conn]bool{}
	cp.mu.Unlock()
	cp.srv = &http.Server{Handler: openapicheck.Watch(cp.t, srv), ConnState: func(c net.Conn, s http.ConnState) {
		cp.mu.Lock()
		defer cp.mu.Unlock()
		if s == http.StateClosed {
			delete(cp.conns, c)
		} else {
			cp.conns[c] = true
		}
	}}
	go cp.srv.Serve(ln)
}

// crash stops serving and cuts every connection, sockets included.
func (cp *controlPlane) crash() {
	cp.srv.Close()
	cp.mu.Lock()
	defer cp.mu.Unlock()
	for c := range cp.conns {
		c.Close()
	}
}

func (cp *controlPlane) url() string { return "http://" + cp.addr }

// call sends a JSON request as the owner of tok (or with the seed token).
func (cp *controlPlane) call(method, path, tok string, body any) (int, []byte) {
	cp.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, cp.url()+path, rd)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-IDN-Test-Seed-Token", seedToken)
	if tok != "" {
		req.AddCookie(&http.Cookie{Name: controlplane.SessionCookie, Value: tok})
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		cp.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, b
}

func (cp *controlPlane) owner(ns string) string {
	cp.t.Helper()
	_, b := cp.call("POST", "/v1/test/seed", "", map[string]any{"namespaces": []string{ns}})
	var s struct{ Sessions map[string]string }
	json.Unmarshal(b, &s)
	return s.Sessions[ns]
}

func (cp *controlPlane) startPairing(tok string) (session, code string) {
	cp.t.Helper()
	status, b := cp.call("POST", "/v1/gateways/pairings", tok, nil)
	var p struct {
		SessionID string `json:"session_id"`
		PairCode  string `json:"pair_code"`
	}
	if json.Unmarshal(b, &p); status != http.StatusCreated {
		cp.t.Fatalf("pairing: %d %s", status, b)
	}
	return p.SessionID, p.PairCode
}

type gatewayInfo struct {
	ID          string `json:"id"`
	Online      bool   `json:"online"`
	HPKEKey     string `json:"hpke_public_key"`
	Fingerprint string `json:"hpke_key_fingerprint"`
}

// waitOnline waits until the owner's only gateway is listed online.
func (cp *controlPlane) waitOnline(tok string) gatewayInfo {
	cp.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, b := cp.call("GET", "/v1/gateways", tok, nil)
		var list struct{ Gateways []gatewayInfo }
		json.Unmarshal(b, &list)
		if len(list.Gateways) == 1 && list.Gateways[0].Online {
			return list.Gateways[0]
		}
		if time.Now().After(deadline) {
			cp.t.Fatalf("no gateway online: %s", b)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// rpc calls a method on the gateway and returns its result or error.
func (cp *controlPlane) rpc(tok, gw, method string, params any) (json.RawMessage, map[string]any) {
	cp.t.Helper()
	status, b := cp.call("POST", "/v1/gateways/"+gw+"/rpc", tok, map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	if status != http.StatusOK {
		cp.t.Fatalf("%s: %d %s", method, status, b)
	}
	var res struct {
		Result json.RawMessage
		Error  map[string]any
	}
	if err := json.Unmarshal(b, &res); err != nil {
		cp.t.Fatal(err)
	}
	return res.Result, res.Error
}

// seal seals secrets to the gateway as the dashboard does.
func seal(t *testing.T, gw gatewayInfo, secrets map[string]string) string {
	t.Helper()
	raw, _ := base64.RawURLEncoding.DecodeString(gw.HPKEKey)
	pk, err := hpke.DHKEM(ecdh.X25519()).NewPublicKey(raw)
	if err != nil {
		t.Fatal(err)
	}
	plain, _ := json.Marshal(secrets)
	ct, err := hpke.Seal(pk, hpke.HKDFSHA256(), hpke.AES256GCM(), pairwire.Info(gw.ID), plain)
	if err != nil {
		t.Fatal(err)
	}
	return base64.RawURLEncoding.EncodeToString(ct)
}

// localGateway is the gateway side: a gateway as gateway.New makes it,
// its admin API's GuardCheck included, and the pairing client on it.
type localGateway struct {
	dir    string
	vault  *credvault.Vault
	client *pairing.Client
	done   chan error
	cancel context.CancelFunc
}

func newLocalGateway(t *testing.T, registry string) *localGateway {
	t.Helper()
	g := &localGateway{dir: t.TempDir()}
	key, _ := credvault.GenerateMasterKey()
	gw, err := gateway.New(gateway.Config{DataDir: g.dir, MasterKey: key, ControlPlaneURL: registry})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gw.Close() })
	g.vault = gw.Vault()
	g.client, err = pairing.New(pairing.Config{ControlPlaneURL: registry, Identity: gw.Identity(), Admin: gw.Admin(), DataDir: g.dir,
		MasterKey: key, Name: "laptop", Version: "0.9.0", MaxBackoff: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func (g *localGateway) run(p *pairing.Pairing) {
	ctx, cancel := context.WithCancel(context.Background())
	g.cancel, g.done = cancel, make(chan error, 1)
	go func() { g.done <- g.client.Run(ctx, p) }()
}

func TestPairedGatewayEndToEnd(t *testing.T) {
	for _, engine := range []string{controlplane.ProviderSQLite, controlplane.ProviderPostgres} {
		t.Run(engine, func(t *testing.T) { pairedGatewayEndToEnd(t, engine) })
	}
}

func pairedGatewayEndToEnd(t *testing.T, engine string) {
	const secret = "sk-live-9f8e7d6c5b4a"
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+secret {
			http.Error(w, "no", http.StatusUnauthorized)
		}
	}))
	defer upstream.Close()
	cp := startControlPlane(t, engine)
	tok := cp.owner("alice")
	// The gateway checks that a connection's service is the owner's.
	if status, b := cp.call("POST", "/v1/services", tok, map[string]any{"name": "Weather", "service_endpoint": upstream.URL}); status != http.StatusCreated {
		t.Fatalf("create the service: %d %s", status, b)
	}
	session, code := cp.startPairing(tok)
	g := newLocalGateway(t, cp.url())
	g.run(&pairing.Pairing{SessionID: session, Code: code, Namespace: "alice"})
	gw := cp.waitOnline(tok)
	if gw.Fingerprint != g.client.Fingerprint() {
		t.Fatalf("fingerprint %s, gateway says %s", gw.Fingerprint, g.client.Fingerprint())
	}
	if st, ok := g.client.State(); !ok || st.GatewayID != gw.ID || st.Namespace != "alice" {
		t.Fatalf("state %+v", st)
	}
	if st, paired, fp, err := pairing.Status(g.dir); err != nil || !paired || fp != gw.Fingerprint || st.GatewayID != gw.ID {
		t.Fatalf("Status = %+v %v %s %v", st, paired, fp, err)
	}

	res, e := cp.rpc(tok, gw.ID, "connections.create", map[string]any{"id": "weather", "name": "Weather", "base_url": upstream.URL,
		"auth_mode": "bearer", "auth_secret_key": "token", "sealed_secrets": seal(t, gw, map[string]string{"token": secret})})
	if e != nil || !strings.Contains(string(res), `"credential_keys":["token"]`) {
		t.Fatalf("create: %s %v", res, e)
	}
	res, e = cp.rpc(tok, gw.ID, "connections.test", map[string]any{"id": "weather"})
	if e != nil || !strings.Contains(string(res), `"ok":true`) {
		t.Fatalf("test with the sealed secret: %s %v", res, e)
	}
	if _, e = cp.rpc(tok, gw.ID, "variables.set", map[string]any{"key": "SPARE", "sealed_secrets": seal(t, gw, map[string]string{"SPARE": secret + "-2"})}); e != nil {
		t.Fatalf("variables.set: %v", e)
	}
	res, _ = cp.rpc(tok, gw.ID, "variables.list", nil)
	if !strings.Contains(string(res), `"SPARE"`) {
		t.Fatalf("variables.list: %s", res)
	}
	// The owner may change where the secret goes (the admin API asks a
	// local caller for the admin token; pairing calls carry the owner's).
	if _, e = cp.rpc(tok, gw.ID, "connections.update", map[string]any{"id": "weather", "name": "Weather API", "base_url": upstream.URL + "/"}); e != nil {
		t.Fatalf("update: %v", e)
	}
	if _, e = cp.rpc(tok, gw.ID, "connections.rotate", map[string]any{"id": "weather", "reason": "drill",
		"sealed_secrets": seal(t, gw, map[string]string{"token": secret})}); e != nil {
		t.Fatalf("rotate: %v", e)
	}

	t.Run("plaintext secret refused", func(t *testing.T) {
		for _, c := range []struct {
			method string
			params map[string]any
		}{
			{"connections.create", map[string]any{"id": "x", "base_url": upstream.URL, "secrets": map[string]string{"token": "plain"}}},
			{"connections.rotate", map[string]any{"id": "weather", "secrets": map[string]string{"token": "plain"}}},
			{"connections.update", map[string]any{"id": "weather", "secrets": map[string]string{"token": "plain"}}},
			{"variables.set", map[string]any{"key": "K", "value": "plain"}},
		} {
			_, e := cp.rpc(tok, gw.ID, c.method, c.params)
			if e == nil || e["code"] != float64(pairwire.CodeInvalidParams) || fmt.Sprint(e["data"]) != "map[code:PLAINTEXT_SECRET_REFUSED]" {
				t.Errorf("%s with a plaintext secret: %v", c.method, e)
			}
		}
	})
	t.Run("sealed for another gateway", func(t *testing.T) {
		other := gw
		other.ID = "gw_someone_else"
		_, e := cp.rpc(tok, gw.ID, "variables.set", map[string]any{"key": "K", "sealed_secrets": seal(t, other, map[string]string{"K": "v"})})
		if e == nil || e["code"] != float64(pairwire.CodeInvalidParams) {
			t.Fatalf("secret sealed with another gateway's info opened: %v", e)
		}
	})
	t.Run("admin errors", func(t *testing.T) {
		_, e := cp.rpc(tok, gw.ID, "connections.get", map[string]any{"id": "nope"})
		data, _ := e["data"].(map[string]any)
		if e == nil || e["code"] != float64(pairwire.CodeAPIError) || data["code"] != "CONNECTION_NOT_FOUND" || data["status"] != float64(404) {
			t.Fatalf("unknown connection: %v", e)
		}
	})

	// The control plane dies with the socket open and comes back on the
	// same address: the gateway reconnects by itself.
	cp.crash()
	cp.start(cp.addr)
	cp.waitOnline(tok)
	if res, e := cp.rpc(tok, gw.ID, "connections.get", map[string]any{"id": "weather"}); e != nil || !strings.Contains(string(res), "Weather API") {
		t.Fatalf("after restart: %s %v", res, e)
	}

	// Nothing on the control plane's side ever held the secret.
	db, _ := os.ReadFile(filepath.Join(cp.dbDir, "cp.db"))
	wal, _ := os.ReadFile(filepath.Join(cp.dbDir, "cp.db-wal"))
	stored := map[string][]byte{"database": db, "WAL": wal, "logs": []byte(cp.logs.String())}
	if cp.pgURL != "" {
		stored["PostgreSQL dump"] = cp.pgDump()
	}
	for name, b := range stored {
		if bytes.Contains(b, []byte(secret)) {
			t.Errorf("the secret appears in the control plane's %s", name)
		}
	}

	// Unpairing ends Run with ErrUnpaired, and a reconnect is refused.
	if status, b := cp.call("DELETE", "/v1/gateways/"+gw.ID, tok, nil); status != http.StatusNoContent {
		t.Fatalf("unpair: %d %s", status, b)
	}
	select {
	case err := <-g.done:
		if !errors.Is(err, pairing.ErrUnpaired) {
			t.Fatalf("Run after unpair: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run still running after unpair")
	}
	// The pairing state is gone: the gateway reads as unpaired, so it no
	// longer counts on its pairing in place of service API keys.
	if _, ok := g.client.State(); ok {
		t.Fatal("the client still holds a pairing after the unpairing")
	}
	if _, paired, _, _ := pairing.Status(g.dir); paired {
		t.Fatal("pairing.json still names a pairing after the unpairing")
	}
	g.run(nil)
	if err := <-g.done; !errors.Is(err, pairing.ErrUnpaired) {
		t.Fatalf("unpaired key reconnecting: %v", err)
	}
}

func TestPairingRefused(t *testing.T) {
	cp := startControlPlane(t, controlplane.ProviderSQLite)
	tok := cp.owner("alice")
	session, code := cp.startPairing(tok)
	g := newLocalGateway(t, cp.url())
	g.run(&pairing.Pairing{SessionID: session, Code: "00000000", Namespace: "alice"})
	var refused *pairing.RefusedError
	if err := <-g.done; !errors.As(err, &refused) || refused.Code != errcode.PairingCodeInvalid {
		t.Fatalf("wrong code: %v", err)
	}
	g.run(&pairing.Pairing{SessionID: session, Code: code, Namespace: "bob"})
	if err := <-g.done; !errors.As(err, &refused) || refused.Code != errcode.PairingCodeInvalid {
		t.Fatalf("code for another namespace: %v", err)
	}
	if _, ok := g.client.State(); ok {
		t.Fatal("a refused pairing left a state")
	}
	g.run(nil)
	if err := <-g.done; !errors.Is(err, pairing.ErrUnpaired) {
		t.Fatalf("Run without pairing: %v", err)
	}
}
