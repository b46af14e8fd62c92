package controlplane

import (
	"bytes"
	"context"
	"crypto/ecdh"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/idnhq/idn/controlplane/internal/gatewaylink"
	"github.com/idnhq/idn/identity"
	"github.com/idnhq/idn/pairing/pairwire"
)

// The wire shapes of the gateway routes, as a client reads them.
type (
	// rpcRequest is a JSON-RPC 2.0 request.
	rpcRequest struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Method  string          `json:"method"`
		Params  json.RawMessage `json:"params,omitempty"`
	}
	pairingResponse struct {
		SessionID string `json:"session_id"`
		PairCode  string `json:"pair_code"`
		ExpiresAt string `json:"expires_at"`
	}
	gatewayJSON struct {
		ID          string `json:"id"`
		Name        string `json:"name"`
		Version     string `json:"version"`
		Online      bool   `json:"online"`
		LastSeen    string `json:"last_seen,omitempty"`
		CreatedAt   string `json:"created_at"`
		HPKEKey     string `json:"hpke_public_key"`
		Fingerprint string `json:"hpke_key_fingerprint"`
	}
)

// pairingCode is a pairing code as the API hands it out: 8 characters of
// Crockford's base32.
var pairingCode = regexp.MustCompile(`^[0-9A-HJKMNP-TV-Z]{8}$`)

// testGateway is a gateway as the control plane sees it: a signing
// identity, an HPKE key and a socket that answers RPCs with answer.
type testGateway struct {
	t      testing.TB
	id     *identity.Identity
	hpke   *ecdh.PrivateKey
	conn   *websocket.Conn
	ready  pairwire.Control
	served atomic.Int64
	closed chan error // the reader's end
	answer atomic.Pointer[func(req rpcRequest) any]
}

func newTestGateway(t testing.TB) *testGateway {
	t.Helper()
	k, err := ecdh.X25519().GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	g := &testGateway{t: t, id: newAgent(t, "gw-host"), hpke: k}
	g.answerWith(func(req rpcRequest) any { return map[string]any{"method": req.Method, "params": req.Params} })
	return g
}

func (g *testGateway) answerWith(f func(req rpcRequest) any) { g.answer.Store(&f) }

func (g *testGateway) hpkeKey() string {
	return base64.RawURLEncoding.EncodeToString(g.hpke.PublicKey().Bytes())
}

