package controlplane

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"github.com/idnhq/idn/controlplane/internal/ownerauth"
	"github.com/idnhq/idn/controlplane/internal/web"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idnhq/idn/controlplane/internal/gatewaylink"
	"github.com/idnhq/idn/controlplane/internal/webhooks"
	"github.com/idnhq/idn/pairing/pairwire"
)

// TestNamespaceQuotas: one owner cannot make the control plane hold
// unbounded services, open pairing sessions, gateways or sessions; each
// limit answers its own code, counts only its namespace, frees up as
// items go, and holds under concurrent requests.
func TestNamespaceQuotas(t *testing.T) {
	t.Parallel()
	quotas := func(c *Config) {
		c.MaxServices, c.MaxOpenPairings, c.MaxGateways, c.MaxSessions = 3, 2, 1, 3
	}
	forEachEngineWith(t, quotas, func(t *testing.T, e *env, _ StoreConfig) {
		s := e.seed(map[string]any{"namespaces": []string{"mallory", "alice", "racer"}})
		mallory, alice := withSession(s.Sessions["mallory"]), withSession(s.Sessions["alice"])
		newService := func(owner reqOpt, name string) resp {
			return e.do("POST", "/v1/services", map[string]any{"name": name, "service_endpoint": "https://svc.example"}, owner)
		}

		t.Run("an owner floods services", func(t *testing.T) {
			var last string
			for _, name := range []string{"flood-one", "flood-two", "flood-three"} {
				last = newService(mallory, name).want(t, http.StatusCreated, "").json(t)["service"].(map[string]any)["id"].(string)
			}
			newService(mallory, "flood-four").want(t, http.StatusConflict, "SERVICE_LIMIT_REACHED")
			newService(alice, "alice-svc").want(t, http.StatusCreated, "")
			e.do("DELETE", "/v1/services/"+last, nil, mallory).want(t, http.StatusNoContent, "")
			newService(mallory, "flood-four").want(t, http.StatusCreated, "")
		})
		t.Run("an owner churns api keys", func(t *testing.T) {
			svc := newService(alice, "churn").want(t, http.StatusCreated, "").json(t)["service"].(map[string]any)["id"].(string)
			for range 10 {
				k := e.do("POST", "/v1/services/"+svc+"/keys", nil, alice).want(t, http.StatusCreated, "").json(t)["api_key"].(map[string]any)
				e.do("DELETE", "/v1/services/"+svc+"/keys/"+k["id"].(string), nil, alice).want(t, http.StatusNoContent, "")
			}
			var rows int
			if err := e.st.db.QueryRowContext(context.Background(), `SELECT COUNT(*) FROM api_keys WHERE service_id = $1`, svc).Scan(&rows); err != nil {
				t.Fatal(err)
			}
			// MaxAPIKeys (2) of the harness: the first key, active, the two
			// newest revoked keys kept at the last creation, and the key
			// revoked since.
			if rows > 1+2+1 {
				t.Fatalf("%d key rows after churning 10 keys, want at most 4", rows)
			}
		})
		t.Run("racing service creations do not overshoot", func(t *testing.T) {
			tok := s.Sessions["racer"]
			var (
				wg      sync.WaitGroup
				mu      sync.Mutex
				answers = map[int]int{}
			)
			for i := range 12 {
				wg.Go(func() {
					body, _ := json.Marshal(map[string]any{"name": "race-" + strconv.Itoa(i), "service_endpoint": "https://svc.example"})
					req, _ := http.NewRequest("POST", e.ts.URL+"/v1/services", bytes.NewReader(body))
					req.Header.Set("Content-Type", "application/json")
					withSession(tok)(req)
					res, err := e.ts.Client().Do(req)
					if err != nil {
						t.Error(err)
						return
					}
					res.Body.Close()
					mu.Lock()
					answers[res.StatusCode]++
					mu.Unlock()
				})
			}
			wg.Wait()
			if answers[http.StatusCreated] != 3 || answers[http.StatusConflict] != 9 {
				t.Fatalf("answers %v, want 3 created and 9 refused", answers)
			}
		})

		t.Run("an owner floods pairing sessions", func(t *testing.T) {
			e.startPairing(s.Sessions["mallory"])
			e.startPairing(s.Sessions["mallory"])
			r := e.do("POST", "/v1/gateways/pairings", nil, mallory).want(t, http.StatusTooManyRequests, "PAIRING_LIMIT_REACHED")
			if ra, _ := strconv.Atoi(r.header.Get("Retry-After")); ra < 590 || ra > 600 {
				t.Fatalf("Retry-After = %q, want the oldest session's remaining ~600 s", r.header.Get("Retry-After"))
			}
			e.startPairing(s.Sessions["alice"])
		})
		t.Run("expired pairing sessions are deleted when they expire", func(t *testing.T) {
			count := func() (n int) {
				if err := e.st.db.QueryRowContext(context.Background(), `SELECT COUNT(*) FROM gateway_pairings WHERE namespace = 'mallory'`).Scan(&n); err != nil {
					t.Fatal(err)
				}
				return n
			}
			if n := count(); n != 2 {
				t.Fatalf("%d pairing rows, want 2", n)
			}
			// Gateways below sign with the real clock.
			defer e.offset.Store(0)
			// A minute's margin: the sessions were opened a moment ago by
			// the real clock, longer ago on a loaded machine.
			e.offset.Add(int64(gatewaylink.PairingTTL - time.Minute))
			if err := e.srv.maintain(context.Background()); err != nil {
				t.Fatal(err)
			}
			if n := count(); n != 2 {
				t.Fatalf("%d pairing rows a minute before expiry, want 2", n)
			}
			e.offset.Add(int64(time.Minute))
			if err := e.srv.maintain(context.Background()); err != nil {
				t.Fatal(err)
			}
			if n := count(); n != 0 {
				t.Fatalf("%d pairing rows after expiry, want 0", n)
			}
			e.startPairing(s.Sessions["mallory"])
		})
		t.Run("an owner floods gateways", func(t *testing.T) {
			// Two sessions opened while the namespace has no gateway: the
			// second cannot complete once the first has.
			first, second := newTestGateway(t), newTestGateway(t)
			s1, c1 := e.startPairing(s.Sessions["alice"])
			s2, c2 := e.startPairing(s.Sessions["alice"])
			if ready, err := first.connect(e.ts.URL, first.pairing(s1, c1)); err != nil || ready.Type != pairwire.ControlReady {
				t.Fatalf("first pairing: %+v, %v", ready, err)
			}
			t.Cleanup(func() { first.conn.CloseNow() })
			refused, err := second.connect(e.ts.URL, second.pairing(s2, c2))
			if err != nil || refused.Type != pairwire.ControlError || refused.Code != "GATEWAY_LIMIT_REACHED" {
				t.Fatalf("second pairing: %+v, %v", refused, err)
			}
			e.do("POST", "/v1/gateways/pairings", nil, alice).want(t, http.StatusConflict, "GATEWAY_LIMIT_REACHED")
			// Unpairing frees the slot, and the open session completes.
			e.do("DELETE", "/v1/gateways/"+first.ready.GatewayID, nil, alice).want(t, http.StatusNoContent, "")
			if ready, err := second.connect(e.ts.URL, second.pairing(s2, c2)); err != nil || ready.Type != pairwire.ControlReady {
				t.Fatalf("second pairing after unpairing: %+v, %v", ready, err)
			}
			t.Cleanup(func() { second.conn.CloseNow() })
		})

		t.Run("an owner floods sessions", func(t *testing.T) {
			// The seed's session is the first.
			for range 2 {
				if _, _, err := e.srv.IssueSession(context.Background(), "racer"); err != nil {
					t.Fatal(err)
				}
			}
			_, _, err := e.srv.IssueSession(context.Background(), "racer")
			rl, ok := errors.AsType[*web.RetryLater](err)
			if !ok || !errors.Is(err, ownerauth.ErrSessionLimit) || rl.Wait < 6*24*time.Hour {
				t.Fatalf("fourth session: %v, want the session limit until the oldest expires", err)
			}
			link := e.do("POST", "/v1/test/signin-links", map[string]any{"namespace": "racer"}, withHeader("X-IDN-Test-Seed-Token", seedToken)).
				want(t, http.StatusCreated, "").json(t)["url"].(string)
			_, token, _ := strings.Cut(link, "#")
			r := e.do("POST", "/v1/auth/signin-link", map[string]any{"token": token}).want(t, http.StatusTooManyRequests, "SESSION_LIMIT_REACHED")
			if r.header.Get("Retry-After") == "" {
				t.Fatal("no Retry-After")
			}
			// Ending one frees a slot.
			e.do("POST", "/v1/auth/logout", nil, withSession(s.Sessions["racer"])).want(t, http.StatusOK, "")
			if _, _, err := e.srv.IssueSession(context.Background(), "racer"); err != nil {
				t.Fatalf("after logout: %v", err)
			}
		})
	})
}

