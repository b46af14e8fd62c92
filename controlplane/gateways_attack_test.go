package controlplane

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/idnhq/idn/controlplane/internal/gatewaylink"
	"github.com/idnhq/idn/controlplane/internal/webhooks"
	"github.com/idnhq/idn/pairing/pairwire"
)

// The attacks here come from an owner who controls a gateway speaking the
// pairing WebSocket directly; each checks that another owner does not
// notice them.

// silentGateway pairs a gateway to the owner of tok and then never reads
// its socket again: the control plane's writes and close frames go
// unanswered.
func (e *env) silentGateway(tok string) (id string, conn *websocket.Conn) {
	e.t.Helper()
	g := newTestGateway(e.t)
	s, c := e.startPairing(tok)
	conn, _, err := g.dial(e.ts.URL, s)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { conn.CloseNow() })
	b, _ := json.Marshal(g.pairing(s, c))
	if err := conn.Write(context.Background(), websocket.MessageText, b); err != nil {
		e.t.Fatal(err)
	}
	_, data, err := conn.Read(context.Background())
	var ready pairwire.Control
	if err != nil || json.Unmarshal(data, &ready) != nil || ready.Type != pairwire.ControlReady {
		e.t.Fatalf("pairing: %s %v", data, err)
	}
	return ready.GatewayID, conn
}

// rpcLatencies sends n RPCs one after another and returns their
// latencies, sorted; each must succeed.
func rpcLatencies(t *testing.T, e *env, tok, gatewayID string, n int) []time.Duration {
	t.Helper()
	lat := make([]time.Duration, 0, n)
	for range n {
		start := time.Now()
		r := e.do("POST", "/v1/gateways/"+gatewayID+"/rpc", rpcBody("connections.list", nil), withSession(tok))
		lat = append(lat, time.Since(start))
		if r.status != http.StatusOK {
			t.Fatalf("victim's RPC after %v: %d %s", lat[len(lat)-1], r.status, r.body)
		}
	}
	slices.Sort(lat)
	return lat
}

// fullRPC is a variables.set RPC of exactly size bytes of JSON.
func fullRPC(size int) []byte {
	empty, _ := json.Marshal(rpcBody("variables.set", map[string]string{"key": "K", "sealed_secrets": ""}))
	b, _ := json.Marshal(rpcBody("variables.set", map[string]string{"key": "K", "sealed_secrets": strings.Repeat("A", size-len(empty))}))
	return b
}

// try sends an owner's request from a goroutine other than the test's: it
// reports the status and envelope code (0 when the request failed) and
// never stops the test.
func (e *env) try(method, path string, body any, tok string) (int, string) {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(b)
	default:
		raw, _ := json.Marshal(b)
		rd = bytes.NewReader(raw)
	}
	req, _ := http.NewRequest(method, e.ts.URL+path, rd)
	req.Header.Set("Content-Type", "application/json")
	withSession(tok)(req)
	res, err := e.ts.Client().Do(req)
	if err != nil {
		return 0, ""
	}
	defer res.Body.Close()
	var env struct{ Code string }
	json.NewDecoder(res.Body).Decode(&env)
	return res.StatusCode, env.Code
}

func p99(lat []time.Duration) time.Duration { return lat[(len(lat)*99+99)/100-1] }