// dial opens the socket with a signed upgrade (naming pairing when not "").
func (g *testGateway) dial(base, pairing string) (*websocket.Conn, *http.Response, error) {
	u := "ws" + strings.TrimPrefix(base, "http") + pairwire.Path
	if pairing != "" {
		u += "?" + pairwire.PairingQuery + "=" + pairing
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return websocket.Dial(ctx, u, &websocket.DialOptions{
		HTTPClient: &http.Client{Transport: g.id.Transport(nil, identity.SignOptions{})},
	})
}

// connect pairs (when s is not nil) or reconnects, reads the first control
// message and, when it is "ready", serves RPCs in the background.
func (g *testGateway) connect(base string, p *pairwire.Pair) (pairwire.Control, error) {
	g.t.Helper()
	session := ""
	if p != nil {
		session = p.SessionID
	}
	conn, res, err := g.dial(base, session)
	if err != nil {
		if res != nil {
			var env struct{ Code string }
			json.NewDecoder(res.Body).Decode(&env)
			return pairwire.Control{}, fmt.Errorf("upgrade refused: %d %s", res.StatusCode, env.Code)
		}
		return pairwire.Control{}, err
	}
	conn.SetReadLimit(pairwire.ReadLimit)
	ctx := context.Background()
	if p != nil {
		b, _ := json.Marshal(p)
		if err := conn.Write(ctx, websocket.MessageText, b); err != nil {
			return pairwire.Control{}, err
		}
	}
	var c pairwire.Control
	_, data, err := conn.Read(ctx)
	if err != nil {
		return c, err
	}
	if err := json.Unmarshal(data, &c); err != nil {
		g.t.Fatalf("first message %s: %v", data, err)
	}
	if c.Type != pairwire.ControlReady {
		conn.CloseNow()
		return c, nil
	}
	g.conn, g.ready, g.closed = conn, c, make(chan error, 1)
	go g.serve(conn, g.closed)
	return c, nil
}

func (g *testGateway) serve(conn *websocket.Conn, closed chan error) {
	for {
		_, data, err := conn.Read(context.Background())
		if err != nil {
			closed <- err
			return
		}
		var req rpcRequest
		if json.Unmarshal(data, &req) != nil {
			continue
		}
		g.served.Add(1)
		result := (*g.answer.Load())(req)
		if result == nil {
			continue // never answers
		}
		answer := map[string]any{"jsonrpc": "2.0", "id": req.ID, "result": result}
		if refusal, ok := result.(rpcRefusal); ok {
			answer = map[string]any{"jsonrpc": "2.0", "id": req.ID, "error": refusal}
		}
		b, _ := json.Marshal(answer)
		conn.Write(context.Background(), websocket.MessageText, b)
	}
}

// waitClosed returns the close status the gateway's socket ended with.
func (g *testGateway) waitClosed(t *testing.T) websocket.StatusCode {
	t.Helper()
	select {
	case err := <-g.closed:
		return websocket.CloseStatus(err)
	case <-time.After(10 * time.Second):
		t.Fatal("socket still open")
		return 0
	}
}

func (g *testGateway) pairing(session, code string) *pairwire.Pair {
	return &pairwire.Pair{SessionID: session, PairCode: code, Name: "laptop", Version: "1.2.3", HPKEPublicKey: g.hpkeKey()}
}

// startPairing starts a pairing session as the owner of tok.
func (e *env) startPairing(tok string) (session, code string) {
	e.t.Helper()
	var p pairingResponse
	r := e.do("POST", "/v1/gateways/pairings", nil, withSession(tok)).want(e.t, http.StatusCreated, "")
	if err := json.Unmarshal(r.body, &p); err != nil {
		e.t.Fatal(err)
	}
	if !pairingCode.MatchString(p.PairCode) || !strings.HasPrefix(p.SessionID, "gps_") {
		e.t.Fatalf("pairing answer %s", r.body)
	}
	return p.SessionID, p.PairCode
}

// pairedGateway pairs a fresh test gateway to the owner of tok.
func (e *env) pairedGateway(tok string) *testGateway {
	e.t.Helper()
	g := newTestGateway(e.t)
	s, c := e.startPairing(tok)
	ready, err := g.connect(e.ts.URL, g.pairing(s, c))
	if err != nil || ready.Type != pairwire.ControlReady || !strings.HasPrefix(ready.GatewayID, "gw_") {
		e.t.Fatalf("pairing: %+v, %v", ready, err)
	}
	e.t.Cleanup(func() { g.conn.CloseNow() })
	return g
}

func rpcBody(method string, params any) map[string]any {
	return map[string]any{"jsonrpc": "2.0", "id": 7, "method": method, "params": params}
}

func TestGatewayPairing(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *env) {
		tok := e.seed(map[string]any{"namespaces": []string{"alice"}}).Sessions["alice"]
		g := e.pairedGateway(tok)
		if g.ready.Namespace != "alice" {
			t.Fatalf("ready = %+v", g.ready)
		}

		var list struct {
			Gateways []gatewayJSON `json:"gateways"`
		}
		json.Unmarshal(e.do("GET", "/v1/gateways", nil, withSession(tok)).want(t, 200, "").body, &list)
		if len(list.Gateways) != 1 {
			t.Fatalf("gateways = %+v", list)
		}
		gw := list.Gateways[0]
		if gw.ID != g.ready.GatewayID || !gw.Online || gw.Name != "laptop" || gw.Version != "1.2.3" || gw.LastSeen == "" ||
			gw.HPKEKey != g.hpkeKey() || gw.Fingerprint != pairwire.Fingerprint(g.hpke.PublicKey().Bytes()) || len(gw.Fingerprint) != 16 {
			t.Fatalf("gateway = %+v", gw)
		}

		r := e.do("POST", "/v1/gateways/"+gw.ID+"/rpc", map[string]any{"jsonrpc": "2.0", "id": "abc", "method": "variables.list"},
			withSession(tok)).want(t, 200, "")
		var answer struct {
			JSONRPC string
			ID      string
			Result  struct{ Method string }
		}
		if json.Unmarshal(r.body, &answer); answer.ID != "abc" || answer.JSONRPC != "2.0" || answer.Result.Method != "variables.list" {
			t.Fatalf("rpc answer %s", r.body)
		}

		// The signed upgrade alone reconnects a paired gateway.
		g.conn.Close(websocket.StatusNormalClosure, "")
		g.waitClosed(t)
		if ready, err := g.connect(e.ts.URL, nil); err != nil || ready.GatewayID != gw.ID {
			t.Fatalf("reconnect: %+v, %v", ready, err)
		}
		e.do("POST", "/v1/gateways/"+gw.ID+"/rpc", rpcBody("connections.list", nil), withSession(tok)).want(t, 200, "")

		// Unpairing closes the socket and refuses the key from then on.
		e.do("DELETE", "/v1/gateways/"+gw.ID, nil, withSession(tok)).want(t, http.StatusNoContent, "")
		if code := g.waitClosed(t); code != pairwire.CloseUnpaired {
			t.Fatalf("close status after unpair = %d", code)
		}
		if _, err := g.connect(e.ts.URL, nil); err == nil || !strings.Contains(err.Error(), "403") {
			t.Fatalf("unpaired key reconnecting: %v", err)
		}
		e.do("GET", "/v1/gateways", nil, withSession(tok)).want(t, 200, "")
		e.do("DELETE", "/v1/gateways/"+gw.ID, nil, withSession(tok)).want(t, http.StatusNotFound, "GATEWAY_NOT_FOUND")
	})
}

