package pairing_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/idnhq/idn/admin"
	"github.com/idnhq/idn/credvault"
	"github.com/idnhq/idn/identity"
	"github.com/idnhq/idn/pairing"
	"github.com/idnhq/idn/pairing/pairwire"
	"github.com/idnhq/idn/upstreamauth"
)

// localGateway is the gateway side: a vault and its admin API, and the
// pairing client.
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
	ctx := context.Background()
	var err error
	if g.vault, err = credvault.New(ctx, credvault.Config{Store: &credvault.MemoryStore{}, MasterKey: key, PollInterval: -1}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.vault.Close() })
	// No GuardCheck and no InsecureUnguardedChecks: the guard keeps the
	// HTTP routes, and the owner's RPCs test and discover without it.
	access, _ := admin.NewAccess(admin.AccessConfig{AccessOptions: admin.AccessOptions{Mode: admin.AccessLoopback}})
	h, err := admin.New(admin.Config{Vault: g.vault, Access: access})
	if err != nil {
		t.Fatal(err)
	}
	id, _ := identity.New("gw-host")
	g.client, err = pairing.New(pairing.Config{ControlPlaneURL: registry, Identity: id, Admin: h, DataDir: g.dir, MasterKey: key,
		Name: "laptop", Version: "0.9.0", MaxBackoff: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// connector makes g's client run the connect flow's RPCs on c.
func (g *localGateway) connector(t *testing.T, registry string, c *admin.Connector) {
	t.Helper()
	access, _ := admin.NewAccess(admin.AccessConfig{AccessOptions: admin.AccessOptions{Mode: admin.AccessLoopback}})
	h, err := admin.New(admin.Config{Vault: g.vault, Access: access})
	if err != nil {
		t.Fatal(err)
	}
	key, _ := credvault.GenerateMasterKey()
	id, _ := identity.New("gw-host")
	g.client, err = pairing.New(pairing.Config{ControlPlaneURL: registry, Identity: id, Admin: h, Connector: c, DataDir: t.TempDir(), MasterKey: key,
		Name: "laptop", Version: "0.9.0", MaxBackoff: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
}

func (g *localGateway) run(p *pairing.Pairing) {
	ctx, cancel := context.WithCancel(context.Background())
	g.cancel, g.done = cancel, make(chan error, 1)
	go func() { g.done <- g.client.Run(ctx, p) }()
}

// TestMalformedMessages: a control plane that sends junk gets a JSON-RPC
// error for each message and the socket stays up for the next request.
func TestMalformedMessages(t *testing.T) {
	answers := make(chan map[string]any, 10)
	fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer conn.CloseNow()
		conn.SetReadLimit(pairwire.ReadLimit)
		ctx := r.Context()
		if _, _, err := conn.Read(ctx); err != nil { // the pairing message
			return
		}
		ready, _ := json.Marshal(pairwire.Control{Type: pairwire.ControlReady, GatewayID: "gw_fake", Namespace: "alice"})
		conn.Write(ctx, websocket.MessageText, ready)
		for _, m := range []string{
			`not json`,
			`{"jsonrpc":"1.0","id":1,"method":"variables.list"}`,
			`{"jsonrpc":"2.0","id":"big","method":"variables.set","params":{"key":"K","sealed_secrets":"` + strings.Repeat("A", pairwire.MaxMessageBytes) + `"}}`,
			`{"jsonrpc":"2.0","id":"unknown","method":"system.exec"}`,
			`{"jsonrpc":"2.0","id":"params","method":"connections.get","params":[1]}`,
			`{"jsonrpc":"2.0","id":"ok","method":"variables.list"}`,
		} {
			if err := conn.Write(ctx, websocket.MessageText, []byte(m)); err != nil {
				return
			}
			_, b, err := conn.Read(ctx)
			if err != nil {
				return
			}
			var a map[string]any
			json.Unmarshal(b, &a)
			answers <- a
		}
	}))
	defer fake.Close()
	g := newLocalGateway(t, fake.URL)
	g.run(&pairing.Pairing{SessionID: "gps_fake", Code: "ABCDEFGH"})
	defer g.cancel()
	want := []struct {
		id   any
		code float64
	}{{nil, pairwire.CodeParseError}, {float64(1), pairwire.CodeInvalidRequest}, {"big", pairwire.CodeInvalidRequest},
		{"unknown", pairwire.CodeMethodNotFound}, {"params", pairwire.CodeInvalidParams}}
	for _, w := range want {
		select {
		case a := <-answers:
			e, _ := a["error"].(map[string]any)
			if a["id"] != w.id || e == nil || e["code"] != w.code {
				t.Errorf("answer %v, want id %v and error %v", a, w.id, w.code)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("no answer: the socket did not stay up")
		}
	}
	select {
	case a := <-answers:
		if _, ok := a["result"]; a["id"] != "ok" || !ok || a["error"] != nil {
			t.Fatalf("the request after the junk: %v", a)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no answer to the valid request after the junk")
	}
}

// TestBusyGatewayKeepsReading: while the gateway runs as many RPCs as it
// runs at once, a control plane that sends one more gets a refusal at
// once, and its pings are still answered (the client never stops reading,
// so a loaded gateway is not taken for a dead one).
func TestBusyGatewayKeepsReading(t *testing.T) {
	release := make(chan struct{})
	var releaseOnce sync.Once
	unblock := func() { releaseOnce.Do(func() { close(release) }) }
	defer unblock()
	// Each test of connection "slow" waits for its upstream, which waits
	// for release.
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-release }))
	defer upstream.Close()
	defer unblock()
	key, _ := credvault.GenerateMasterKey()
	vault, err := credvault.New(context.Background(), credvault.Config{Store: &credvault.MemoryStore{}, MasterKey: key, PollInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer vault.Close()
	if _, err := vault.Create(context.Background(), &credvault.Connection{ID: "slow", BaseURL: upstream.URL,
		AuthMode: credvault.AuthBearer, AuthSecretKey: "token"}, map[string]string{"token": "slow-token-1"}); err != nil {
		t.Fatal(err)
	}
	access, _ := admin.NewAccess(admin.AccessConfig{AccessOptions: admin.AccessOptions{Mode: admin.AccessLoopback}})
	slowAdmin, err := admin.New(admin.Config{Vault: vault, Access: access})
	if err != nil {
		t.Fatal(err)
	}
	type outcome struct {
		refused map[string]any
		pingErr error
	}
	result := make(chan outcome, 1)
	fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer conn.CloseNow()
		ctx := r.Context()
		if _, _, err := conn.Read(ctx); err != nil { // the pairing message
			return
		}
		ready, _ := json.Marshal(pairwire.Control{Type: pairwire.ControlReady, GatewayID: "gw_fake", Namespace: "alice"})
		conn.Write(ctx, websocket.MessageText, ready)
		for i := range 9 {
			m := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"connections.test","params":{"id":"slow"}}`, i+1)
			if err := conn.Write(ctx, websocket.MessageText, []byte(m)); err != nil {
				return
			}
		}
		answers := make(chan map[string]any, 9)
		go func() {
			for {
				_, b, err := conn.Read(ctx)
				if err != nil {
					return
				}
				var a map[string]any
				json.Unmarshal(b, &a)
				answers <- a
			}
		}()
		var o outcome
		select {
		case o.refused = <-answers:
		case <-time.After(5 * time.Second):
		}
		pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		o.pingErr = conn.Ping(pctx)
		cancel()
		result <- o
		<-ctx.Done()
	}))
	defer fake.Close()
	dir := t.TempDir()
	id, _ := identity.New("gw-host")
	client, err := pairing.New(pairing.Config{ControlPlaneURL: fake.URL, Identity: id, Admin: slowAdmin, DataDir: dir, MasterKey: key})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go client.Run(ctx, &pairing.Pairing{SessionID: "gps_fake", Code: "ABCDEFGH"})
	o := <-result
	unblock()
	e, _ := o.refused["error"].(map[string]any)
	if o.refused == nil || o.refused["id"] != float64(9) || e == nil || e["code"] != float64(pairwire.CodeBusy) {
		t.Errorf("the ninth request while eight run: %v, want an immediate %d refusal", o.refused, pairwire.CodeBusy)
	}
	if o.pingErr != nil {
		t.Errorf("ping while eight RPCs run: %v", o.pingErr)
	}
}

// TestDisconnectAccountRPC: the owner disconnects an OAuth account from
// the dashboard; the gateway forgets it.
func TestDisconnectAccountRPC(t *testing.T) {
	answers := make(chan map[string]any, 2)
	fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer conn.CloseNow()
		conn.SetReadLimit(pairwire.ReadLimit)
		ctx := r.Context()
		if _, _, err := conn.Read(ctx); err != nil {
			return
		}
		ready, _ := json.Marshal(pairwire.Control{Type: pairwire.ControlReady, GatewayID: "gw_fake", Namespace: "alice"})
		conn.Write(ctx, websocket.MessageText, ready)
		for _, m := range []string{
			`{"jsonrpc":"2.0","id":1,"method":"connections.disconnect_account","params":{"id":"drive","subject":"alice","extra":1}}`,
			`{"jsonrpc":"2.0","id":2,"method":"connections.disconnect_account","params":{"id":"drive","subject":"alice"}}`,
		} {
			if err := conn.Write(ctx, websocket.MessageText, []byte(m)); err != nil {
				return
			}
			_, b, err := conn.Read(ctx)
			if err != nil {
				return
			}
			var a map[string]any
			json.Unmarshal(b, &a)
			answers <- a
		}
	}))
	defer fake.Close()
	g := newLocalGateway(t, fake.URL)
	ctx := context.Background()
	if _, err := g.vault.Create(ctx, &credvault.Connection{ID: "drive", BaseURL: "https://www.googleapis.com", AuthMode: credvault.AuthOAuth2AuthorizationCode,
		OAuthIssuer: "https://accounts.google.com", OAuthClientID: "client", OAuthPerSubject: true}, nil); err != nil {
		t.Fatal(err)
	}
	if err := g.vault.ConnectAccount(ctx, "drive", "alice", "refresh-token-of-alice"); err != nil {
		t.Fatal(err)
	}
	g.run(&pairing.Pairing{SessionID: "gps_fake", Code: "ABCDEFGH"})
	defer g.cancel()
	for _, want := range []string{"error", "result"} {
		select {
		case a := <-answers:
			if a[want] == nil {
				t.Fatalf("answer %v, want a %s", a, want)
			}
			if want == "result" && fmt.Sprint(a["result"]) != "map[connection_id:drive revoked_at_provider:false subject:alice]" {
				t.Fatalf("result %v", a["result"])
			}
		case <-time.After(10 * time.Second):
			t.Fatal("no answer")
		}
	}
	if c, _ := g.vault.Connection("drive"); len(c.OAuthAccounts) != 0 {
		t.Fatalf("accounts left: %+v", c.OAuthAccounts)
	}
}

// TestConnectRPCs: a gateway with no Connector answers the connect
// flow's RPCs "method not found", and one with a Connector refuses
// malformed params before running anything.
func TestConnectRPCs(t *testing.T) {
	for _, tc := range []struct {
		name      string
		connector bool
		msg       string
		code      float64
	}{
		{"no connector", false, `{"jsonrpc":"2.0","id":1,"method":"connections.connect_start","params":{"id":"drive","redirect_uri":"https://d.example/oauth/callback"}}`, pairwire.CodeMethodNotFound},
		{"start with an unknown param", true, `{"jsonrpc":"2.0","id":1,"method":"connections.connect_start","params":{"id":"drive","redirect_uri":"https://d.example/cb","scope":"admin"}}`, pairwire.CodeInvalidParams},
		{"finish without a query", true, `{"jsonrpc":"2.0","id":1,"method":"connections.connect_finish","params":{"id":"drive","code":"c"}}`, pairwire.CodeInvalidParams},
		{"finish with a query not of strings", true, `{"jsonrpc":"2.0","id":1,"method":"connections.connect_finish","params":{"id":"drive","query":{"state":["a","b"]}}}`, pairwire.CodeInvalidParams},
		{"finish with a state no flow has", true, `{"jsonrpc":"2.0","id":1,"method":"connections.connect_finish","params":{"id":"drive","query":{"state":"made-up","code":"c"}}}`, pairwire.CodeAPIError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			answers := make(chan map[string]any, 1)
			fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				conn, err := websocket.Accept(w, r, nil)
				if err != nil {
					return
				}
				defer conn.CloseNow()
				conn.SetReadLimit(pairwire.ReadLimit)
				ctx := r.Context()
				if _, _, err := conn.Read(ctx); err != nil {
					return
				}
				ready, _ := json.Marshal(pairwire.Control{Type: pairwire.ControlReady, GatewayID: "gw_fake", Namespace: "alice"})
				conn.Write(ctx, websocket.MessageText, ready)
				if conn.Write(ctx, websocket.MessageText, []byte(tc.msg)) != nil {
					return
				}
				_, b, err := conn.Read(ctx)
				if err != nil {
					return
				}
				var a map[string]any
				json.Unmarshal(b, &a)
				answers <- a
			}))
			defer fake.Close()
			g := newLocalGateway(t, fake.URL)
			if tc.connector {
				tokens, err := upstreamauth.New(upstreamauth.Config{Vault: g.vault})
				if err != nil {
					t.Fatal(err)
				}
				c, err := admin.NewConnector(admin.ConnectorConfig{Vault: g.vault, Tokens: tokens})
				if err != nil {
					t.Fatal(err)
				}
				g.connector(t, fake.URL, c)
			}
			g.run(&pairing.Pairing{SessionID: "gps_fake", Code: "ABCDEFGH"})
			defer g.cancel()
			select {
			case a := <-answers:
				e, _ := a["error"].(map[string]any)
				if e == nil || e["code"] != tc.code {
					t.Fatalf("answer %v, want error %v", a, tc.code)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("no answer")
			}
		})
	}
}