// TestRelayAttackUnansweredRPCsHoldNoSharedBudget: an owner whose gateway
// reads RPCs and never answers sends 64 RPCs of almost 1 MiB through
// instance B. Each is decoded at once, so none holds the in-flight body
// budget while it waits; beyond the per-owner cap they are refused 429,
// and every other owner's RPC, signed request and sign-up on B goes on.
func TestRelayAttackUnansweredRPCsHoldNoSharedBudget(t *testing.T) {
	for _, engine := range engines {
		t.Run(engine, func(t *testing.T) {
			var a, b *env
			if engine == ProviderPostgres {
				a, b = twoInstances(t, nil)
			} else {
				a = newEnv(t, openStore(t, storeConfig(t, engine)), nil)
				b = a
			}
			s := a.seed(map[string]any{
				"namespaces": []string{"acme", "mallory"},
				"services":   []map[string]string{{"slug": "github", "owner": "acme"}},
			})
			victim, attacker, key := s.Sessions["acme"], s.Sessions["mallory"], s.APIKeys["github"]
			good := a.pairedGateway(victim)
			bad := a.pairedGateway(attacker)
			bad.answerWith(func(rpcRequest) any { return nil })

			const flood = 64
			big := fullRPC(1 << 20)
			var refused, returned atomic.Int64
			var wg sync.WaitGroup
			for range flood {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if status, code := b.try("POST", "/v1/gateways/"+bad.ready.GatewayID+"/rpc", big, attacker); status == http.StatusTooManyRequests && code == "GATEWAY_RPC_LIMIT_REACHED" {
						refused.Add(1)
					}
					returned.Add(1)
				}()
			}
			// Every flood RPC is either waiting at the gateway or answered.
			for bad.served.Load()+returned.Load() < flood {
				time.Sleep(5 * time.Millisecond)
			}

			start := time.Now()
			b.do("POST", "/v1/gateways/"+good.ready.GatewayID+"/rpc", rpcBody("connections.list", nil), withSession(victim)).want(t, http.StatusOK, "")
			t.Logf("victim's RPC during the flood: %v", time.Since(start))
			agent := newAgent(t, "acme")
			b.signed("POST", "/v1/claims", submitBody("acme", pubKey(agent), "github"), withKey(key)).want(t, http.StatusCreated, "")
			if r := b.do("POST", "/v1/auth/signup", map[string]any{"namespace": "newcomer"}); r.status == http.StatusServiceUnavailable {
				t.Fatalf("sign-up during the flood: %d %s", r.status, r.body)
			}
			if n := refused.Load(); n != flood-gatewaylink.MaxRPCsPerOwner {
				t.Errorf("%d of %d flood RPCs refused GATEWAY_RPC_LIMIT_REACHED, want %d", n, flood, flood-gatewaylink.MaxRPCsPerOwner)
			}
			bad.conn.CloseNow() // the waiting RPCs end GATEWAY_OFFLINE
			wg.Wait()
		})
	}
}

// TestRelayAttackSlowClosesDoNotStallOthers: one owner unpairs 20 gateways
// that never read (so no close handshake completes) and floods RPCs that
// are never answered, all through instance B while instance A holds the
// sockets; another owner's RPCs relayed the same way keep their latency.
func TestRelayAttackSlowClosesDoNotStallOthers(t *testing.T) {
	cfg := storeConfig(t, ProviderPostgres)
	a := newEnv(t, openStore(t, cfg), nil)
	b := newEnv(t, openStore(t, cfg), func(c *Config) { c.Gateways.RPCTimeout = 8 * time.Second })
	s := a.seed(map[string]any{"namespaces": []string{"acme", "mallory"}})
	victim, attacker := s.Sessions["acme"], s.Sessions["mallory"]
	good := a.pairedGateway(victim)
	silent := make([]string, 20)
	for i := range silent {
		silent[i], _ = a.silentGateway(attacker)
	}
	mute := a.pairedGateway(attacker)
	mute.answerWith(func(rpcRequest) any { return nil })

	rpcLatencies(t, b, victim, good.ready.GatewayID, 5) // opens both LISTEN connections
	idle := rpcLatencies(t, b, victim, good.ready.GatewayID, 200)

	var unpairs, flood sync.WaitGroup
	for _, id := range silent {
		unpairs.Go(func() {
			if status, code := b.try("DELETE", "/v1/gateways/"+id, nil, attacker); status != http.StatusNoContent {
				t.Errorf("unpair: %d %s", status, code)
			}
		})
	}
	var returned atomic.Int64
	for range 64 {
		flood.Go(func() {
			b.try("POST", "/v1/gateways/"+mute.ready.GatewayID+"/rpc", rpcBody("connections.list", nil), attacker)
			returned.Add(1)
		})
	}
	// The attack is under way: every unpair answered (the sockets' closes
	// now wait on gateways that never read), and every flood RPC refused
	// or waiting at the gateway (or, while the relay is stalled, 3 s gone).
	unpairs.Wait()
	for deadline := time.Now().Add(3 * time.Second); mute.served.Load()+returned.Load() < 64 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	attacked := rpcLatencies(t, b, victim, good.ready.GatewayID, 200)
	mute.conn.CloseNow()
	flood.Wait()

	t.Logf("victim's RPC latency: idle p50 %v p99 %v; under attack p50 %v p99 %v",
		idle[len(idle)/2], p99(idle), attacked[len(attacked)/2], p99(attacked))
	// Twice the idle p99, with a floor for the scheduling noise of a
	// loaded test machine; one stalled close alone costs 5 s.
	if limit := max(2*p99(idle), 100*time.Millisecond); p99(attacked) > limit {
		t.Fatalf("victim's p99 under attack %v, over %v", p99(attacked), limit)
	}
}