func TestPairingAttacks(t *testing.T) {
	e := newEnv(t, openStore(t, storeConfig(t, ProviderSQLite)), func(c *Config) {
		c.Gateways.RPCTimeout = 300 * time.Millisecond
		c.SignatureMaxAge = time.Hour // the expiry row moves the server's clock
	})
	s := e.seed(map[string]any{"namespaces": []string{"alice", "mallory"}})
	tok, other := s.Sessions["alice"], s.Sessions["mallory"]
	// refused checks a pairing's refusal: on the socket (a wrong code,
	// once the session was known to be open) or as the upgrade's answer
	// (a session that cannot complete gets no socket at all).
	refused := func(t *testing.T, g *testGateway, p *pairwire.Pair, code string) {
		t.Helper()
		c, err := g.connect(e.ts.URL, p)
		if err != nil && strings.HasSuffix(err.Error(), " "+code) && strings.HasPrefix(err.Error(), "upgrade refused") {
			return
		}
		if err != nil || c.Type != pairwire.ControlError || c.Code != code {
			t.Fatalf("pairing answered %+v, %v; want %s", c, err, code)
		}
	}

	t.Run("wrong code", func(t *testing.T) {
		session, code := e.startPairing(tok)
		g := newTestGateway(t)
		wrong := "ZZZZZZZZ"
		if code == wrong {
			wrong = "YYYYYYYY"
		}
		refused(t, g, g.pairing(session, wrong), "PAIRING_CODE_INVALID")
		// The right code still works after one mistake, and only once.
		if c, err := g.connect(e.ts.URL, g.pairing(session, strings.ToLower(code[:4])+"-"+code[4:])); err != nil || c.Type != pairwire.ControlReady {
			t.Fatalf("right code after a wrong one: %+v, %v", c, err)
		}
		g.conn.CloseNow()
		refused(t, newTestGateway(t), g.pairing(session, code), "PAIRING_ENDED")
	})
	t.Run("sixth attempt", func(t *testing.T) {
		session, code := e.startPairing(tok)
		g := newTestGateway(t)
		for range gatewaylink.MaxPairingFailures {
			refused(t, g, g.pairing(session, "00000000"), "PAIRING_CODE_INVALID")
		}
		refused(t, g, g.pairing(session, code), "PAIRING_ENDED")
	})
	t.Run("code of another namespace", func(t *testing.T) {
		session, code := e.startPairing(tok)
		g := newTestGateway(t)
		p := g.pairing(session, code)
		p.Namespace = "mallory"
		refused(t, g, p, "PAIRING_CODE_INVALID")
	})
	t.Run("unknown session", func(t *testing.T) {
		g := newTestGateway(t)
		refused(t, g, g.pairing("gps_00000000000000000000000000000000", "ABCDEFGH"), "PAIRING_CODE_INVALID")
	})
	t.Run("expired session", func(t *testing.T) {
		session, code := e.startPairing(tok)
		e.offset.Store(int64(gatewaylink.PairingTTL + time.Second))
		defer e.offset.Store(0)
		g := newTestGateway(t)
		refused(t, g, g.pairing(session, code), "PAIRING_EXPIRED")
	})
	t.Run("bad hpke key", func(t *testing.T) {
		session, code := e.startPairing(tok)
		g := newTestGateway(t)
		p := g.pairing(session, code)
		p.HPKEPublicKey = "AAAA"
		refused(t, g, p, "VALIDATION_ERROR")
	})
	t.Run("replayed signed upgrade", func(t *testing.T) {
		g := e.pairedGateway(tok)
		req, _ := http.NewRequest("GET", e.ts.URL+pairwire.Path, nil)
		if err := g.id.Sign(req, identity.SignOptions{}); err != nil {
			t.Fatal(err)
		}
		u := "ws" + strings.TrimPrefix(e.ts.URL, "http") + pairwire.Path
		first, _, err := websocket.Dial(context.Background(), u, &websocket.DialOptions{HTTPHeader: req.Header})
		if err != nil {
			t.Fatalf("first use of the signed upgrade: %v", err)
		}
		first.CloseNow()
		_, res, err := websocket.Dial(context.Background(), u, &websocket.DialOptions{HTTPHeader: req.Header})
		if err == nil || res == nil || res.StatusCode != http.StatusForbidden {
			t.Fatalf("replayed upgrade: %v %v", res, err)
		}
	})
	t.Run("unsigned upgrade", func(t *testing.T) {
		u := "ws" + strings.TrimPrefix(e.ts.URL, "http") + pairwire.Path
		_, res, err := websocket.Dial(context.Background(), u, nil)
		if err == nil || res == nil || res.StatusCode != http.StatusForbidden {
			t.Fatalf("unsigned upgrade: %v %v", res, err)
		}
	})
	t.Run("unpaired key reconnecting", func(t *testing.T) {
		g := newTestGateway(t)
		if _, err := g.connect(e.ts.URL, nil); err == nil || !strings.Contains(err.Error(), "403") {
			t.Fatalf("unknown key without pairing: %v", err)
		}
	})

	g := e.pairedGateway(tok)
	rpc := "/v1/gateways/" + g.ready.GatewayID + "/rpc"
	t.Run("other owner", func(t *testing.T) {
		e.do("POST", rpc, rpcBody("connections.list", nil), withSession(other)).want(t, http.StatusNotFound, "GATEWAY_NOT_FOUND")
		e.do("DELETE", "/v1/gateways/"+g.ready.GatewayID, nil, withSession(other)).want(t, http.StatusNotFound, "GATEWAY_NOT_FOUND")
		e.do("POST", rpc, rpcBody("connections.list", nil)).want(t, http.StatusUnauthorized, "ADMIN_UNAUTHORIZED")
	})
	t.Run("malformed and oversized", func(t *testing.T) {
		bad := []struct {
			name string
			body any
		}{
			{"not json-rpc 2.0", map[string]any{"jsonrpc": "1.0", "id": 1, "method": "connections.list"}},
			{"no id", map[string]any{"jsonrpc": "2.0", "method": "connections.list"}},
			{"object id", map[string]any{"jsonrpc": "2.0", "id": map[string]int{"a": 1}, "method": "connections.list"}},
			{"unknown method", rpcBody("system.exec", nil)},
		}
		for _, b := range bad {
			e.do("POST", rpc, b.body, withSession(tok)).want(t, http.StatusBadRequest, "VALIDATION_ERROR")
		}
		req, _ := http.NewRequest("POST", e.ts.URL+rpc, strings.NewReader(`{"jsonrpc":"2.0",`))
		req.Header.Set("Content-Type", "application/json")
		withSession(tok)(req)
		e.send(req).want(t, http.StatusBadRequest, "VALIDATION_ERROR")
		huge := rpcBody("variables.set", map[string]string{"key": "K", "sealed_secrets": strings.Repeat("A", 2<<20)})
		e.do("POST", rpc, huge, withSession(tok)).want(t, http.StatusRequestEntityTooLarge, "REQUEST_BODY_TOO_LARGE")
		// The socket is still up.
		e.do("POST", rpc, rpcBody("connections.list", nil), withSession(tok)).want(t, 200, "")
	})
	t.Run("gateway never answers", func(t *testing.T) {
		g.answerWith(func(rpcRequest) any { return nil })
		defer g.answerWith(func(req rpcRequest) any { return req.Method })
		start := time.Now()
		e.do("POST", rpc, rpcBody("connections.test", map[string]string{"id": "x"}), withSession(tok)).want(t, http.StatusGatewayTimeout, "GATEWAY_TIMEOUT")
		if d := time.Since(start); d < 300*time.Millisecond || d > 5*time.Second {
			t.Fatalf("timed out after %v", d)
		}
	})
	t.Run("gateway offline", func(t *testing.T) {
		g.conn.Close(websocket.StatusNormalClosure, "")
		g.waitClosed(t)
		eventuallyOffline(t, e, tok, g.ready.GatewayID)
		e.do("POST", rpc, rpcBody("connections.list", nil), withSession(tok)).want(t, http.StatusConflict, "GATEWAY_OFFLINE")
	})
}