// TestTestDeliveriesDoNotFillTheQueue: the delivery queue is shared by
// every owner, so an owner cannot queue test deliveries without bound: a
// webhook holds one pending test delivery at most.
func TestTestDeliveriesDoNotFillTheQueue(t *testing.T) {
	t.Parallel()
	forEachEngineWith(t, withWebhooks(nil), func(t *testing.T, e *env, _ StoreConfig) {
		rc := newReceiver(t)
		owner, _ := claimWorld(e)
		svcID := e.serviceID(owner)
		whID, secret := e.createWebhook(owner, svcID, map[string]any{"url": rc.ts.URL})
		rc.setSecret(secret)
		path := "/v1/services/" + svcID + "/webhooks/" + whID + "/test"
		e.do("POST", path, nil, owner).want(t, http.StatusAccepted, "")
		for range 5 {
			r := e.do("POST", path, nil, owner).want(t, http.StatusTooManyRequests, "RATE_LIMITED")
			if r.header.Get("Retry-After") == "" {
				t.Fatal("no Retry-After")
			}
		}
		if n := e.deliverDue(); n != 1 {
			t.Fatalf("delivered %d, want the one test delivery", n)
		}
		e.do("POST", path, nil, owner).want(t, http.StatusAccepted, "")
		e.do("POST", "/v1/services/"+svcID+"/webhooks/whk_nope/test", nil, owner).want(t, http.StatusNotFound, "WEBHOOK_NOT_FOUND")
	})
}