// TestWebhookAttackSlowReceiverHoldsNoSharedSlots: one tenant's webhook
// receiver never answers, and 20 of its deliveries are due before another
// tenant's one. The deliveries run on slots shared by every tenant; the
// other tenant's delivery is made at once, not after rounds of the slow
// receiver's attempts have timed out.
func TestWebhookAttackSlowReceiverHoldsNoSharedSlots(t *testing.T) {
	mod := func(c *Config) {
		withWebhooks(func(c *WebhookConfig) { c.Timeout = 3 * time.Second })(c)
		c.MaxPendingClaims = 20
	}
	forEachEngineWith(t, mod, func(t *testing.T, e *env, _ StoreConfig) {
		owner, _ := claimWorld(e)
		mallory, slackKey := withSession(e.sessions["bob"]), e.apiKeys["slack"]
		release := make(chan struct{})
		var started atomic.Int64
		slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			started.Add(1)
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}))
		defer slow.Close()
		var once sync.Once
		free := func() { once.Do(func() { close(release) }) }
		defer free()
		arrived := make(chan int64, 1)
		fast := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			select {
			case arrived <- started.Load():
			default:
			}
			w.WriteHeader(http.StatusNoContent)
		}))
		defer fast.Close()
		e.createWebhook(mallory, e.serviceID(mallory), map[string]any{"url": slow.URL, "events": []string{EventSubmitted}})
		e.createWebhook(owner, e.serviceID(owner), map[string]any{"url": fast.URL, "events": []string{EventSubmitted}})
		for i := range 20 {
			b := submitBody("acme", pubKey(newAgent(t, "acme")), "slack")
			b["agent_ip"] = fmt.Sprintf("10.%d.0.1", i)
			e.signed("POST", "/v1/claims", b, withKey(slackKey)).want(t, 201, "")
		}
		e.signed("POST", "/v1/claims", submitBody("acme", pubKey(newAgent(t, "acme")), "github"), withKey(e.apiKeys["github"])).want(t, 201, "")

		done := make(chan struct{})
		go func() {
			defer close(done)
			e.srv.hooks.DeliverDue(context.Background())
		}()
		select {
		case n := <-arrived:
			if n > webhooks.SlotsPerOwner {
				t.Errorf("the other tenant's delivery waited behind %d attempts on the slow receiver", n)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("the other tenant's delivery never came")
		}
		free()
		<-done
	})
}

// TestRelayAttackGatewayCapAcrossInstances: an owner whose gateway never
// answers sends its RPCs through both instances, each within the owner's
// cap there; the instance holding the socket still lets no more than
// gatewaylink.MaxRPCsPerGateway wait on it, and refuses the rest with 429.
func TestRelayAttackGatewayCapAcrossInstances(t *testing.T) {
	a, b := twoInstances(t, func(c *Config) { c.Gateways.RPCTimeout = 10 * time.Second })
	tok := a.seed(map[string]any{"namespaces": []string{"mallory"}}).Sessions["mallory"]
	g := a.pairedGateway(tok)
	g.answerWith(func(rpcRequest) any { return nil })
	rpc := "/v1/gateways/" + g.ready.GatewayID + "/rpc"
	var refused, returned atomic.Int64
	var wg sync.WaitGroup
	for _, e := range []*env{a, b} {
		for range gatewaylink.MaxRPCsPerOwner {
			wg.Go(func() {
				if status, code := e.try("POST", rpc, rpcBody("connections.list", nil), tok); status == http.StatusTooManyRequests && code == "GATEWAY_RPC_LIMIT_REACHED" {
					refused.Add(1)
				}
				returned.Add(1)
			})
		}
	}
	for g.served.Load()+returned.Load() < 2*gatewaylink.MaxRPCsPerOwner {
		time.Sleep(5 * time.Millisecond)
	}
	if n := g.served.Load(); n > gatewaylink.MaxRPCsPerGateway {
		t.Errorf("%d RPCs reached the gateway at once, past the cap of %d", n, gatewaylink.MaxRPCsPerGateway)
	}
	if n := refused.Load(); n != 2*gatewaylink.MaxRPCsPerOwner-gatewaylink.MaxRPCsPerGateway {
		t.Errorf("%d RPCs refused GATEWAY_RPC_LIMIT_REACHED, want %d", n, 2*gatewaylink.MaxRPCsPerOwner-gatewaylink.MaxRPCsPerGateway)
	}
	g.conn.CloseNow()
	wg.Wait()
}
