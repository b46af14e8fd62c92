package controlplane

import (
	"context"
	"net/http"
	"sort"
	"testing"
)

// TestPendingFlood: pending budgets are per namespace and service, with a
// share per agent network, so a flood of claims (a hostile service's key,
// or self-made agent keys sent through one gateway from one address)
// never blocks the genuine claims of another service, nor those of other
// addresses through the same one; and the owner clears a flood in one
// call.
func TestPendingFlood(t *testing.T) {
	t.Parallel()
	budget := func(c *Config) {
		withWebhooks(nil)(c)
		c.MaxPendingClaims, c.MaxPendingPerAgent = 4, 2
	}
	forEachEngineWith(t, budget, func(t *testing.T, e *env, _ StoreConfig) {
		s := e.seed(map[string]any{
			"namespaces": []string{"victim", "mallory", "acme"},
			"services":   []map[string]string{{"slug": "evil-svc", "owner": "mallory"}, {"slug": "github", "owner": "acme"}},
		})
		victim, mallory := withSession(s.Sessions["victim"]), withSession(s.Sessions["mallory"])
		evilKey, githubKey := s.APIKeys["evil-svc"], s.APIKeys["github"]
		rc := newReceiver(t)
		whID, _ := e.createWebhook(mallory, e.serviceID(mallory), map[string]any{"url": rc.ts.URL, "events": []string{EventRejected}})
		submit := func(key, svc, agentIP string) resp {
			b := submitBody("victim", pubKey(newAgent(t, "victim")), svc)
			b["agent_ip"] = agentIP
			return e.signed("POST", "/v1/claims", b, withKey(key))
		}

		var flood []string
		t.Run("hostile service spreads agent_ip over many addresses", func(t *testing.T) {
			for _, ip := range []string{"192.0.2.1", "192.0.2.2", "192.0.2.3", "192.0.2.4"} {
				flood = append(flood, submit(evilKey, "evil-svc", ip).want(t, 201, "").json(t)["claim_id"].(string))
			}
			submit(evilKey, "evil-svc", "192.0.2.5").want(t, http.StatusTooManyRequests, "PENDING_LIMIT_REACHED")
		})
		t.Run("another service of the flooded namespace still files claims", func(t *testing.T) {
			submit(githubKey, "github", "203.0.113.9").want(t, 201, "")
		})
		t.Run("self-made keys from one address through one gateway", func(t *testing.T) {
			submit(githubKey, "github", "198.51.100.7").want(t, 201, "")
			submit(githubKey, "github", "198.51.100.7").want(t, 201, "")
			submit(githubKey, "github", "::ffff:198.51.100.7").want(t, http.StatusTooManyRequests, "AGENT_PENDING_LIMIT_REACHED")
			// The genuine agent at another address is not refused.
			submit(githubKey, "github", "203.0.113.10").want(t, 201, "")
		})
		t.Run("one IPv6 /64 is one agent network", func(t *testing.T) {
			e2 := newEnv(t, e.st, func(c *Config) { c.MaxPendingClaims, c.MaxPendingPerAgent = 10, 2 })
			s := e2.seed(map[string]any{"services": []map[string]string{{"slug": "gitlab", "owner": "acme"}}})
			b := func(ip string) map[string]any {
				b := submitBody("victim", pubKey(newAgent(t, "victim")), "gitlab")
				b["agent_ip"] = ip
				return b
			}
			k := withKey(s.APIKeys["gitlab"])
			e2.signed("POST", "/v1/claims", b("2001:db8:1:2::1"), k).want(t, 201, "")
			e2.signed("POST", "/v1/claims", b("2001:db8:1:2:ffff:ffff:ffff:ffff"), k).want(t, 201, "")
			e2.signed("POST", "/v1/claims", b("2001:db8:1:2::abcd"), k).want(t, http.StatusTooManyRequests, "AGENT_PENDING_LIMIT_REACHED")
			e2.signed("POST", "/v1/claims", b("2001:db8:1:3::1"), k).want(t, 201, "")
		})

		t.Run("reject-pending refusals", func(t *testing.T) {
			path := "/v1/namespaces/victim/claims/reject-pending?service=evil-svc"
			e.do("POST", path, nil).want(t, http.StatusUnauthorized, "ADMIN_UNAUTHORIZED")
			e.do("POST", path, nil, victim, withHeader("Origin", "https://evil.example")).want(t, http.StatusForbidden, "ORIGIN_FORBIDDEN")
			e.do("POST", path, nil, victim, withHeader("Sec-Fetch-Site", "cross-site")).want(t, http.StatusForbidden, "ORIGIN_FORBIDDEN")
			e.do("POST", path, nil, mallory).want(t, http.StatusForbidden, "NAMESPACE_FORBIDDEN")
			e.do("POST", "/v1/namespaces/victim/claims/reject-pending", nil, victim).want(t, http.StatusBadRequest, "VALIDATION_ERROR")
			e.do("POST", "/v1/namespaces/victim/claims/reject-pending?service=Not+A+Slug", nil, victim).want(t, http.StatusBadRequest, "VALIDATION_ERROR")
		})
		t.Run("owner rejects the flood in one call", func(t *testing.T) {
			e.drainEvents()
			r := e.do("POST", "/v1/namespaces/victim/claims/reject-pending?service=evil-svc", nil, victim).want(t, 200, "").json(t)
			if r["rejected"] != float64(len(flood)) || r["service"] != "evil-svc" || r["namespace"] != "victim" {
				t.Fatalf("answer = %v, want %d rejected", r, len(flood))
			}
			var events []string
			for range flood {
				ev := e.events.next(t)
				if ev.Type != EventRejected || ev.Claim.Status != StatusRejected || ev.Claim.Service != "evil-svc" {
					t.Fatalf("event = %+v", ev)
				}
				events = append(events, ev.Claim.ID)
			}
			var hooked []string
			rows, err := e.st.db.QueryContext(context.Background(), `SELECT claim_id FROM webhook_deliveries WHERE webhook_id = $1 AND event_type = $2`, whID, EventRejected)
			if err != nil {
				t.Fatal(err)
			}
			for rows.Next() {
				var id string
				if err := rows.Scan(&id); err != nil {
					t.Fatal(err)
				}
				hooked = append(hooked, id)
			}
			rows.Close()
			sort.Strings(flood)
			sort.Strings(events)
			sort.Strings(hooked)
			if !equalStrings(events, flood) || !equalStrings(hooked, flood) {
				t.Fatalf("flood %v\nevents %v\nwebhook deliveries %v", flood, events, hooked)
			}
			// Other services' pending claims are untouched; a second call finds nothing.
			p := e.do("GET", "/v1/namespaces/victim/claims?status=pending&service=github", nil, victim).want(t, 200, "").json(t)
			if n := p["pagination"].(map[string]any)["total"]; n != float64(4) {
				t.Fatalf("github pending = %v, want 4", n)
			}
			again := e.do("POST", "/v1/namespaces/victim/claims/reject-pending?service=evil-svc", nil, victim).want(t, 200, "").json(t)
			if again["rejected"] != float64(0) {
				t.Fatalf("second call rejected %v", again["rejected"])
			}
			// The budget is free again.
			submit(evilKey, "evil-svc", "192.0.2.1").want(t, 201, "")
		})
	})
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