// eventuallyOffline waits until the gateway is listed offline (the socket
// close reaches the server a moment after the client's).
func eventuallyOffline(t *testing.T, e *env, tok, id string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		var list struct{ Gateways []gatewayJSON }
		json.Unmarshal(e.do("GET", "/v1/gateways", nil, withSession(tok)).body, &list)
		for _, g := range list.Gateways {
			if g.ID == id && !g.Online {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("gateway %s still online", id)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// twoInstances is two control planes sharing one PostgreSQL database, as
// two processes behind a load balancer would; mod, when not nil, changes
// both configurations.
func twoInstances(t *testing.T, mod func(*Config)) (a, b *env) {
	t.Helper()
	cfg := storeConfig(t, ProviderPostgres)
	a = newEnv(t, openStore(t, cfg), mod)
	b = newEnv(t, openStore(t, cfg), mod)
	return a, b
}

func TestGatewayRelayAcrossInstances(t *testing.T) {
	cfg := storeConfig(t, ProviderPostgres)
	a, b := newEnv(t, openStore(t, cfg), nil), newEnv(t, openStore(t, cfg), nil)
	tok := a.seed(map[string]any{"namespaces": []string{"alice"}}).Sessions["alice"]
	// Paired and held through instance B; the owner talks to A.
	g := b.pairedGateway(tok)
	rpc := "/v1/gateways/" + g.ready.GatewayID + "/rpc"
	r := a.do("POST", rpc, rpcBody("connections.get", map[string]string{"id": "gh"}), withSession(tok)).want(t, 200, "")
	if !strings.Contains(string(r.body), `"method":"connections.get"`) || !strings.Contains(string(r.body), `"id":7`) {
		t.Fatalf("answer through B: %s", r.body)
	}

	// Requests and answers larger than a notification travel in relay rows.
	big := strings.Repeat("x", 100_000)
	r = a.do("POST", rpc, rpcBody("variables.set", map[string]string{"key": "K", "sealed_secrets": big}), withSession(tok)).want(t, 200, "")
	if !strings.Contains(string(r.body), big) {
		t.Fatalf("large answer through B lost its body (%d bytes)", len(r.body))
	}
	var rows int
	a.st.db.QueryRowContext(context.Background(), `SELECT COUNT(*) FROM gateway_relay`).Scan(&rows)
	if rows != 0 {
		t.Fatalf("%d relay rows left behind", rows)
	}

	// A gateway that never answers times out on the sender's clock.
	g.answerWith(func(rpcRequest) any { return nil })
	impatient := newEnv(t, openStore(t, cfg), func(c *Config) { c.Gateways.RPCTimeout = 300 * time.Millisecond })
	impatient.do("POST", rpc, rpcBody("connections.list", nil), withSession(tok)).want(t, http.StatusGatewayTimeout, "GATEWAY_TIMEOUT")
	g.answerWith(func(req rpcRequest) any { return req.Method })

	// Unpairing through A closes the socket B holds.
	a.do("DELETE", "/v1/gateways/"+g.ready.GatewayID, nil, withSession(tok)).want(t, http.StatusNoContent, "")
	if code := g.waitClosed(t); code != pairwire.CloseUnpaired {
		t.Fatalf("close status = %d", code)
	}
	a.do("POST", rpc, rpcBody("connections.list", nil), withSession(tok)).want(t, http.StatusNotFound, "GATEWAY_NOT_FOUND")
}

// TestGatewayRestart: a control plane that dies holding a socket leaves
// its gateway listed online until the row is taken over; the gateway's
// reconnect to another instance takes it over at once.
func TestGatewayTakeover(t *testing.T) {
	a, b := twoInstances(t, nil)
	tok := a.seed(map[string]any{"namespaces": []string{"alice"}}).Sessions["alice"]
	g := a.pairedGateway(tok)
	a.srv.Close()
	if code := g.waitClosed(t); code != websocket.StatusGoingAway {
		t.Fatalf("close status on shutdown = %d", code)
	}
	if ready, err := g.connect(b.ts.URL, nil); err != nil || ready.GatewayID != g.ready.GatewayID {
		t.Fatalf("reconnect to B: %+v, %v", ready, err)
	}
	a.do("POST", "/v1/gateways/"+g.ready.GatewayID+"/rpc", rpcBody("connections.list", nil), withSession(tok)).want(t, 200, "")
}

// BenchmarkRelayAcrossInstances measures an owner's RPC into instance A
// answered by a gateway whose socket instance B holds (PostgreSQL
// LISTEN/NOTIFY both ways), over HTTP on loopback, and reports the median
// and the 99th percentile.
func BenchmarkRelayAcrossInstances(b *testing.B) {
	cfg := storeConfig(b, ProviderPostgres)
	var urls [2]string
	for i := range urls {
		srv, err := New(Config{Store: openStore(b, cfg), JWTSecret: testSecret, TestSeedToken: seedToken})
		if err != nil {
			b.Fatal(err)
		}
		ts := httptest.NewServer(srv)
		b.Cleanup(ts.Close)
		urls[i] = ts.URL
	}
	post := func(url string, body any, cookie string) []byte {
		raw, _ := json.Marshal(body)
		req, _ := http.NewRequest("POST", url, bytes.NewReader(raw))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-IDN-Test-Seed-Token", seedToken)
		if cookie != "" {
			req.AddCookie(&http.Cookie{Name: SessionCookie, Value: cookie})
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		defer res.Body.Close()
		out, _ := io.ReadAll(res.Body)
		if res.StatusCode >= 300 {
			b.Fatalf("%s: %d %s", url, res.StatusCode, out)
		}
		return out
	}
	var seeded seeded
	json.Unmarshal(post(urls[0]+"/v1/test/seed", map[string]any{"namespaces": []string{"alice"}}, ""), &seeded)
	tok := seeded.Sessions["alice"]
	var p pairingResponse
	json.Unmarshal(post(urls[0]+"/v1/gateways/pairings", map[string]any{}, tok), &p)
	g := newTestGateway(b)
	ready, err := g.connect(urls[1], g.pairing(p.SessionID, p.PairCode))
	if err != nil || ready.Type != pairwire.ControlReady {
		b.Fatalf("pairing: %+v %v", ready, err)
	}
	defer g.conn.CloseNow()
	rpc := urls[0] + "/v1/gateways/" + ready.GatewayID + "/rpc"
	post(rpc, rpcBody("connections.list", nil), tok) // opens A's LISTEN connection
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		post(rpc, rpcBody("connections.list", nil), tok)
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
}

func TestGatewayPages(t *testing.T) {
	e := newEnv(t, openStore(t, storeConfig(t, ProviderSQLite)), nil)
	s := e.seed(map[string]any{"namespaces": []string{"alice", "mallory"}})
	tok, other := s.Sessions["alice"], s.Sessions["mallory"]
	g := e.pairedGateway(tok)
	fp := pairwire.Fingerprint(g.hpke.PublicKey().Bytes())

	r := e.do("GET", "/gateways", nil, withSession(tok)).want(t, http.StatusOK, "")
	page := string(r.body)
	for _, want := range []string{"laptop", "online", fp, ">Pair gateway</button>", `aria-label="Unpair laptop"`, `href="/gateways" aria-current="page"`, "/gateways.js"} {
		if !strings.Contains(page, want) {
			t.Errorf("/gateways lacks %q", want)
		}
	}
	if csp := r.header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe") {
		t.Errorf("CSP %q", csp)
	}
	r = e.do("GET", "/gateways/"+g.ready.GatewayID, nil, withSession(tok)).want(t, http.StatusOK, "")
	if !strings.Contains(string(r.body), `data-key="`+g.hpkeKey()+`"`) || !strings.Contains(string(r.body), ">Add connection</button>") {
		t.Errorf("gateway page lacks its key or its form")
	}
	e.do("GET", "/gateways/"+g.ready.GatewayID, nil, withSession(other)).want(t, http.StatusNotFound, "")
	if r := e.do("GET", "/gateways", nil); !strings.Contains(string(r.body), `data-page="login"`) {
		t.Errorf("/gateways without a session is not sent to the login page: %d", r.status)
	}
}

// TestAccountDeletionUnpairs: a deleted account's gateways are unpaired,
// and the instance holding a socket closes it as soon as the deletion
// commits, whichever instance served the deletion (a heartbeat is 15 s
// away; the socket must not stay open for it).
func TestAccountDeletionUnpairs(t *testing.T) {
	cfg := storeConfig(t, ProviderPostgres)
	auth := func(c *Config) { c.Auth = AuthConfig{Origins: []string{testOrigin}} }
	a, b := newEnv(t, openStore(t, cfg), auth), newEnv(t, openStore(t, cfg), auth)
	dev := newDevice(t, "EdDSA")
	tok := sessionOf(t, b.signup("alice", dev).want(t, http.StatusCreated, ""))
	g := a.pairedGateway(tok)
	start := time.Now()
	b.do("DELETE", "/v1/auth/account", nil, withSession(tok), fromBrowser).want(t, http.StatusOK, "")
	if code := g.waitClosed(t); code != pairwire.CloseUnpaired {
		t.Fatalf("close status = %d", code)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("socket closed %v after the deletion: at a heartbeat, not at the commit", d)
	}
	if _, err := g.connect(a.ts.URL, nil); err == nil || !strings.Contains(err.Error(), "403") {
		t.Fatalf("reconnect after account deletion: %v", err)
	}
}