// TestSlowReceiverOfOneOwnerDoesNotStallOthers: an owner whose webhook
// answers slowly (a tarpit) and who queues many deliveries holds at most
// its share of the delivery slots, so another owner's delivery goes out
// while the tarpit still holds every request it got.
func TestSlowReceiverOfOneOwnerDoesNotStallOthers(t *testing.T) {
	t.Parallel()
	budget := func(c *Config) {
		withWebhooks(nil)(c)
		c.MaxPendingClaims, c.MaxPendingPerAgent = 50, 50
	}
	forEachEngineWith(t, budget, func(t *testing.T, e *env, _ StoreConfig) {
		s := e.seed(map[string]any{
			"namespaces": []string{"mallory", "acme"},
			"services":   []map[string]string{{"slug": "tarpit-svc", "owner": "mallory"}, {"slug": "github", "owner": "acme"}},
		})
		mallory, acme := withSession(s.Sessions["mallory"]), withSession(s.Sessions["acme"])
		release := make(chan struct{})
		var held atomic.Int64
		tarpit := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			held.Add(1)
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}))
		t.Cleanup(tarpit.Close)
		releaseOnce := sync.OnceFunc(func() { close(release) })
		t.Cleanup(releaseOnce)
		got := make(chan struct{}, 1)
		victim := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			select {
			case got <- struct{}{}:
			default:
			}
		}))
		t.Cleanup(victim.Close)
		e.createWebhook(mallory, e.serviceID(mallory), map[string]any{"url": tarpit.URL})
		e.createWebhook(acme, e.serviceID(acme), map[string]any{"url": victim.URL})
		for range 3 * webhooks.Slots {
			e.signed("POST", "/v1/claims", submitBody("mallory", pubKey(newAgent(t, "mallory")), "tarpit-svc"), withKey(s.APIKeys["tarpit-svc"])).want(t, 201, "")
		}
		e.signed("POST", "/v1/claims", submitBody("acme", pubKey(newAgent(t, "acme")), "github"), withKey(s.APIKeys["github"])).want(t, 201, "")

		done := make(chan int)
		go func() {
			n, err := e.srv.hooks.DeliverDue(context.Background())
			if err != nil {
				t.Error(err)
			}
			done <- n
		}()
		select {
		case <-got:
		case <-time.After(10 * time.Second):
			t.Fatalf("the other owner's delivery did not go out while the tarpit held %d requests", held.Load())
		}
		if n := held.Load(); n > webhooks.SlotsPerOwner {
			t.Errorf("the tarpit held %d requests at once, want at most %d", n, webhooks.SlotsPerOwner)
		}
		releaseOnce()
		if n := <-done; n != 3*webhooks.Slots+1 {
			t.Fatalf("attempted %d deliveries, want %d", n, 3*webhooks.Slots+1)
		}
	})
}
